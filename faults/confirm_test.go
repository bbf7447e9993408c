package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/pgtest"
)

const confirmMutation = `mutation($in: ConfirmReservationInput!) { confirmReservation(input: $in) {
	reservation { id status } order { ref lines { sku quantity } } userErrors { code message } } }`

// confirmOutcome is how one confirm attempt ended as its client saw it.
type confirmOutcome struct {
	kind   kind // held stands for confirmed
	status string
	ref    string
	code   string
	detail string
}

// confirm sends one confirm and classifies the answer as reserve does.
func (h *harness) confirm(ctx context.Context, url, id, ref string) confirmOutcome {
	r, err := h.post(ctx, url, h.service, confirmMutation, map[string]any{"in": map[string]any{"id": id, "orderRef": ref}})
	switch {
	case err != nil && r.Status == 0:
		return confirmOutcome{kind: noAnswer, detail: err.Error()}
	case r.Status >= 500:
		return confirmOutcome{kind: status5xx, detail: fmt.Sprintf("HTTP %d", r.Status)}
	case err != nil || r.Status != 200:
		return confirmOutcome{kind: unclean, detail: fmt.Sprintf("HTTP %d %v %.300s", r.Status, err, r.raw)}
	case len(r.Errors) > 0:
		if r.code() == "INTERNAL" {
			return confirmOutcome{kind: internal, detail: r.Errors[0].Message}
		}
		return confirmOutcome{kind: unclean, detail: fmt.Sprintf("GraphQL error %s: %s", r.code(), r.Errors[0].Message)}
	}
	var p struct {
		Reservation *struct{ Status string } `json:"reservation"`
		Order       *struct{ Ref string }    `json:"order"`
		UserErrors  []struct{ Code, Message string }
	}
	if err := json.Unmarshal(r.Data["confirmReservation"], &p); err != nil {
		return confirmOutcome{kind: unclean, detail: fmt.Sprintf("payload %v: %.300s", err, r.raw)}
	}
	switch {
	case p.Reservation != nil && p.Order != nil && len(p.UserErrors) == 0:
		return confirmOutcome{kind: held, status: p.Reservation.Status, ref: p.Order.Ref}
	case len(p.UserErrors) > 0:
		return confirmOutcome{kind: refused, code: p.UserErrors[0].Code, detail: p.UserErrors[0].Message}
	}
	return confirmOutcome{kind: unclean, detail: fmt.Sprintf("payload: %.300s", r.raw)}
}

