package store_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/domain"
)

// workload is the shared bookkeeping of TestReservationRandomWorkload: the
// reservations made so far and what the callers were told about them.
type workload struct {
	mu           sync.Mutex
	reservations []workloadReservation
	// told is every outcome a caller was told about a reservation, as the
	// final status it implies: "confirmed", "released", "expired",
	// "confirmed-or-released", "ended" (not held any more) or "not-confirmed"
	// (told it expired, so never to be sold).
	told map[string][]string
	// received and adjusted sum the successful stock changes per balance.
	received, adjusted map[string]int
	ops                map[string]int // calls per operation
	refused            map[string]int // business refusals per "op CODE"
	swept              int
}

type workloadReservation struct {
	id string
	in domain.ReserveInput
}

func (w *workload) tell(id string, outcomes ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.told[id] = append(w.told[id], outcomes...)
}

// pick returns a random reservation made so far, mostly a recent one (those are
// likelier to be held still), or false when there is none yet.
func (w *workload) pick(rng *rand.Rand) (workloadReservation, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.reservations)
	if n == 0 {
		return workloadReservation{}, false
	}
	if rng.IntN(10) < 7 {
		return w.reservations[n-1-rng.IntN(min(n, 40))], true
	}
	return w.reservations[rng.IntN(n)], true
}

