package store_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"inventory/domain"
	"inventory/store"
)

// coalesceRun is what the coalescing workload saw: every reservation a
// reserve returned, by id, with its input and whether it was a replay.
type coalesceRun struct {
	mu       sync.Mutex
	made     map[string]domain.ReserveInput // first (non-replayed) answer per id
	replayed map[string]int
	keys     map[[2]string]string // (checkout, key) → id
	refused  map[domain.ErrorCode]int
	released map[string]bool
}

func (r *coalesceRun) record(t *testing.T, in domain.ReserveInput, res domain.Reservation, replayed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]string{in.CheckoutID, in.RequestKey}
	if id, ok := r.keys[k]; ok && id != res.ID {
		t.Errorf("key %v answered with two reservations: %s and %s", k, id, res.ID)
	}
	r.keys[k] = res.ID
	if replayed {
		r.replayed[res.ID]++
		return
	}
	if _, dup := r.made[res.ID]; dup {
		t.Errorf("reservation %s made twice (replayed=false both times)", res.ID)
	}
	r.made[res.ID] = in
}

// Concurrent single-line reserves of one hot balance and one CODES balance
// (whose codes are claimed in the batch, oldest batch first), from two store
// instances on one database, coalesced into batches: with fresh keys,
// replays of a key inside one batch (twins sent at once) and across batches
// (a retry later), keys reused with other inputs, different TTLs, partial
// stock (the balance sells out) and multi-line baskets on the same balance
// going through the basket path, while holds are released. Afterwards SQL
// must show exactly the holds the callers were told about — one reservation,
// one line, one 'reserved' ledger row, one 'reserved' event and one expiry job
// each, no row of a refused request — never more held than stock, the
// ledger reconciled, and the event stream of the hot balance consistent:
// each event moves 'reserved' by exactly its hold's quantity.
func TestReserveCoalescingTwoInstances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stores := []*store.Store{b.Store, b.secondInstance(t)}
	mustLocation(t, b, "AMS", 1)
	mustLocation(t, b, "BER", 2)
	mustSKU(t, b, "HOT", domain.KindQuantity)
	mustSKU(t, b, "SIDE", domain.KindQuantity)
	const stock = 150
	mustReceive(t, b, "HOT", "AMS", stock)
	mustReceive(t, b, "SIDE", "BER", 1000)
	withCodesKeyring(t, b)
	stores[1].Keyring = b.Store.Keyring
	b.codesSKU(t, "GC", "AMS")
	const codes = 120
	for batch := range 3 { // claims take the oldest batch first, across batches
		var list []string
		for i := range codes / 3 {
			list = append(list, fmt.Sprintf("GC-%d-%03d", batch, i))
		}
		b.codesImport(t, "GC", "AMS", fmt.Sprintf("B%d", batch), list...)
	}

	run := &coalesceRun{made: map[string]domain.ReserveInput{}, replayed: map[string]int{}, keys: map[[2]string]string{},
		refused: map[domain.ErrorCode]int{}, released: map[string]bool{}}
	ams := "AMS"
	reserve := func(in domain.ReserveInput, via int) (domain.Reservation, bool, error) {
		res, replayed, err := stores[via].ReservationCreate(b.Ctx, in)
		if err == nil {
			if res.Status == domain.StatusHeld && !replayed && (len(res.Lines) == 0 || res.ID == "") {
				t.Errorf("held reservation without id or lines: %+v", res)
			}
			run.record(t, in, res, replayed)
			return res, replayed, nil
		}
		if e, ok := domain.AsError(err); ok {
			run.mu.Lock()
			run.refused[e.Code]++
			run.mu.Unlock()
			if e.Code == domain.CodeOutOfStock || e.Code == domain.CodeIdempotencyKeyReused {
				return res, replayed, err
			}
		}
		t.Errorf("reserve %+v: %v", in, err)
		return res, replayed, err
	}

	const goroutines, opsEach = 24, 40
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(7, uint64(g)))
			checkout := fmt.Sprintf("cart-%d", g)
			var mine []domain.ReserveInput // requests that made a hold
			for i := range opsEach {
				sku := []string{"HOT", "GC"}[rng.IntN(2)]
				single := domain.ReserveInput{CheckoutID: checkout, RequestKey: fmt.Sprintf("k-%d", i),
					TTLSeconds: 60 * (1 + rng.IntN(3)), Lines: []domain.ReserveLine{{SKU: sku, Location: &ams, Quantity: 1 + rng.IntN(3)}}}
				switch op := rng.IntN(10); {
				case op < 5: // a fresh single line
					if _, _, err := reserve(single, rng.IntN(2)); err == nil {
						mine = append(mine, single)
					}
				case op == 5: // twins: the same request sent at once to both instances
					var twins sync.WaitGroup
					for via := range 2 {
						twins.Go(func() { _, _, _ = reserve(single, via) })
					}
					twins.Wait()
				case op == 6 && len(mine) > 0: // a retry of an earlier request, later
					in := mine[rng.IntN(len(mine))]
					if _, replayed, err := reserve(in, rng.IntN(2)); err != nil || !replayed {
						t.Errorf("retry of %s/%s: replayed=%v err=%v", in.CheckoutID, in.RequestKey, replayed, err)
					}
				case op == 7 && len(mine) > 0: // the same key with other inputs
					in := mine[rng.IntN(len(mine))]
					in.Lines = []domain.ReserveLine{{SKU: in.Lines[0].SKU, Location: &ams, Quantity: in.Lines[0].Quantity + 1}}
					if _, _, err := stores[rng.IntN(2)].ReservationCreate(b.Ctx, in); !isCode(err, domain.CodeIdempotencyKeyReused) {
						t.Errorf("key reused with other inputs: %v", err)
					}
				case op == 8: // a basket on the same balance, via the basket path
					in := single
					in.Lines = append(in.Lines, domain.ReserveLine{SKU: "SIDE", Quantity: 1})
					_, _, _ = reserve(in, rng.IntN(2))
				default: // release one of this checkout's holds
					if len(mine) == 0 {
						continue
					}
					id := run.keysOf(mine[0])
					mine = mine[1:]
					res, err := stores[rng.IntN(2)].ReservationRelease(b.Ctx, domain.Scope{CheckoutID: checkout}, domain.ReleaseInput{ID: id, Reason: domain.ReasonCustomerCancelled})
					if err != nil || res.Status != domain.StatusReleased {
						t.Errorf("release %s: %+v %v", id, res, err)
					}
					run.mu.Lock()
					run.released[id] = true
					run.mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d holds made, %d replays answered, refusals %v, %d released", len(run.made), len(run.replayed), run.refused, len(run.released))
	for i, st := range stores {
		batches, requests, failed := st.ReservationBatchStats()
		t.Logf("instance %d: %d requests in %d batches", i, requests, batches)
		if batches == 0 || requests <= batches || failed != 0 {
			t.Errorf("instance %d: %d requests in %d batches, %d failed; want some coalesced and none failed", i, requests, batches, failed)
		}
	}
	if run.refused[domain.CodeOutOfStock] == 0 || len(run.replayed) == 0 {
		t.Fatalf("the workload did not sell out or replay: refusals %v, replays %d", run.refused, len(run.replayed))
	}

	// Exactly the holds callers were told about, each written once.
	var reservations, strays int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*), count(*) FILTER (WHERE NOT id = ANY($1::uuid[])) FROM reservations`,
		run.ids()).Scan(&reservations, &strays); err != nil {
		t.Fatal(err)
	}
	if reservations != len(run.made) || strays != 0 {
		t.Fatalf("%d reservation rows (%d unknown to any caller), want %d", reservations, strays, len(run.made))
	}
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT r.id, r.status,
		       (SELECT count(*) FROM reservation_lines WHERE reservation_id = r.id),
		       (SELECT coalesce(sum(quantity), 0) FROM reservation_lines WHERE reservation_id = r.id),
		       (SELECT count(*) FROM stock_movements WHERE reservation_id = r.id AND cause = 'reserved'),
		       (SELECT count(*) FROM stock_events WHERE reservation_id = r.id AND cause = 'reserved'),
		       (SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND args->>'reservation_id' = r.id::text),
		       extract(epoch FROM r.expires_at - r.created_at)::int,
		       (SELECT count(*) FROM codes c JOIN reservation_lines rl ON rl.id = c.reservation_line_id
		        WHERE rl.reservation_id = r.id AND c.status = 'held')
		FROM reservations r`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close() // before the pool closes, also when a check fails
	for rows.Next() {
		var id, status string
		var lines, units, ledger, events, jobs, ttl, heldCodes int
		if err := rows.Scan(&id, &status, &lines, &units, &ledger, &events, &jobs, &ttl, &heldCodes); err != nil {
			t.Fatal(err)
		}
		in := run.made[id]
		want := 0
		for _, l := range in.Lines {
			want += l.Quantity
		}
		if lines != len(in.Lines) || units != want || ledger != lines || events != lines || jobs != 1 {
			t.Errorf("reservation %s (%s): %d lines of %d units, %d ledger rows, %d events, %d expiry jobs; want %d lines of %d units, one row and event per line, one job",
				id, status, lines, units, ledger, events, jobs, len(in.Lines), want)
		}
		if ttl < in.TTLSeconds-1 || ttl > in.TTLSeconds+1 {
			t.Errorf("reservation %s lasts %ds, asked for %ds", id, ttl, in.TTLSeconds)
		}
		if wantStatus := map[bool]string{true: "released", false: "held"}[run.released[id]]; status != wantStatus {
			t.Errorf("reservation %s is %s, want %s", id, status, wantStatus)
		}
		wantCodes := 0
		for _, l := range in.Lines {
			if l.SKU == "GC" && status == "held" {
				wantCodes += l.Quantity
			}
		}
		if heldCodes != wantCodes {
			t.Errorf("reservation %s (%s) holds %d codes, want %d", id, status, heldCodes, wantCodes)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	onHand, reserved, _ := b.BalanceRow(t, "HOT", "AMS")
	if onHand != stock || reserved > stock {
		t.Fatalf("HOT@AMS on_hand %d reserved %d, stock %d", onHand, reserved, stock)
	}
	var heldCodes, gcReserved int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT (SELECT count(*) FROM codes WHERE status = 'held'),
		(SELECT reserved FROM balances JOIN skus ON skus.id = sku_id WHERE skus.code = 'GC')`).Scan(&heldCodes, &gcReserved); err != nil {
		t.Fatal(err)
	}
	if heldCodes != gcReserved || heldCodes > codes {
		t.Fatalf("%d codes held, GC reserved %d, %d codes in stock", heldCodes, gcReserved, codes)
	}
	b.RequireReconciled(t)
	requireConsistentEventStream(t, b)
}

// requireConsistentEventStream publishes every event and walks each
// balance's events in seq order: an event of a reservation moves 'reserved'
// by exactly that reservation's units there (up when reserved, down when it
// ended), and on_hand only on confirm.
func requireConsistentEventStream(t *testing.T, b *testBundle) {
	t.Helper()
	for {
		n, err := b.Store.StockEventsPublish(b.Ctx, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT e.seq, e.sku_id, e.location_id, e.cause, e.on_hand, e.reserved,
		       coalesce((SELECT sum(quantity - preorder_quantity) FROM reservation_lines rl
		                 WHERE rl.reservation_id = e.reservation_id AND rl.sku_id = e.sku_id AND rl.location_id = e.location_id), 0)::int
		FROM stock_events e ORDER BY e.seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close() // before the pool closes, also when a check fails
	type last struct{ onHand, reserved int }
	prev := map[[2]int64]last{}
	var seq, want int64 = 0, 1
	for rows.Next() {
		var sku, loc int64
		var cause string
		var onHand, reserved, units int
		if err := rows.Scan(&seq, &sku, &loc, &cause, &onHand, &reserved, &units); err != nil {
			t.Fatal(err)
		}
		if seq != want {
			t.Fatalf("event seq %d, want %d (gap)", seq, want)
		}
		want++
		k := [2]int64{sku, loc}
		p, seen := prev[k]
		prev[k] = last{onHand, reserved}
		if !seen {
			continue
		}
		var dOnHand, dReserved int
		switch cause {
		case "reserved":
			dReserved = units
		case "released", "expired":
			dReserved = -units
		case "confirmed":
			dOnHand, dReserved = -units, -units
		default:
			continue
		}
		if onHand-p.onHand != dOnHand || reserved-p.reserved != dReserved {
			t.Fatalf("event seq %d (%s of %d units) moves on_hand %d→%d, reserved %d→%d", seq, cause, units, p.onHand, onHand, p.reserved, reserved)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

func (r *coalesceRun) keysOf(in domain.ReserveInput) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[[2]string{in.CheckoutID, in.RequestKey}]
}

func (r *coalesceRun) ids() []string {
	var ids []string
	for id := range r.made {
		ids = append(ids, id)
	}
	return ids
}
