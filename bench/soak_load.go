package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// The soak's load: a moderate mix (the machine has two cores shared with
// PostgreSQL, and what is measured is growth, not throughput), each kind a
// closedLoop of bench's with a pause between requests.
const (
	soakReaders         = 3 // anonymous availability of 20 SKUs
	soakTokenClients    = 3 // reserve with a checkout token, then confirm, release or leave to expire
	soakServiceClients  = 2 // the same with the service key
	soakStockClients    = 1 // admin receiveStock / adjustStock
	soakCodesClients    = 1 // reserve the CODES SKU with a checkout token, then confirm (or release)
	soakHTTPClients     = soakReaders + soakTokenClients + soakServiceClients + soakStockClients + soakCodesClients
	soakSubscribers     = 4 // stockChanged over WebSocket, reconnecting every 2-8 s
	soakThink           = 10 * time.Millisecond
	soakCodesThink      = 20 * time.Millisecond // so the CODES client stays under soakCodesRate
	soakCodesRate       = 60                    // CODES reserves/s the import stocks codes for
	soakLongTTL         = 1800                  // seconds: holds confirmed or released (a checkout token's most); none expires in the run
	soakShortTTLMin     = 2                     // seconds: holds left to expire
	soakShortTTLMax     = 6
	soakSubscriberHoldS = 2 // a subscriber stays 2 .. 2+soakSubscriberJitS seconds
	soakSubscriberJitS  = 6
)

// soakLoad is the soak's load generator and its counters.
type soakLoad struct {
	b *bench
	soakCounters
}

// soakKind is one kind of load: clients running op in a closed loop.
type soakKind struct {
	name    string
	clients int
	op      op
}

func (l *soakLoad) kinds() []soakKind {
	return []soakKind{
		{"availability reads", soakReaders, l.counted("availability", soakThink, l.countReads(availabilityOp(ours)(l.b, 0, soakReaders)))},
		{"checkout-token reserves", soakTokenClients, l.counted("token checkout", soakThink, l.checkoutOp(true, 0))},
		{"service-key reserves", soakServiceClients, l.counted("service checkout", soakThink, l.checkoutOp(false, 0))},
		{"admin stock changes", soakStockClients, l.counted("stock", soakThink, l.stockOp())},
		{"CODES reserves", soakCodesClients, l.counted("codes", soakCodesThink, l.codesOp(soakTokenClients))},
		{"stockChanged subscribers", soakSubscribers, l.counted("subscriber", 0, l.subscriberOp)},
	}
}

// counted records an op's failure under kind and pauses think after it.
// Failures after ctx ended (ctrl-C) are not the server's.
func (l *soakLoad) counted(kind string, think time.Duration, fn op) op {
	return func(ctx context.Context, c int) error {
		err := fn(ctx, c)
		if err != nil && ctx.Err() == nil {
			l.errors.Add(1)
			l.errMu.Lock()
			if l.errCounts == nil {
				l.errCounts, l.firstErrs = map[string]int{}, map[string]string{}
			}
			if l.errCounts[kind] == 0 {
				l.firstErrs[kind] = err.Error()
				logf("soak: %s failed: %v", kind, err)
			}
			l.errCounts[kind]++
			l.errMu.Unlock()
		}
		if think > 0 {
			t := time.NewTimer(think)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		return err
	}
}

// firstErrors lists failures by kind with the first of each.
func (l *soakLoad) firstErrors() string {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	var kinds []string
	for k := range l.errCounts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "\n       %s: %d, first: %.300s", k, l.errCounts[k], l.firstErrs[k])
	}
	return b.String()
}

// countReads counts bench's availability op as one request.
func (l *soakLoad) countReads(fn op) op {
	return func(ctx context.Context, c int) error {
		l.requests.Add(1)
		l.reads.Add(1)
		return fn(ctx, c)
	}
}

// post sends s.body and keeps the answer in s.resp, counting the request.
func (l *soakLoad) post(ctx context.Context, s *clientState, bearer string) error {
	l.requests.Add(1)
	var err error
	s.resp, err = l.b.gql.post(ctx, s.body, bearer, s.resp)
	return err
}

