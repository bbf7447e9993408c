package main

import (
	"context"
	"fmt"
	"math/rand/v2"
)

// naiveProc is the running naive server (naive.go) and the load
// generator's clients of its two endpoints, which share one keep-alive
// transport as ours does.
type naiveProc struct {
	*childProc
	reserve, confirm *gqlClient
}

// startNaive starts the naive child on the bench database with our pool's
// size, holding codes against cat's code line.
func (b *bench) startNaive(httpClients int) (*naiveProc, error) {
	return startNaiveChild(naiveConfig{DatabaseURL: b.dbURL, MaxConns: int32(b.opts.maxConns), CodeLine: b.naiveCat.codeLine}, httpClients)
}

// startNaiveChild starts `bench -naive-serve` with cfg and makes clients
// for httpClients concurrent requests.
func startNaiveChild(cfg naiveConfig, httpClients int) (*naiveProc, error) {
	child, err := startChild("naive", "-naive-serve", cfg)
	if err != nil {
		return nil, err
	}
	g := newGQLClient(child.url, httpClients)
	reserve, confirm := *g, *g
	reserve.url, confirm.url = child.url+"/reserve", child.url+"/confirm"
	logf("naive: net/http + encoding/json + pgxpool (pid %d, %d connections) on %s", child.pid(), cfg.MaxConns, child.url)
	return &naiveProc{childProc: child, reserve: &reserve, confirm: &confirm}, nil
}

// appendNaiveReserve appends POST /reserve's body for one unit of sku.
func appendNaiveReserve(dst []byte, sku, loc string) []byte {
	dst = append(dst, `{"sku":"`...)
	dst = append(dst, sku...)
	dst = append(dst, `","location":"`...)
	dst = append(dst, loc...)
	return append(dst, `","quantity":1}`...)
}

// naiveReserve reserves one unit of pick's SKU and returns the answer,
// which carries the hold's id.
func (n *naiveProc) naiveReserve(ctx context.Context, s *clientState, sku, loc string) error {
	s.body = appendNaiveReserve(s.body[:0], sku, loc)
	var err error
	s.resp, err = n.reserve.post(ctx, s.body, "", s.resp)
	return err
}

// naiveReserveOp is reserveOp against the naive server: one unit of pick's
// SKU per request (any answer but 200 is a failed request, so a naive
// server out of stock would show as failures, not speed).
func naiveReserveOp(pick func(*bench) string) func(b *bench, cell, clients int) op {
	return func(b *bench, cell, clients int) op {
		st := make([]clientState, clients)
		return func(ctx context.Context, c int) error {
			return b.naive.naiveReserve(ctx, &st[c], pick(b), b.cat.locCode)
		}
	}
}

// naiveReserveConfirmOp is reserveConfirmOp against the naive server: a
// reserve, then a confirm of the hold it made. One op is one pair.
func naiveReserveConfirmOp(b *bench, cell, clients int) op {
	st := make([]clientState, clients)
	return func(ctx context.Context, c int) error {
		s := &st[c]
		if err := b.naive.naiveReserve(ctx, s, naiveSpreadSKU(b), b.cat.locCode); err != nil {
			return err
		}
		id, ok := jsonString(s.resp, idKey)
		if !ok {
			return fmt.Errorf("naive reserve answered without an id: %.200s", s.resp)
		}
		s.body = append(append(append(s.body[:0], `{"id":"`...), id...), `"}`...)
		var err error
		s.resp, err = b.naive.confirm.post(ctx, s.body, "", s.resp)
		return err
	}
}

func naiveSpreadSKU(b *bench) string {
	return b.naiveCat.spread[rand.IntN(len(b.naiveCat.spread))]
}
func naiveHotSKU(b *bench) string   { return b.naiveCat.hot }
func naiveCodesSKU(b *bench) string { return b.naiveCat.codes }
