package store_test

import (
	"fmt"
	"sync"
	"testing"

	"inventory/domain"
)

// Two checkouts race for the last unit: the conditional claim lets exactly one
// of them have it, and the other is told nothing is left.
func TestReservationLastUnitRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rounds = 50
	for round := range rounds {
		sku := fmt.Sprintf("LAST-%02d", round)
		b.Stock(t, sku, "AMS", 1)

		type outcome struct {
			res domain.Reservation
			err error
		}
		var out [2]outcome
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range out {
			wg.Go(func() {
				<-start
				res, _, err := b.create(fmt.Sprintf("last-%d-%d", round, i), "k", 900, line(sku, "AMS", 1))
				out[i] = outcome{res, err}
			})
		}
		close(start)
		wg.Wait()

		winners := 0
		for i, o := range out {
			if o.err == nil {
				winners++
				if o.res.Status != domain.StatusHeld || len(o.res.Lines) != 1 || o.res.Lines[0].Quantity != 1 || o.res.Lines[0].Location != "AMS" {
					t.Fatalf("round %d: winner %d: %+v", round, i, o.res)
				}
				continue
			}
			e := requireCode(t, o.err, domain.CodeOutOfStock)
			if e.Available == nil || *e.Available != 0 || e.Line == nil || *e.Line != 0 || e.SKU != sku {
				t.Fatalf("round %d: loser %d: available %s line %s sku %q", round, i, optInt(e.Available), optInt(e.Line), e.SKU)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d winners for the last unit (%v / %v)", round, winners, out[0].err, out[1].err)
		}
		if on, rsv := b.Balance(t, sku, "AMS"); on != 1 || rsv != 1 {
			t.Fatalf("round %d: on_hand %d reserved %d, want 1 and 1", round, on, rsv)
		}
		if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE checkout_id LIKE $1`, fmt.Sprintf("last-%d-%%", round)); n != 1 {
			t.Fatalf("round %d: %d reservation rows, want 1", round, n)
		}
		if n := b.sqlInt(t, `
			SELECT count(DISTINCT r.id) FROM reservations r JOIN reservation_lines rl ON rl.reservation_id = r.id JOIN skus s ON s.id = rl.sku_id
			WHERE s.code = $1 AND r.status = 'held'`, sku); n != 1 {
			t.Fatalf("round %d: %d held reservations of %s, want 1", round, n, sku)
		}
		if n := b.sqlInt(t, `SELECT count(*) FROM allocation_failures a JOIN skus s ON s.id = a.sku_id WHERE s.code = $1`, sku); n != 1 {
			t.Fatalf("round %d: %d allocation failures recorded, want 1", round, n)
		}
	}
	b.requireInvariants(t)
}

// The lost response under concurrency: one request sent many times at once
// (a client retrying on a timeout while the first attempt is still running)
// reserves once, and every attempt answers with that one reservation.
func TestReservationLostResponseConcurrent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		onHand int
	}{
		{"spare stock", 100},
		{"exactly enough for one", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			const (
				rounds  = 5
				senders = 20
				qty     = 3
			)
			for round := range rounds {
				sku := fmt.Sprintf("LOST-%d", round)
				b.Stock(t, sku, "AMS", tc.onHand)
				in := domain.ReserveInput{CheckoutID: "cart-lost", RequestKey: fmt.Sprintf("key-%d", round), TTLSeconds: 900,
					Lines: []domain.ReserveLine{line(sku, "AMS", qty)}}

				type outcome struct {
					res      domain.Reservation
					replayed bool
					err      error
				}
				out := make([]outcome, senders)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range out {
					wg.Go(func() {
						<-start
						res, replayed, err := b.Store.ReservationCreate(b.Ctx, in)
						out[i] = outcome{res, replayed, err}
					})
				}
				close(start)
				wg.Wait()

				fresh := 0
				for i, o := range out {
					if o.err != nil {
						t.Fatalf("round %d: sender %d: %v", round, i, o.err)
					}
					if o.res.ID != out[0].res.ID {
						t.Fatalf("round %d: sender %d got reservation %s, sender 0 got %s", round, i, o.res.ID, out[0].res.ID)
					}
					if o.res.Status != domain.StatusHeld || len(o.res.Lines) != 1 || o.res.Lines[0].Quantity != qty {
						t.Fatalf("round %d: sender %d: %+v", round, i, o.res)
					}
					if !o.replayed {
						fresh++
					}
				}
				// At most one attempt may say it reserved; one of them did.
				if fresh != 1 {
					t.Fatalf("round %d: %d answers with replayed=false, want exactly 1", round, fresh)
				}
				id := out[0].res.ID
				if on, rsv := b.Balance(t, sku, "AMS"); on != tc.onHand || rsv != qty {
					t.Fatalf("round %d: on_hand %d reserved %d, want %d and %d", round, on, rsv, tc.onHand, qty)
				}
				if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE checkout_id = 'cart-lost' AND request_key = $1`, in.RequestKey); n != 1 {
					t.Fatalf("round %d: %d reservation rows", round, n)
				}
				if n := b.sqlInt(t, `SELECT count(*) FROM reservation_lines WHERE reservation_id = $1`, id); n != 1 {
					t.Fatalf("round %d: %d reservation lines", round, n)
				}
				if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE reservation_id = $1 AND cause = 'reserved'`, id); n != 1 {
					t.Fatalf("round %d: %d 'reserved' ledger rows", round, n)
				}
				if n := b.sqlInt(t, `SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND args->>'reservation_id' = $1`, id); n != 1 {
					t.Fatalf("round %d: %d expiry jobs", round, n)
				}
				if n := b.sqlInt(t, `SELECT count(*) FROM allocation_failures`); n != 0 {
					t.Fatalf("round %d: %d allocation failures recorded", round, n)
				}
				// And once more, after the fact.
				again, replayed, err := b.Store.ReservationCreate(b.Ctx, in)
				if err != nil || !replayed || again.ID != id {
					t.Fatalf("round %d: late replay: %s %v %v", round, again.ID, replayed, err)
				}
			}
			b.requireInvariants(t)
		})
	}
}

// Two baskets with the same four lines listed in opposite orders, reserved
// concurrently over and over and immediately confirmed or released: if the
// store locked balances in request order they would deadlock; it locks them in
// (sku, location) order, so no call fails and no deadlock even happens.
func TestReservationOppositeOrderBaskets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Created in an order that makes neither listing the lock order.
	mustLocation(t, b, "L2", 0)
	mustLocation(t, b, "L1", 0)
	const stock = 1000
	lines := []domain.ReserveLine{line("OA", "L1", 1), line("OB", "L2", 2), line("OC", "L1", 1), line("OD", "L2", 3)}
	for _, sku := range []string{"OD", "OB", "OC", "OA"} {
		for _, loc := range []string{"L1", "L2"} {
			b.Stock(t, sku, loc, stock)
		}
	}
	reversed := make([]domain.ReserveLine, len(lines))
	for i, l := range lines {
		reversed[len(lines)-1-i] = l
	}
	deadlocksBefore := b.deadlocksSoFar(t)

	const (
		perOrder = 10 // goroutines per listing order
		rounds   = 10 // reservations per goroutine: 2 × 10 × 10 = 200
	)
	var (
		mu        sync.Mutex
		confirmed int
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 * perOrder {
		basket := lines
		if g%2 == 1 {
			basket = reversed
		}
		wg.Go(func() {
			<-start
			for round := range rounds {
				checkout := fmt.Sprintf("opp-%d", g)
				res, _, err := b.create(checkout, fmt.Sprintf("r%d", round), 900, basket...)
				if err != nil {
					t.Errorf("goroutine %d round %d: reserve: %v", g, round, err)
					return
				}
				if (g+round)%2 == 0 {
					c, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: fmt.Sprintf("ORD-%d-%d", g, round)})
					if err != nil || c.Status != domain.StatusConfirmed {
						t.Errorf("goroutine %d round %d: confirm: %s %v", g, round, c.Status, err)
						return
					}
					mu.Lock()
					confirmed++
					mu.Unlock()
				} else {
					r, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: res.ID, Reason: domain.ReasonCustomerCancelled})
					if err != nil || r.Status != domain.StatusReleased {
						t.Errorf("goroutine %d round %d: release: %s %v", g, round, r.Status, err)
						return
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	if n := b.sqlInt(t, `SELECT count(*) FROM reservations`); n != 2*perOrder*rounds {
		t.Fatalf("%d reservations, want %d", n, 2*perOrder*rounds)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE status = 'confirmed'`); n != confirmed || confirmed != perOrder*rounds {
		t.Fatalf("%d confirmed in SQL, %d confirm calls, want %d", n, confirmed, perOrder*rounds)
	}
	for _, l := range lines {
		on, rsv := b.Balance(t, l.SKU, *l.Location)
		if want := stock - confirmed*l.Quantity; on != want || rsv != 0 {
			t.Fatalf("%s@%s: on_hand %d reserved %d, want %d and 0", l.SKU, *l.Location, on, rsv, want)
		}
	}
	b.requireInvariants(t)
	if after := b.deadlocksSoFar(t); after != deadlocksBefore {
		t.Fatalf("pg_stat_database.deadlocks went from %d to %d: baskets deadlocked (and inTx retried them)", deadlocksBefore, after)
	}
}