// reserve holds one unit of sku for ttl seconds and returns the
// reservation's id.
func (l *soakLoad) reserve(ctx context.Context, s *clientState, co, bearer, key string, ttl int, sku string) (string, error) {
	s.body = appendReserve(s.body[:0], co, key, strconv.Itoa(ttl), sku, l.b.cat.locCode)
	if err := l.post(ctx, s, bearer); err != nil {
		return "", err
	}
	if err := mutationOK(s.resp); err != nil {
		return "", err
	}
	id, ok := jsonString(s.resp, idKey)
	if !ok {
		return "", fmt.Errorf("reserve answered without an id: %.200s", s.resp)
	}
	l.reserves.Add(1)
	return string(id), nil
}

// confirm sells reservation id with the service key, as a payment webhook.
func (l *soakLoad) confirm(ctx context.Context, s *clientState, id, orderRef string) error {
	s.body = append(s.body[:0], `{"query":"mutation($in:ConfirmReservationInput!){confirmReservation(input:$in){reservation{status} userErrors{code}}}","variables":{"in":{"id":"`...)
	s.body = append(s.body, id...)
	s.body = append(s.body, `","orderRef":"`...)
	s.body = append(s.body, orderRef...)
	s.body = append(s.body, `"}}}`...)
	if err := l.post(ctx, s, l.b.serviceKey); err != nil {
		return err
	}
	if err := mutationOK(s.resp); err != nil {
		return err
	}
	l.confirms.Add(1)
	return nil
}

// release gives reservation id back, as its owner (bearer).
func (l *soakLoad) release(ctx context.Context, s *clientState, id, bearer string) error {
	s.body = append(s.body[:0], `{"query":"mutation($in:ReleaseReservationInput!){releaseReservation(input:$in){reservation{status} userErrors{code}}}","variables":{"in":{"id":"`...)
	s.body = append(s.body, id...)
	s.body = append(s.body, `","reason":"CHECKOUT_ABANDONED"}}}`...)
	if err := l.post(ctx, s, bearer); err != nil {
		return err
	}
	if err := mutationOK(s.resp); err != nil {
		return err
	}
	l.releases.Add(1)
	return nil
}

// checkoutOp is one checkout on a spread SKU, with a checkout token (client
// c+first's) or the service key: 40% confirmed, 30% released, 30% left to
// expire within a few seconds, so the expiry jobs run throughout.
func (l *soakLoad) checkoutOp(token bool, first int) op {
	st := make([]clientState, soakTokenClients+soakServiceClients)
	prefix := "soak-svc-"
	if token {
		prefix = "soak-tok-"
	}
	return func(ctx context.Context, c int) error {
		s := &st[c]
		s.n++
		co, bearer, err := l.b.credentials(c+first, token)
		if err != nil {
			return err
		}
		key := prefix + strconv.Itoa(c) + "-" + strconv.Itoa(s.n)
		fate, ttl := rand.IntN(10), soakLongTTL
		if fate >= 7 {
			ttl = soakShortTTLMin + rand.IntN(soakShortTTLMax-soakShortTTLMin+1)
		}
		id, err := l.reserve(ctx, s, co, bearer, key, ttl, spreadSKU(l.b))
		if err != nil {
			return err
		}
		switch {
		case fate < 4:
			return l.confirm(ctx, s, id, "ORD-"+key)
		case fate < 7:
			return l.release(ctx, s, id, bearer)
		}
		l.shortHolds.Add(1)
		return nil
	}
}

// codesOp reserves one code of the CODES SKU with checkout token
// c+first's and confirms it (one in five is released instead, returning
// the code).
func (l *soakLoad) codesOp(first int) op {
	st := make([]clientState, soakCodesClients)
	return func(ctx context.Context, c int) error {
		s := &st[c]
		s.n++
		co, bearer, err := l.b.credentials(c+first, true)
		if err != nil {
			return err
		}
		key := "soak-codes-" + strconv.Itoa(c) + "-" + strconv.Itoa(s.n)
		id, err := l.reserve(ctx, s, co, bearer, key, soakLongTTL, l.b.cat.codesSKU)
		if err != nil {
			return err
		}
		l.codesReserves.Add(1)
		if rand.IntN(5) == 0 {
			return l.release(ctx, s, id, bearer)
		}
		return l.confirm(ctx, s, id, "ORD-"+key)
	}
}