// A randomized concurrent workload over the whole reservation lifecycle and the
// stock changes that compete with it. Each call may be refused, but only with a
// business error that makes sense for it; afterwards the balances, the ledger,
// the reservations and the orders must all agree.
func TestReservationRandomWorkload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	skus := []string{"WA", "WB", "WC"}
	locs := []string{"W1", "W2", "W3"}
	for i, loc := range locs {
		mustLocation(t, b, loc, []int{2, 1, 3}[i])
	}
	const initial = 20
	for _, sku := range skus {
		for _, loc := range locs {
			b.Stock(t, sku, loc, initial)
		}
	}
	deadlocksBefore := b.deadlocksSoFar(t)

	const (
		goroutines = 8
		opsEach    = 260 // 2,080 operations in all
	)
	w := &workload{told: map[string][]string{}, received: map[string]int{}, adjusted: map[string]int{},
		ops: map[string]int{}, refused: map[string]int{}}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	ops := []workloadOp{
		{"reserve", 30, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			in := domain.ReserveInput{CheckoutID: fmt.Sprintf("w-%d", g), RequestKey: fmt.Sprintf("k-%d", i), TTLSeconds: 30}
			switch rng.IntN(5) {
			case 0, 1:
				in.TTLSeconds = 1
			case 2:
				in.TTLSeconds = 2
			}
			for range 1 + rng.IntN(3) {
				l := domain.ReserveLine{SKU: skus[rng.IntN(len(skus))], Quantity: 1 + rng.IntN(3)}
				if rng.IntN(3) != 0 {
					l.Location = ptr(locs[rng.IntN(len(locs))])
				}
				in.Lines = append(in.Lines, l)
			}
			res, replayed, err := b.Store.ReservationCreate(b.Ctx, in)
			if err != nil {
				return verdict("reserve", err, domain.CodeOutOfStock)
			}
			if replayed || res.Status != domain.StatusHeld {
				return "", fmt.Errorf("reserve: replayed %v status %s for a new key", replayed, res.Status)
			}
			got := make([]int, len(in.Lines))
			for _, rl := range res.Lines {
				if rl.InputLine < 0 || rl.InputLine >= len(in.Lines) {
					return "", fmt.Errorf("reserve: line %+v names input line %d of %d", rl, rl.InputLine, len(in.Lines))
				}
				got[rl.InputLine] += rl.Quantity
				if rl.SKU != in.Lines[rl.InputLine].SKU || in.Lines[rl.InputLine].Location != nil && rl.Location != *in.Lines[rl.InputLine].Location {
					return "", fmt.Errorf("reserve: line %+v does not match input %+v", rl, in.Lines[rl.InputLine])
				}
			}
			for j, l := range in.Lines {
				if got[j] != l.Quantity {
					return "", fmt.Errorf("reserve: input line %d wants %d, holds %d (%+v)", j, l.Quantity, got[j], res.Lines)
				}
			}
			w.mu.Lock()
			w.reservations = append(w.reservations, workloadReservation{res.ID, in})
			w.mu.Unlock()
			return "", nil
		}},
		{"replay", 5, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			r, ok := w.pick(rng)
			if !ok {
				return "", nil
			}
			res, replayed, err := b.Store.ReservationCreate(b.Ctx, r.in)
			if err != nil || !replayed || res.ID != r.id {
				return "", fmt.Errorf("replay of %s: got %s replayed %v, %v", r.id, res.ID, replayed, err)
			}
			return "", nil
		}},
		{"confirm", 12, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			r, ok := w.pick(rng)
			if !ok {
				return "", nil
			}
			res, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: r.id, OrderRef: "ORD-" + r.id})
			switch {
			case err == nil:
				if res.Status != domain.StatusConfirmed || res.Order == nil || res.Order.Ref != "ORD-"+r.id {
					return "", fmt.Errorf("confirm %s: status %s order %+v", r.id, res.Status, res.Order)
				}
				w.tell(r.id, "confirmed")
			case isCode(err, domain.CodeReservationExpired):
				w.tell(r.id, "not-confirmed")
			case isCode(err, domain.CodeInvalidTransition):
				w.tell(r.id, "released") // the only state a confirm with the right ref is refused in
			}
			return verdict("confirm", err, domain.CodeReservationExpired, domain.CodeInvalidTransition)
		}},
		{"release", 10, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			r, ok := w.pick(rng)
			if !ok {
				return "", nil
			}
			res, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: r.id, Reason: domain.ReasonCheckoutAbandoned})
			switch {
			case err == nil && res.Status == domain.StatusReleased:
				w.tell(r.id, "released")
			case err == nil && res.Status == domain.StatusExpired:
				w.tell(r.id, "expired")
			case err == nil:
				return "", fmt.Errorf("release %s: status %s", r.id, res.Status)
			case isCode(err, domain.CodeInvalidTransition):
				w.tell(r.id, "confirmed")
			}
			return verdict("release", err, domain.CodeInvalidTransition)
		}},
		{"extend", 8, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			r, ok := w.pick(rng)
			if !ok {
				return "", nil
			}
			res, err := b.Store.ReservationExtend(b.Ctx, domain.Scope{}, domain.ExtendInput{ID: r.id, TTLSeconds: 1 + rng.IntN(30)})
			if err == nil && res.Status != domain.StatusHeld {
				return "", fmt.Errorf("extend %s: status %s", r.id, res.Status)
			}
			switch {
			case isCode(err, domain.CodeReservationExpired):
				w.tell(r.id, "not-confirmed")
			case isCode(err, domain.CodeInvalidTransition):
				w.tell(r.id, "confirmed-or-released")
			}
			return verdict("extend", err, domain.CodeReservationExpired, domain.CodeInvalidTransition)
		}},
		{"expire", 12, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			r, ok := w.pick(rng)
			if !ok {
				return "", nil
			}
			notBefore, _, err := b.Store.ReservationExpire(b.Ctx, r.id)
			if err != nil {
				return "", fmt.Errorf("expire %s: %v", r.id, err)
			}
			if notBefore == nil {
				w.tell(r.id, "ended")
			}
			return "", nil
		}},
		{"sweep", 5, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			n, err := b.Store.ReservationSweepOverdue(b.Ctx, 0, 100)
			if err != nil {
				return "", fmt.Errorf("sweep: %v", err)
			}
			w.mu.Lock()
			w.swept += n
			w.mu.Unlock()
			return "", nil
		}},
		{"receive", 8, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			sku, loc, q := skus[rng.IntN(len(skus))], locs[rng.IntN(len(locs))], 1+rng.IntN(5)
			if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: q, Reference: nextRef("PO-workload")}); err != nil {
				return "", fmt.Errorf("receive: %v", err)
			}
			w.mu.Lock()
			w.received[sku+"@"+loc] += q
			w.mu.Unlock()
			return "", nil
		}},
		{"adjust", 10, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			sku, loc, delta := skus[rng.IntN(len(skus))], locs[rng.IntN(len(locs))], 1+rng.IntN(4)
			allowed := []domain.ErrorCode{}
			if rng.IntN(3) != 0 {
				delta = -delta
				allowed = append(allowed, domain.CodeBelowReserved)
			}
			_, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: loc, Delta: delta, Reason: "count", Reference: nextRef("workload")})
			if err == nil {
				w.mu.Lock()
				w.adjusted[sku+"@"+loc] += delta
				w.mu.Unlock()
			}
			return verdict(fmt.Sprintf("adjust %+d", delta), err, allowed...)
		}},
	}
	elapsed := runWorkload(t, seed, goroutines, opsEach, ops, &w.mu, w.ops, w.refused)
	total := 0
	for _, n := range w.ops {
		total += n
	}
	t.Logf("%d operations from %d goroutines in %s (%.0f/s); by op %v; refusals %v; %d holds made, %d expired by sweeps",
		total, goroutines, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), w.ops, w.refused, len(w.reservations), w.swept)

	// Balances against the held lines and the ledger, nothing negative.
	b.requireInvariants(t)

	// Statuses: one of four, ended_at exactly when terminal, and a line each.
	for _, check := range []struct{ what, query string }{
		{"an unknown status", `SELECT count(*) FROM reservations WHERE status NOT IN ('held', 'confirmed', 'released', 'expired')`},
		{"ended_at inconsistent with the status", `SELECT count(*) FROM reservations WHERE (status = 'held') <> (ended_at IS NULL)`},
		{"a release reason without being released", `SELECT count(*) FROM reservations WHERE (release_reason IS NOT NULL) <> (status = 'released')`},
		{"no lines", `SELECT count(*) FROM reservations r WHERE NOT EXISTS (SELECT FROM reservation_lines WHERE reservation_id = r.id)`},
		{"no expiry job while held", `SELECT count(*) FROM reservations r WHERE status = 'held' AND NOT EXISTS (
			SELECT FROM river_job j WHERE j.kind = 'reservation_expiry' AND j.args->>'reservation_id' = r.id::text)`},
		// Orders: exactly one per confirmed reservation, none otherwise, with
		// order lines equal to the reservation lines.
		{"a confirmed status without exactly one order", `SELECT count(*) FROM reservations r
			WHERE r.status = 'confirmed' AND (SELECT count(*) FROM orders o WHERE o.reservation_id = r.id) <> 1`},
		{"an order without a confirmed status", `SELECT count(*) FROM orders o JOIN reservations r ON r.id = o.reservation_id WHERE r.status <> 'confirmed'`},
		{"order lines that differ from the reservation lines", `SELECT count(*) FROM reservations r WHERE r.status = 'confirmed' AND EXISTS (
			(SELECT rl.id, rl.sku_id, rl.location_id, rl.quantity FROM reservation_lines rl WHERE rl.reservation_id = r.id
			 EXCEPT
			 SELECT ol.reservation_line_id, ol.sku_id, ol.location_id, ol.quantity FROM order_lines ol JOIN orders o ON o.id = ol.order_id WHERE o.reservation_id = r.id)
			UNION ALL
			(SELECT ol.reservation_line_id, ol.sku_id, ol.location_id, ol.quantity FROM order_lines ol JOIN orders o ON o.id = ol.order_id WHERE o.reservation_id = r.id
			 EXCEPT
			 SELECT rl.id, rl.sku_id, rl.location_id, rl.quantity FROM reservation_lines rl WHERE rl.reservation_id = r.id))`},
		{"an order whose total is not the reservation's", `SELECT count(*) FROM reservations r WHERE r.status = 'confirmed' AND
			(SELECT sum(quantity) FROM reservation_lines WHERE reservation_id = r.id) <>
			(SELECT sum(ol.quantity) FROM order_lines ol JOIN orders o ON o.id = ol.order_id WHERE o.reservation_id = r.id)`},
		// Ledger: one 'reserved' row per line, and one ending row per line
		// whose cause is the final status, only once the hold ended.
		{"'reserved' ledger rows not one per line", `SELECT count(*) FROM reservations r WHERE
			(SELECT count(*) FROM stock_movements m WHERE m.reservation_id = r.id AND m.cause = 'reserved') <>
			(SELECT count(*) FROM reservation_lines WHERE reservation_id = r.id)`},
		{"ending ledger rows not one per line of an ended hold", `SELECT count(*) FROM reservations r WHERE
			(SELECT count(*) FROM stock_movements m WHERE m.reservation_id = r.id AND m.cause <> 'reserved') <>
			CASE WHEN r.status = 'held' THEN 0 ELSE (SELECT count(*) FROM reservation_lines WHERE reservation_id = r.id) END`},
		{"an ending ledger row that is not its status", `SELECT count(*) FROM reservations r WHERE EXISTS (
			SELECT FROM stock_movements m WHERE m.reservation_id = r.id AND m.cause NOT IN ('reserved', r.status))`},
		{"both a 'confirmed' and a 'released' or 'expired' ledger row", `SELECT count(*) FROM (
			SELECT reservation_id FROM stock_movements WHERE reservation_id IS NOT NULL GROUP BY reservation_id
			HAVING bool_or(cause = 'confirmed') AND bool_or(cause IN ('released', 'expired'))) x`},
	} {
		if n := b.sqlInt(t, check.query); n != 0 {
			t.Errorf("%d reservations with %s", n, check.what)
		}
	}

	// on_hand, from the callers' side: what was there, plus what was received
	// and adjusted, minus what was sold.
	for _, sku := range skus {
		for _, loc := range locs {
			key := sku + "@" + loc
			sold := b.sqlInt(t, `SELECT coalesce(sum(ol.quantity), 0) FROM order_lines ol JOIN skus s ON s.id = ol.sku_id JOIN locations l ON l.id = ol.location_id
				WHERE s.code = $1 AND l.code = $2`, sku, loc)
			on, rsv := b.Balance(t, sku, loc)
			if want := initial + w.received[key] + w.adjusted[key] - sold; on != want {
				t.Errorf("%s: on_hand %d, want %d + %d received %+d adjusted - %d sold = %d", key, on, initial, w.received[key], w.adjusted[key], sold, want)
			}
			if rsv < 0 || rsv > on {
				t.Errorf("%s: reserved %d of %d on hand", key, rsv, on)
			}
		}
	}

	// What callers were told agrees with where each reservation ended.
	ids := slices.Sorted(maps.Keys(w.told))
	for _, id := range ids {
		status, err := b.statusOf(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, told := range w.told[id] {
			ok := false
			switch told {
			case "ended":
				ok = status != "held"
			case "not-confirmed":
				ok = status != "confirmed"
			case "confirmed-or-released":
				ok = status == "confirmed" || status == "released"
			default:
				ok = status == told
			}
			if !ok {
				sort.Strings(w.told[id])
				t.Errorf("reservation %s ended %s, but callers were told %s", id, status, strings.Join(w.told[id], ", "))
				break
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if after := b.deadlocksSoFar(t); after != deadlocksBefore {
		t.Fatalf("pg_stat_database.deadlocks went from %d to %d during the workload", deadlocksBefore, after)
	}
}

// verdict judges an operation's error: an allowed business refusal is
// returned as its code, anything else (a refusal with another code, or any
// error that is not a *domain.Error) as a failure.
func verdict(op string, err error, allowed ...domain.ErrorCode) (domain.ErrorCode, error) {
	if bad := allowedErr(op, err, allowed...); bad != nil {
		return "", bad
	}
	if e, ok := domain.AsError(err); ok {
		return e.Code, nil
	}
	return "", nil
}
