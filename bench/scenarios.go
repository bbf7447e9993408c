package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
)

// baseline is one pgbench script: the SQL our scenarios are compared with.
type baseline struct {
	key, name, script string
}

var baselines = []baseline{
	{"spread", "pgbench: claim CTE, 10,000 SKUs", "claim_spread.sql"},
	{"hot", "pgbench: claim CTE, one SKU", "claim_hot.sql"},
	{"codes", "pgbench: code claim, SKIP LOCKED", "claim_code.sql"},
	{"read", "pgbench: 20-SKU balance read", "read20.sql"},
}

// target is a goal to show next to a ratio; the bench never enforces it.
type target struct {
	clients int
	ratio   float64
}

// scenario is one of our rows: an operation over HTTP/GraphQL, compared
// with the baseline named by base.
type scenario struct {
	key, name, base string
	target          target
	// make returns the per-request function for one cell; cell makes
	// request keys unique across cells.
	make func(b *bench, cell, clients int) op
	// background, if set, runs alongside the cell with as many clients and
	// is not measured: the load the row is measured under.
	background func(b *bench, cell, clients int) op
}

var scenarios = []scenario{
	{"spread-token", "reserve 1 of 10,000 SKUs (checkout token)", "spread", target{32, 0.5}, reserveOp(spreadSKU, true), nil},
	{"spread-service", "reserve 1 of 10,000 SKUs (service key)", "spread", target{32, 0.5}, reserveOp(spreadSKU, false), nil},
	{"reserve-confirm", "reserve → confirm pairs (token, then service key)", "spread", target{}, reserveConfirmOp, nil},
	{"hot", "reserve on one hot SKU (checkout token)", "hot", target{64, 5}, reserveOp(func(b *bench) string { return b.cat.hot }, true), nil},
	{"codes", "reserve a CODES SKU (checkout token)", "codes", target{32, 0.5}, reserveOp(func(b *bench) string { return b.cat.codesSKU }, true), nil},
	{"availability", "availability of 20 SKUs (anonymous)", "read", target{32, 0.5}, availabilityOp, nil},
	{"availability-under-load", "availability of 20 SKUs (anonymous), as many clients reserving other SKUs", "read", target{}, availabilityOp,
		reserveOp(otherSKU, true)},
}

const holdTTL = "1800" // long enough that no hold expires while the bench runs; a checkout token's most

func spreadSKU(b *bench) string { return b.cat.spread[rand.IntN(len(b.cat.spread))] }

// readSKU and otherSKU split the spread SKUs in halves: storefront reads
// take the first, the reserve load under which reads are also measured the
// second, so that load is on other SKUs.
func readSKU(b *bench) string { return b.cat.spread[rand.IntN(len(b.cat.spread)/2)] }

func otherSKU(b *bench) string {
	half := len(b.cat.spread) / 2
	return b.cat.spread[half+rand.IntN(len(b.cat.spread)-half)]
}

// clientState is one load client's reusable buffers.
type clientState struct {
	body, resp []byte
	n          int
}

// appendReserve appends a reserve request for one unit of sku. The body is
// assembled from constant pieces into a reused buffer.
func appendReserve(dst []byte, checkoutID, requestKey, ttl, sku, loc string) []byte {
	dst = append(dst, `{"query":"mutation($in:ReserveInput!){reserve(input:$in){reservation{id} userErrors{code}}}","variables":{"in":{"checkoutId":"`...)
	dst = append(dst, checkoutID...)
	dst = append(dst, `","requestKey":"`...)
	dst = append(dst, requestKey...)
	dst = append(dst, `","ttlSeconds":`...)
	dst = append(dst, ttl...)
	dst = append(dst, `,"lines":[{"sku":"`...)
	dst = append(dst, sku...)
	dst = append(dst, `","location":"`...)
	dst = append(dst, loc...)
	return append(dst, `","quantity":1}]}}}`...)
}