// stockOp is the admin at the goods-in desk: a delivery of 1-10 units or a
// cycle-count correction of ±1-3 on a random spread SKU (each has a
// million on hand, so a correction never goes below what is reserved).
func (l *soakLoad) stockOp() op {
	st := make([]clientState, soakStockClients)
	return func(ctx context.Context, c int) error {
		s := &st[c]
		s.n++
		sku := spreadSKU(l.b)
		if s.n%2 == 0 {
			s.body = append(s.body[:0], `{"query":"mutation($in:ReceiveStockInput!){receiveStock(input:$in){balance{onHand} userErrors{code}}}","variables":{"in":{"sku":"`...)
			s.body = append(s.body, sku...)
			s.body = append(s.body, `","location":"`...)
			s.body = append(s.body, l.b.cat.locCode...)
			s.body = append(s.body, `","quantity":`...)
			s.body = strconv.AppendInt(s.body, int64(1+rand.IntN(10)), 10)
			s.body = append(s.body, `,"reference":"soak delivery `...) // one per call: receipts are idempotent per reference
			s.body = appendSoakRef(s.body, c, s.n)
			s.body = append(s.body, `"}}}`...)
		} else {
			delta := 1 + rand.IntN(3)
			if rand.IntN(2) == 0 {
				delta = -delta
			}
			s.body = append(s.body[:0], `{"query":"mutation($in:AdjustStockInput!){adjustStock(input:$in){balance{onHand} userErrors{code}}}","variables":{"in":{"sku":"`...)
			s.body = append(s.body, sku...)
			s.body = append(s.body, `","location":"`...)
			s.body = append(s.body, l.b.cat.locCode...)
			s.body = append(s.body, `","delta":`...)
			s.body = strconv.AppendInt(s.body, int64(delta), 10)
			s.body = append(s.body, `,"reason":"cycle_count","reference":"soak count `...)
			s.body = appendSoakRef(s.body, c, s.n)
			s.body = append(s.body, `"}}}`...)
		}
		if err := l.post(ctx, s, l.b.adminKey); err != nil {
			return err
		}
		if err := mutationOK(s.resp); err != nil {
			return err
		}
		l.stockOps.Add(1)
		return nil
	}
}

// subscriberOp is one stockChanged subscription (bench's subscriber):
// connect, read events for 2-8 s, then leave, alternately politely
// (complete, close handshake) and abruptly (TCP close), so the server's
// clean-up of both is exercised. The server ending it first is a failure.
func (l *soakLoad) subscriberOp(ctx context.Context, c int) error {
	l.subConnects.Add(1)
	sub, err := dialSubscriber(ctx, l.b.srv.URL, l.b.adminKey, stockChangedSub(0), nil)
	if err != nil {
		return err
	}
	// The reader runs until the connection is closed below, not on ctx:
	// coder/websocket closes a connection whose read context ends.
	readCtx, stopRead := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRead()
	var from atomic.Int64 // 0: count every event
	done := make(chan struct{})
	go func() {
		sub.read(readCtx, &from, false)
		close(done)
	}()
	var failure error
	hold := time.NewTimer(time.Duration(soakSubscriberHoldS*1000+rand.IntN(soakSubscriberJitS*1000)) * time.Millisecond)
	select {
	case <-done:
		failure = errors.New("stockChanged: the server ended the subscription")
	case <-hold.C:
	case <-ctx.Done():
	}
	hold.Stop()
	if rand.IntN(2) == 0 {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = sub.conn.Write(wctx, websocket.MessageText, []byte(`{"id":"1","type":"complete"}`))
		cancel()
		_ = sub.conn.Close(websocket.StatusNormalClosure, "")
	} else {
		_ = sub.conn.CloseNow()
	}
	stopRead()
	<-done
	l.events.Add(int64(sub.events))
	return failure
}

// soakRun tells this run's stock references from an earlier run's on the
// same database.
var soakRun = strconv.FormatInt(time.Now().UnixNano(), 36)

// appendSoakRef appends a reference unique to this run, client and call:
// receiveStock is idempotent per (sku, location, reference), so a repeated
// one would be a replay, not a new receipt (an adjustment's reference is
// free text; a unique one keeps the ledger readable).
func appendSoakRef(b []byte, client, n int) []byte {
	b = append(b, soakRun...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(client), 10)
	b = append(b, '-')
	return strconv.AppendInt(b, int64(n), 10)
}
