package jobs_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"inventory/domain"
)

// A storm of holds falls due in the same second while checkouts confirm and
// release some of them: the real River client's expiry jobs end the rest in
// sets. Every hold ends exactly once (one ledger row ending it, by the path
// that won), the stock is back, the stream of stock events has one event per
// ended hold, and the ledger reconciles.
func TestExpiryStormEndsEachHoldOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		skus   = 4
		holds  = 1200 // several sets of SetSize
		ttl    = 3
		onHand = holds
	)
	for i := range skus {
		b.Stock(t, fmt.Sprintf("SKU-%d", i), "AMS", onHand)
	}
	ids := make([]string, holds)
	var wg sync.WaitGroup
	errs := make(chan error, holds)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < holds; i += 8 {
				loc := "AMS"
				res, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: fmt.Sprintf("cart-%d", i),
					RequestKey: "k", TTLSeconds: ttl, Lines: []domain.ReserveLine{{SKU: fmt.Sprintf("SKU-%d", i%skus), Location: &loc, Quantity: 1}}})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = res.ID
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cfg := b.config()
	b.startClient(t, cfg)

	// Around the deadline, checkouts confirm every 10th hold and release every
	// 10th (offset by 5), racing the sets for the rows.
	confirmed, released := map[string]bool{}, map[string]bool{}
	var mu sync.Mutex
	for w := range 4 {
		wg.Go(func() {
			for i := w * 5; i < holds; i += 20 {
				id := ids[i]
				if i%10 == 0 {
					res, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: id, OrderRef: "ORD-" + id})
					if e, ok := domain.AsError(err); ok && e.Code == domain.CodeReservationExpired {
						continue
					}
					if err != nil {
						t.Errorf("confirm %s: %v", id, err)
						continue
					}
					mu.Lock()
					confirmed[id] = res.Status == domain.StatusConfirmed
					mu.Unlock()
				} else {
					res, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: id, Reason: domain.ReasonCustomerCancelled})
					if err != nil {
						t.Errorf("release %s: %v", id, err)
						continue
					}
					mu.Lock()
					released[id] = res.Status == domain.StatusReleased
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()

	start := time.Now()
	waitFor(t, time.Now().Add(30*time.Second), "every hold to end", func() bool {
		var held int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM reservations WHERE status = 'held'`).Scan(&held); err != nil {
			t.Fatal(err)
		}
		return held == 0
	})
	t.Logf("%d holds ended %v after the first poll", holds, time.Since(start).Round(time.Millisecond))

	// Exactly one ending per hold, by a path allowed for its status.
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT r.id, r.status, count(m.id), coalesce(min(m.actor), ''), coalesce(min(m.cause), '')
		FROM reservations r LEFT JOIN stock_movements m ON m.reservation_id = r.id AND m.cause <> 'reserved'
		GROUP BY r.id, r.status`)
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]int{}
	n := 0
	for rows.Next() {
		var id, status, actor, cause string
		var endings int
		if err := rows.Scan(&id, &status, &endings, &actor, &cause); err != nil {
			t.Fatal(err)
		}
		n++
		if endings != 1 || cause != status {
			t.Errorf("reservation %s (%s): %d ledger rows ended it, cause %q", id, status, endings, cause)
		}
		switch status {
		case "expired":
			if actor != "system:expiry-job" && actor != "system:expiry-set" {
				t.Errorf("reservation %s expired by %q", id, actor)
			}
		case "confirmed":
			if !confirmed[id] {
				t.Errorf("reservation %s confirmed, but no confirm succeeded", id)
			}
		case "released":
			if !released[id] {
				t.Errorf("reservation %s released, but no release succeeded", id)
			}
		}
		paths[status+" by "+actor]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("how the %d holds ended: %v", n, paths)
	if n != holds || paths["expired by system:expiry-set"] == 0 {
		t.Fatalf("%d reservations, paths %v: want %d, some ended in sets", n, paths, holds)
	}

	// One stock event per ended hold.
	var events, ended int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT
		(SELECT count(*) FROM stock_events WHERE cause IN ('expired', 'released', 'confirmed')),
		(SELECT count(*) FROM reservations WHERE status <> 'held')`).Scan(&events, &ended); err != nil {
		t.Fatal(err)
	}
	if events != ended {
		t.Fatalf("%d ending events for %d ended holds", events, ended)
	}
	var reserved, soldUnits, onHandSum int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT sum(reserved), sum(on_hand),
		(SELECT count(*) FROM reservations WHERE status = 'confirmed') FROM balances`).Scan(&reserved, &onHandSum, &soldUnits); err != nil {
		t.Fatal(err)
	}
	if reserved != 0 || onHandSum != skus*onHand-soldUnits {
		t.Fatalf("balances: reserved %d, on_hand %d; want 0 and %d", reserved, onHandSum, skus*onHand-soldUnits)
	}
	b.RequireReconciled(t)
	b.requireNoJobErrors(t)
}