// credentials returns client c's checkoutId and bearer: a shopper's
// checkout token as a browser would send it, or the service key.
func (b *bench) credentials(c int, token bool) (string, string, error) {
	if token {
		return b.shoppers.next(c)
	}
	return "svc-" + strconv.Itoa(c), b.serviceKey, nil
}

// reserveOp reserves one unit of pick's SKU per request, each with a fresh
// requestKey.
func reserveOp(pick func(*bench) string, token bool) func(b *bench, cell, clients int) op {
	return func(b *bench, cell, clients int) op {
		st := make([]clientState, clients)
		prefix := "c" + strconv.Itoa(cell) + "-"
		return func(ctx context.Context, c int) error {
			s := &st[c]
			s.n++
			co, bearer, err := b.credentials(c, token)
			if err != nil {
				return err
			}
			s.body = appendReserve(s.body[:0], co, prefix+strconv.Itoa(s.n), holdTTL, pick(b), b.cat.locCode)
			if s.resp, err = b.gql.post(ctx, s.body, bearer, s.resp); err != nil {
				return err
			}
			return mutationOK(s.resp)
		}
	}
}

var idKey = []byte(`"id":"`)

// reserveConfirmOp is a whole checkout: the browser reserves with its
// token, the payment webhook confirms with the service key. One op is one
// pair.
func reserveConfirmOp(b *bench, cell, clients int) op {
	st := make([]clientState, clients)
	prefix := "c" + strconv.Itoa(cell) + "-"
	return func(ctx context.Context, c int) error {
		s := &st[c]
		s.n++
		key := prefix + strconv.Itoa(s.n)
		co, token, err := b.shoppers.next(c)
		if err != nil {
			return err
		}
		s.body = appendReserve(s.body[:0], co, key, holdTTL, spreadSKU(b), b.cat.locCode)
		if s.resp, err = b.gql.post(ctx, s.body, token, s.resp); err != nil {
			return err
		}
		if err := mutationOK(s.resp); err != nil {
			return err
		}
		id, ok := jsonString(s.resp, idKey)
		if !ok {
			return fmt.Errorf("reserve answered without an id: %.200s", s.resp)
		}
		s.body = append(s.body[:0], `{"query":"mutation($in:ConfirmReservationInput!){confirmReservation(input:$in){reservation{status} userErrors{code}}}","variables":{"in":{"id":"`...)
		s.body = append(s.body, id...)
		s.body = append(s.body, `","orderRef":"ORD-`...)
		s.body = append(s.body, co...)
		s.body = append(s.body, '-')
		s.body = append(s.body, key...)
		s.body = append(s.body, `"}}}`...)
		if s.resp, err = b.gql.post(ctx, s.body, b.serviceKey, s.resp); err != nil {
			return err
		}
		return mutationOK(s.resp)
	}
}

var availabilityKey = []byte(`{"data":{"availability":[`)

// availabilityOp reads 20 random SKUs anonymously, as a storefront page.
func availabilityOp(b *bench, cell, clients int) op {
	st := make([]clientState, clients)
	return func(ctx context.Context, c int) error {
		s := &st[c]
		s.body = append(s.body[:0], `{"query":"query($s:[String!]!){availability(skus:$s){sku available}}","variables":{"s":[`...)
		for i := range 20 {
			if i > 0 {
				s.body = append(s.body, ',')
			}
			s.body = append(s.body, '"')
			s.body = append(s.body, readSKU(b)...)
			s.body = append(s.body, '"')
		}
		s.body = append(s.body, `]}}`...)
		var err error
		if s.resp, err = b.gql.post(ctx, s.body, "", s.resp); err != nil {
			return err
		}
		if len(s.resp) < len(availabilityKey) || string(s.resp[:len(availabilityKey)]) != string(availabilityKey) {
			return fmt.Errorf("availability: %.200s", s.resp)
		}
		return nil
	}
}
