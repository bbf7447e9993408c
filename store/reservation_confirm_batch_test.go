package store_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"inventory/domain"
	"inventory/store"
)

// Concurrent confirms from two store instances on one database, coalesced
// into batches: plain holds (one and two lines), CODES holds (their codes
// sold in the batch), pre-orders (which a batch leaves to the single path),
// twins (the same confirm sent to both instances at once), retries later,
// an orderRef already taken by another reservation, a confirm outside the
// caller's scope, released and overdue holds, confirms with the buyer's
// snapshots, and two payment backends (ledger actors) in one batch.
// Afterwards SQL must show exactly one order per confirmed reservation, with
// the ref its caller was told, its lines, one 'confirmed' ledger row per line
// naming that caller, one 'confirmed' event per balance, the stock taken off
// on hand once, codes sold to exactly those orders, nothing changed for the
// refused, and the ledger reconciled.
func TestConfirmCoalescingTwoInstances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stores := []*store.Store{b.Store, b.secondInstance(t)}
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "A", domain.KindQuantity)
	mustSKU(t, b, "B", domain.KindQuantity)
	mustSKU(t, b, "P", domain.KindQuantity)
	mustReceive(t, b, "A", "AMS", 1000)
	mustReceive(t, b, "B", "AMS", 1000)
	if _, err := b.Store.PreorderSet(b.Ctx, domain.SetPreorderInput{SKU: "P", Location: "AMS", PendingSupply: 100}); err != nil {
		t.Fatal(err)
	}
	withCodesKeyring(t, b)
	stores[1].Keyring = b.Store.Keyring
	b.codesSKU(t, "GC", "AMS")
	var list []string
	for i := range 60 {
		list = append(list, fmt.Sprintf("GC-%03d", i))
	}
	b.codesImport(t, "GC", "AMS", "B1", list...)

	// The holds to confirm.
	type hold struct {
		id, checkout string
		lines        []domain.ReserveLine
	}
	var holds []hold
	rng := rand.New(rand.NewPCG(3, 9))
	for i := range 180 {
		checkout := fmt.Sprintf("cart-%d", i%40)
		var lines []domain.ReserveLine
		switch i % 6 {
		case 0, 1, 2:
			lines = []domain.ReserveLine{line([]string{"A", "B"}[i%2], "AMS", 1+rng.IntN(3))}
		case 3:
			lines = []domain.ReserveLine{line("A", "AMS", 1), line("B", "AMS", 2)}
		case 4:
			lines = []domain.ReserveLine{line("GC", "AMS", 1)}
		case 5:
			lines = []domain.ReserveLine{line("P", "AMS", 1)} // nothing on hand: a pre-order
		}
		res := b.mustCreate(t, checkout, fmt.Sprintf("k-%d", i), 600, lines...)
		holds = append(holds, hold{res.ID, checkout, lines})
	}
	// Two that will not be confirmable: released, and overdue.
	released := b.mustCreate(t, "cart-x", "released", 600, line("A", "AMS", 1))
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: released.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}
	overdue := b.mustCreate(t, "cart-y", "overdue", 1, line("B", "AMS", 1))
	time.Sleep(1100 * time.Millisecond)

	actors := []domain.Actor{{Role: domain.RoleService, Name: "pay-a"}, {Role: domain.RoleService, Name: "pay-b"}}
	type told struct {
		ref, actor string
		snapshot   bool
	}
	var mu sync.Mutex
	confirmed := map[string]told{} // reservation id → what its first confirm was told
	confirm := func(h hold, ref string, via, actor int, scope domain.Scope, snapshot bool) (domain.Reservation, error) {
		in := domain.ConfirmInput{ID: h.id, OrderRef: ref}
		if snapshot {
			in.Lines = []domain.OrderLineSnapshot{{SKU: h.lines[0].SKU, Title: strPtr("Thing"), UnitPrice: strPtr("9.99"), Currency: strPtr("EUR")}}
		}
		ctx := domain.WithActor(b.Ctx, actors[actor])
		res, err := stores[via].ReservationConfirm(ctx, scope, in)
		if err == nil {
			if res.Status != domain.StatusConfirmed || res.ID != h.id || res.Order == nil || res.Order.Ref != ref || len(res.Lines) != len(h.lines) {
				t.Errorf("confirm %s as %s: %+v", h.id, ref, res)
			}
			mu.Lock()
			if _, ok := confirmed[h.id]; !ok {
				confirmed[h.id] = told{ref, actors[actor].Name, snapshot}
			}
			mu.Unlock()
		}
		return res, err
	}

	var wg sync.WaitGroup
	jobs := make(chan int)
	for g := range 32 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(5, uint64(g)))
			for i := range jobs {
				h, ref := holds[i], fmt.Sprintf("ORD-%d", i)
				via, actor := rng.IntN(2), i%2
				op := rng.IntN(10)
				switch {
				case op == 0: // twins on both instances at once: both answered confirmed
					var twins sync.WaitGroup
					for v := range 2 {
						twins.Go(func() {
							if _, err := confirm(h, ref, v, actor, domain.Scope{}, false); err != nil {
								t.Errorf("twin confirm %s: %v", h.id, err)
							}
						})
					}
					twins.Wait()
				case op == 1: // outside the caller's scope: NOT_FOUND, then the owner
					if _, err := confirm(h, ref, via, actor, domain.Scope{CheckoutID: "cart-other"}, false); !isCode(err, domain.CodeNotFound) {
						t.Errorf("confirm %s from another checkout: %v", h.id, err)
					}
					if _, err := confirm(h, ref, via, actor, domain.Scope{CheckoutID: h.checkout}, false); err != nil {
						t.Errorf("confirm %s by its checkout: %v", h.id, err)
					}
				case op == 2: // an orderRef another reservation took: ALREADY_EXISTS, then its own
					mu.Lock()
					taken := ""
					for _, c := range confirmed {
						taken = c.ref
						break
					}
					mu.Unlock()
					if taken != "" {
						if _, err := confirm(h, taken, via, actor, domain.Scope{}, false); !isCode(err, domain.CodeAlreadyExists) {
							t.Errorf("confirm %s with taken ref %s: %v", h.id, taken, err)
						}
					}
					if _, err := confirm(h, ref, via, actor, domain.Scope{}, false); err != nil {
						t.Errorf("confirm %s: %v", h.id, err)
					}
				case op == 3: // with the buyer's snapshot of its first line
					if _, err := confirm(h, ref, via, actor, domain.Scope{}, true); err != nil {
						t.Errorf("confirm %s with a snapshot: %v", h.id, err)
					}
				case op == 5 && len(h.lines) == 1: // a snapshot of a SKU it does not hold: INVALID_INPUT, then plain
					in := domain.ConfirmInput{ID: h.id, OrderRef: ref, Lines: []domain.OrderLineSnapshot{{SKU: "NOT-HELD", Title: strPtr("x")}}}
					if _, err := stores[via].ReservationConfirm(b.Ctx, domain.Scope{}, in); !isCode(err, domain.CodeInvalidInput) {
						t.Errorf("confirm %s with a snapshot of another SKU: %v", h.id, err)
					}
					if _, err := confirm(h, ref, via, actor, domain.Scope{}, false); err != nil {
						t.Errorf("confirm %s: %v", h.id, err)
					}
				default:
					if _, err := confirm(h, ref, via, actor, domain.Scope{}, false); err != nil {
						t.Errorf("confirm %s: %v", h.id, err)
					}
				}
				if op == 4 { // a retry later: the same answer
					if _, err := confirm(h, ref, 1-via, actor, domain.Scope{}, false); err != nil {
						t.Errorf("retry of confirm %s: %v", h.id, err)
					}
				}
			}
		})
	}
	// Refused ones, meanwhile.
	wg.Go(func() {
		if _, err := stores[0].ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: released.ID, OrderRef: "ORD-released"}); !isCode(err, domain.CodeInvalidTransition) {
			t.Errorf("confirm of a released hold: %v", err)
		}
		if _, err := stores[1].ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: overdue.ID, OrderRef: "ORD-overdue"}); !isCode(err, domain.CodeReservationExpired) {
			t.Errorf("confirm of an overdue hold: %v", err)
		}
	})
	for i := range holds {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var coalesced bool
	for i, st := range stores {
		batches, requests, failed := st.ConfirmBatchStats()
		t.Logf("instance %d: %d confirms in %d batches", i, requests, batches)
		coalesced = coalesced || requests > batches
		if failed != 0 {
			t.Errorf("instance %d: %d confirm batches failed", i, failed)
		}
	}
	if !coalesced {
		t.Error("no confirm batch held more than one confirm")
	}
	if len(confirmed) != len(holds) {
		t.Fatalf("%d of %d holds confirmed", len(confirmed), len(holds))
	}

	// One order per confirmed reservation, with the ref its caller was told,
	// its lines, its ledger rows (naming the caller) and events.
	for _, h := range holds {
		want := confirmed[h.id]
		var orders, orderLines, ledger, wrongActor, events, balances, titled int
		var ref, status string
		if err := b.Pool.QueryRow(b.Ctx, `
			SELECT (SELECT count(*) FROM orders WHERE reservation_id = r.id),
			       coalesce((SELECT ref FROM orders WHERE reservation_id = r.id), ''),
			       (SELECT count(*) FROM order_lines ol JOIN orders o ON o.id = ol.order_id WHERE o.reservation_id = r.id),
			       (SELECT count(*) FROM stock_movements WHERE reservation_id = r.id AND cause = 'confirmed'),
			       (SELECT count(*) FROM stock_movements WHERE reservation_id = r.id AND cause = 'confirmed' AND actor <> $2),
			       (SELECT count(*) FROM stock_events WHERE reservation_id = r.id AND cause = 'confirmed'),
			       (SELECT count(DISTINCT (sku_id, location_id)) FROM reservation_lines WHERE reservation_id = r.id),
			       r.status,
			       (SELECT count(*) FROM order_lines ol JOIN orders o ON o.id = ol.order_id JOIN skus s ON s.id = ol.sku_id
			        WHERE o.reservation_id = r.id AND ol.title = 'Thing' AND ol.unit_price = '9.99' AND ol.currency = 'EUR' AND s.code = $3)
			FROM reservations r WHERE r.id = $1`, h.id, want.actor, h.lines[0].SKU).Scan(&orders, &ref, &orderLines, &ledger, &wrongActor, &events, &balances, &status, &titled); err != nil {
			t.Fatal(err)
		}
		inStock := 0
		for _, l := range h.lines {
			if l.SKU != "P" {
				inStock++
			}
		}
		wantTitled := 0
		if want.snapshot {
			wantTitled = 1
		}
		if orders != 1 || ref != want.ref || orderLines != len(h.lines) || ledger != inStock || wrongActor != 0 || events != balances || status != "confirmed" || titled != wantTitled {
			t.Errorf("reservation %s (%v): %d orders, ref %q (told %q), %d order lines (%d with the snapshot, want %d), %d ledger rows (%d by another actor than %s), %d events for %d balances, status %s",
				h.id, h.lines, orders, ref, want.ref, orderLines, titled, wantTitled, ledger, wrongActor, want.actor, events, balances, status)
		}
	}
	// The stock: taken off on hand once per confirmed unit, nothing held.
	for _, sku := range []string{"A", "B"} {
		var sold int
		for _, h := range holds {
			for _, l := range h.lines {
				if l.SKU == sku {
					sold += l.Quantity
				}
			}
		}
		onHand, reserved := b.Balance(t, sku, "AMS")
		wantReserved := 0
		if sku == "B" {
			wantReserved = 1 // the overdue hold, not yet expired
		}
		if onHand != 1000-sold || reserved != wantReserved {
			t.Errorf("%s: on hand %d reserved %d, want %d and %d", sku, onHand, reserved, 1000-sold, wantReserved)
		}
	}
	var soldCodes, strayCodes int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FILTER (WHERE c.status = 'sold' AND c.order_line_id IS NOT NULL),
		count(*) FILTER (WHERE c.status = 'held')
		FROM codes c`).Scan(&soldCodes, &strayCodes); err != nil {
		t.Fatal(err)
	}
	if soldCodes != len(holds)/6 || strayCodes != 0 {
		t.Errorf("%d codes sold, %d still held; want %d and 0", soldCodes, strayCodes, len(holds)/6)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM orders WHERE ref IN ('ORD-released', 'ORD-overdue')`); n != 0 {
		t.Errorf("%d orders for refused confirms", n)
	}
	b.RequireReconciled(t)
}