// TestKillInstanceMidConfirm: holds are confirmed by 24 payment-backend
// clients through two instances (confirms of one instance coalesce into
// batches) and one instance is killed with SIGKILL in the middle. A client
// whose confirm got no answer sends the same confirm (same orderRef) to the
// survivor until it is answered. Afterwards every hold is confirmed exactly
// once: one order with the ref its client was told, its lines, one
// 'confirmed' ledger row per line and one event, the stock off on hand once,
// nothing left reserved, and the ledger reconciled.
func TestKillInstanceMidConfirm(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pgtest.NewDatabase(t))
	a := h.start("A", nil)
	b := h.start("B", nil)
	h.createKeys()
	skus := []string{"CF-1", "CF-2", "CF-3", "CF-4"}
	const perSKU = 5000
	s := stock{locations: []string{"AMS"}, quantity: map[string]map[string]int{}}
	for _, sku := range skus {
		s.quantity[sku] = map[string]int{"AMS": perSKU}
	}
	h.loadCatalog(b.url, s)

	// The holds, made before the fault.
	const holds, clients = 1500, 24
	ids := make([]string, holds)
	units := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range clients {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < holds; i = int(next.Add(1)) - 1 {
				sku := skus[i%len(skus)]
				in := reserveReq{CheckoutID: fmt.Sprintf("cf-%d", i%97), RequestKey: fmt.Sprint("k-", i), TTLSeconds: 1800,
					Lines: []line{{SKU: sku, Location: "AMS", Quantity: 1 + i%3}}}
				o := h.reserve(t.Context(), b.url, h.service, in)
				if o.kind != held {
					t.Errorf("reserve %d: %s %s", i, o.kind, o.detail)
					return
				}
				mu.Lock()
				ids[i] = o.id
				units[sku] += 1 + i%3
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Confirms through both instances; A is killed during them.
	var killed atomic.Bool
	var retried, cutOff atomic.Int64
	told := make([]confirmOutcome, holds)
	next.Store(0)
	for c := range clients {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < holds; i = int(next.Add(1)) - 1 {
				ref := fmt.Sprint("ORD-CF-", i)
				url := []string{a.url, b.url}[(i+c)%2]
				deadline := time.Now().Add(30 * time.Second)
				for n := 1; ; n++ {
					if killed.Load() {
						url = b.url
					}
					o := h.confirm(t.Context(), url, ids[i], ref)
					if o.kind.answered() {
						told[i] = o
						if n > 1 {
							retried.Add(1)
						}
						break
					}
					if o.kind == unclean {
						t.Errorf("confirm %d: unclean answer: %s", i, o.detail)
						return
					}
					cutOff.Add(1)
					if time.Now().After(deadline) {
						t.Errorf("confirm %d: no answer by the deadline; last %s %s", i, o.kind, o.detail)
						return
					}
					url = b.url
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(400 * time.Millisecond)
	doneBefore := int(next.Load())
	a.kill9()
	killed.Store(true)
	h.report("injected: SIGKILL of instance A after about %d of %d confirms had started; confirms continue on B", doneBefore, holds)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if cutOff.Load() == 0 {
		t.Errorf("no confirm was cut off by the kill: the fault hit nothing (%d had started)", doneBefore)
	}

	// What the clients were told, against the database.
	for i, o := range told {
		if o.kind != held || o.status != "CONFIRMED" || o.ref != fmt.Sprint("ORD-CF-", i) {
			t.Errorf("confirm %d was told %+v", i, o)
		}
	}
	var orders, orderLines, wrongRef, ledgerRows, events, heldLeft, notConfirmed int
	if err := h.db.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM orders),
		       (SELECT count(*) FROM order_lines),
		       (SELECT count(*) FROM orders o JOIN reservations r ON r.id = o.reservation_id
		        WHERE o.ref <> 'ORD-CF-' || substr(r.request_key, 3)),
		       (SELECT count(*) FROM stock_movements WHERE cause = 'confirmed'),
		       (SELECT count(*) FROM stock_events WHERE cause = 'confirmed'),
		       (SELECT coalesce(sum(reserved), 0) FROM balances),
		       (SELECT count(*) FROM reservations WHERE status <> 'confirmed')`).
		Scan(&orders, &orderLines, &wrongRef, &ledgerRows, &events, &heldLeft, &notConfirmed); err != nil {
		t.Fatal(err)
	}
	if orders != holds || orderLines != holds || wrongRef != 0 || ledgerRows != holds || events != holds || heldLeft != 0 || notConfirmed != 0 {
		t.Errorf("after the fault: %d orders, %d order lines, %d with another ref than their client's, %d 'confirmed' ledger rows, %d events, %d units still reserved, %d reservations not confirmed; want %d, %d, 0, %d, %d, 0, 0",
			orders, orderLines, wrongRef, ledgerRows, events, heldLeft, notConfirmed, holds, holds, holds, holds)
	}
	for _, sku := range skus {
		var onHand int
		if err := h.db.QueryRow(context.Background(), `SELECT b.on_hand FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = $1`, sku).Scan(&onHand); err != nil {
			t.Fatal(err)
		}
		if onHand != perSKU-units[sku] {
			t.Errorf("%s: on hand %d, want %d", sku, onHand, perSKU-units[sku])
		}
	}
	h.reconcile()
	h.report("verified: %d holds confirmed exactly once each (%d confirms cut off by the kill and retried on B, %d clients needed a retry); orders, lines, ledger and events match; on hand down by exactly the confirmed units; reconciliation empty",
		holds, cutOff.Load(), retried.Load())
}
