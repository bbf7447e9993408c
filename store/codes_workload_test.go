package store_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/codefile"
	"inventory/domain"
)

// codesWorkload is the shared bookkeeping of TestCodesRandomWorkload.
type codesWorkload struct {
	mu           sync.Mutex
	reservations []codesWorkloadReservation
	short        []codesWorkloadReservation // the ones with a 1-second hold
	confirmed    []string
	// told is what callers were told about a reservation, as the final status
	// it implies (see TestReservationRandomWorkload).
	told map[string][]string
	// codes maps every code whose import committed to its balance
	// ("SKU@LOC"); byBalance lists them per balance, for duplicate lines.
	codes     map[string]string
	byBalance map[string][]string
	imported  map[string]int // inserted per balance, initial stock included
	// revealed maps each code revealed so far to the order line it was
	// revealed on: a code on two order lines was sold twice.
	revealed map[string]int64
	ops      map[string]int
	refused  map[string]int
}

type codesWorkloadReservation struct {
	id, checkout string
	expiresAt    time.Time
}

func (w *codesWorkload) tell(id string, outcomes ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.told[id] = append(w.told[id], outcomes...)
}

// pick returns a random reservation, mostly a recent one.
func (w *codesWorkload) pick(rng *rand.Rand) (codesWorkloadReservation, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.reservations)
	if n == 0 {
		return codesWorkloadReservation{}, false
	}
	if rng.IntN(10) < 7 {
		return w.reservations[n-1-rng.IntN(min(n, 30))], true
	}
	return w.reservations[rng.IntN(n)], true
}

// pickDue returns a short hold that is past its deadline if it finds one,
// else any short hold.
func (w *codesWorkload) pickDue(rng *rand.Rand) (codesWorkloadReservation, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.short)
	if n == 0 {
		return codesWorkloadReservation{}, false
	}
	for range 10 {
		r := w.short[rng.IntN(n)]
		if time.Now().After(r.expiresAt) {
			return r, true
		}
	}
	return w.short[rng.IntN(n)], true
}

// recordReveal checks revealed codes against what was imported for the
// line's balance and against every earlier reveal.
func (w *codesWorkload) recordReveal(line domain.OrderLine, codes []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := line.SKU + "@" + line.Location
	for _, c := range codes {
		if got, ok := w.codes[c]; !ok || got != want {
			return fmt.Errorf("order line %d (%s) revealed %q, imported for %q", line.ID, want, c, got)
		}
		if other, ok := w.revealed[c]; ok && other != line.ID {
			return fmt.Errorf("code %q revealed on order lines %d and %d: sold twice", c, other, line.ID)
		}
		w.revealed[c] = line.ID
	}
	return nil
}

// A randomized concurrent workload over CODES SKUs: reserve 1–3 codes (at a
// location or sourced, some baskets with a second code line or a QUANTITY
// line), confirm, release, expire due 1-second holds, import new batches (some
// with duplicates of stored codes and blank lines) and reveal sold codes.
// Afterwards every code is in exactly one state that agrees with the
// reservations and orders, the balances count the code rows, and
// reconciliation finds nothing.
func TestCodesRandomWorkload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	codeSKUs := []string{"GA", "GB"}
	locs := []string{"W1", "W2"}
	for i, loc := range locs {
		mustLocation(t, b, loc, []int{2, 1}[i])
	}
	w := &codesWorkload{told: map[string][]string{}, codes: map[string]string{}, byBalance: map[string][]string{},
		imported: map[string]int{}, revealed: map[string]int64{}, ops: map[string]int{}, refused: map[string]int{}}
	const initial = 15
	for _, sku := range codeSKUs {
		b.codesSKU(t, sku)
		for _, loc := range locs {
			key := sku + "@" + loc
			codes := make([]string, initial)
			for i := range codes {
				codes[i] = fmt.Sprintf("%s-%s-INIT-%03d-ZQ", sku, loc, i)
				w.codes[codes[i]] = key
			}
			if batch := b.codesImport(t, sku, loc, "initial-"+loc, codes...); batch.Inserted != initial {
				t.Fatalf("initial import %s: %+v", key, batch)
			}
			w.byBalance[key] = codes
			w.imported[key] = initial
		}
	}
	for _, loc := range locs {
		b.Stock(t, "QX", loc, 500)
	}
	deadlocksBefore := b.deadlocksSoFar(t)

	const (
		goroutines = 8
		opsEach    = 130 // 1,040 operations in all
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	ops := []workloadOp{
		{"reserve", 32, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			in := domain.ReserveInput{CheckoutID: fmt.Sprintf("cw-%d", g), RequestKey: fmt.Sprintf("k-%d", i), TTLSeconds: 30}
			if rng.IntN(5) < 2 {
				in.TTLSeconds = 1
			}
			codeLine := func() domain.ReserveLine {
				l := domain.ReserveLine{SKU: codeSKUs[rng.IntN(len(codeSKUs))], Quantity: 1 + rng.IntN(3)}
				if rng.IntN(4) != 0 {
					l.Location = ptr(locs[rng.IntN(len(locs))])
				}
				return l
			}
			in.Lines = append(in.Lines, codeLine())
			if rng.IntN(5) == 0 {
				in.Lines = append(in.Lines, codeLine())
			}
			if rng.IntN(10) < 3 {
				in.Lines = append(in.Lines, domain.ReserveLine{SKU: "QX", Location: ptr(locs[rng.IntN(len(locs))]), Quantity: 1 + rng.IntN(2)})
			}
			rng.Shuffle(len(in.Lines), func(i, j int) { in.Lines[i], in.Lines[j] = in.Lines[j], in.Lines[i] })
			res, replayed, err := b.Store.ReservationCreate(b.Ctx, in)
			if err != nil {
				return verdict("reserve", err, domain.CodeOutOfStock)
			}
			if replayed || res.Status != domain.StatusHeld {
				return "", fmt.Errorf("reserve: replayed %v status %s for a new key", replayed, res.Status)
			}
			got := make([]int, len(in.Lines))
			for _, rl := range res.Lines {
				if rl.InputLine < 0 || rl.InputLine >= len(in.Lines) || rl.PreorderQuantity != 0 {
					return "", fmt.Errorf("reserve: line %+v of input %+v", rl, in.Lines)
				}
				got[rl.InputLine] += rl.Quantity
				if l := in.Lines[rl.InputLine]; rl.SKU != l.SKU || l.Location != nil && rl.Location != *l.Location {
					return "", fmt.Errorf("reserve: line %+v does not match input %+v", rl, l)
				}
			}
			for j, l := range in.Lines {
				if got[j] != l.Quantity {
					return "", fmt.Errorf("reserve: input line %d wants %d, holds %d (%+v)", j, l.Quantity, got[j], res.Lines)
				}
			}
			r := codesWorkloadReservation{id: res.ID, checkout: in.CheckoutID, expiresAt: res.ExpiresAt}
			w.mu.Lock()
			w.reservations = append(w.reservations, r)
			if in.TTLSeconds == 1 {
				w.short = append(w.short, r)
			}
			w.mu.Unlock()
			return "", nil
		}},
		{"confirm", 16, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			r, ok := w.pick(rng)
			if !ok {
				return "", nil
			}
			scope := domain.Scope{}
			if rng.IntN(2) == 0 {
				scope.CheckoutID = r.checkout
			}
			res, err := b.Store.ReservationConfirm(b.Ctx, scope, domain.ConfirmInput{ID: r.id, OrderRef: "ORD-" + r.id})
			switch {
			case err == nil:
				if res.Status != domain.StatusConfirmed || res.Order == nil || res.Order.Ref != "ORD-"+r.id {
					return "", fmt.Errorf("confirm %s: status %s order %+v", r.id, res.Status, res.Order)
				}
				for _, ol := range res.Order.Lines {
					if ol.PendingCodes != 0 {
						return "", fmt.Errorf("confirm %s: order line %+v has pending units without any pre-order", r.id, ol)
					}
				}
				w.tell(r.id, "confirmed")
				w.mu.Lock()
				w.confirmed = append(w.confirmed, r.id)
				w.mu.Unlock()
			case isCode(err, domain.CodeReservationExpired):
				w.tell(r.id, "not-confirmed")
			case isCode(err, domain.CodeInvalidTransition):
				w.tell(r.id, "released")
			}
			return verdict("confirm", err, domain.CodeReservationExpired, domain.CodeInvalidTransition)
		}},
		{"release", 10, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			r, ok := w.pick(rng)
			if !ok {
				return "", nil
			}
			res, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{CheckoutID: r.checkout},
				domain.ReleaseInput{ID: r.id, Reason: domain.ReasonPaymentFailed})
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
		{"expire", 14, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			r, ok := w.pickDue(rng)
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
		{"import", 9, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			sku, loc := codeSKUs[rng.IntN(len(codeSKUs))], locs[rng.IntN(len(locs))]
			key := sku + "@" + loc
			var lines, fresh []string
			for n := range 2 + rng.IntN(6) {
				c := fmt.Sprintf("%s-%s-G%d-I%03d-%02d-ZQ", sku, loc, g, i, n)
				lines, fresh = append(lines, c), append(fresh, c)
			}
			dups, blanks := 0, 0
			if rng.IntN(10) < 4 {
				w.mu.Lock()
				stored := w.byBalance[key]
				for range 1 + rng.IntN(3) {
					// A stored code, as a supplier might send it again:
					// lower-case, with spaces for hyphens.
					c := stored[rng.IntN(len(stored))]
					lines = append(lines, strings.ReplaceAll(strings.ToLower(c), "-", " "))
					dups++
				}
				w.mu.Unlock()
			}
			if rng.IntN(5) == 0 {
				lines = append(lines, "   ")
				blanks++
			}
			rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
			batch, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: sku, Location: loc, BatchRef: fmt.Sprintf("B-%d-%d", g, i)}, codefile.List(lines))
			if err != nil {
				return "", fmt.Errorf("import %s: %v", key, err)
			}
			if batch.Received != len(lines) || batch.Inserted != len(fresh) || batch.Duplicates != dups || batch.Rejected != blanks || batch.PreordersFilled != 0 {
				return "", fmt.Errorf("import %s of %d new, %d duplicate, %d blank lines: %+v", key, len(fresh), dups, blanks, batch)
			}
			w.mu.Lock()
			for _, c := range fresh {
				w.codes[c] = key
			}
			w.byBalance[key] = append(w.byBalance[key], fresh...)
			w.imported[key] += len(fresh)
			w.mu.Unlock()
			return "", nil
		}},
		{"reveal", 6, func(g, i int, rng *rand.Rand) (domain.ErrorCode, error) {
			w.mu.Lock()
			if len(w.confirmed) == 0 {
				w.mu.Unlock()
				return "", nil
			}
			id := w.confirmed[rng.IntN(len(w.confirmed))]
			w.mu.Unlock()
			res, err := b.Store.ReservationGetByID(b.Ctx, domain.Scope{}, id)
			if err != nil || res == nil || res.Order == nil {
				return "", fmt.Errorf("read confirmed %s: %+v %v", id, res, err)
			}
			for _, ol := range res.Order.Lines {
				codes, err := b.Store.CodesReveal(checkoutCtx(res.CheckoutID), domain.Scope{CheckoutID: res.CheckoutID}, ol.ID)
				if err != nil {
					return "", fmt.Errorf("reveal order line %d of %s: %v", ol.ID, id, err)
				}
				if ol.Kind == domain.KindQuantity {
					if len(codes) != 0 {
						return "", fmt.Errorf("QUANTITY order line %+v revealed codes %q", ol, codes)
					}
					continue
				}
				if len(codes) != ol.Quantity {
					return "", fmt.Errorf("order line %+v revealed %d codes", ol, len(codes))
				}
				if err := w.recordReveal(ol, codes); err != nil {
					return "", err
				}
			}
			return "", nil
		}},
	}
	elapsed := runWorkload(t, seed, goroutines, opsEach, ops, &w.mu, w.ops, w.refused)
	total := 0
	for _, n := range w.ops {
		total += n
	}
	t.Logf("%d operations from %d goroutines in %s (%.0f/s); by op %v; refusals %v; %d holds made",
		total, goroutines, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), w.ops, w.refused, len(w.reservations))
	if total < 1000 || w.ops["reserve"] == 0 || w.ops["confirm"] == 0 || w.ops["release"] == 0 || w.ops["expire"] == 0 || w.ops["import"] == 0 {
		t.Fatalf("workload too thin: %v", w.ops)
	}

	// The state mid-flight: some holds still held, others ended every way.
	b.requireCodeInvariants(t)

	// Expire what is due, as the expiry jobs would, and check again.
	var last time.Time
	for _, r := range w.short {
		if r.expiresAt.After(last) {
			last = r.expiresAt
		}
	}
	time.Sleep(max(time.Until(last), 0) + 20*time.Millisecond)
	rows, err := b.Pool.Query(b.Ctx, `SELECT id::text FROM reservations WHERE status = 'held' AND expires_at <= clock_timestamp()`)
	if err != nil {
		t.Fatal(err)
	}
	var due []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		due = append(due, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range due {
		if notBefore, _, err := b.Store.ReservationExpire(b.Ctx, id); err != nil || notBefore != nil {
			t.Fatalf("expire due %s: %v %v", id, notBefore, err)
		}
		w.tell(id, "expired")
	}
	b.requireCodeInvariants(t)
	held := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE status = 'held'`)
	t.Logf("%d due holds expired at the end; %d still held; codes by state: %d available, %d held, %d sold", len(due), held,
		b.sqlInt(t, `SELECT count(*) FROM codes WHERE status = 'available'`), b.sqlInt(t, `SELECT count(*) FROM codes WHERE status = 'held'`),
		b.sqlInt(t, `SELECT count(*) FROM codes WHERE status = 'sold'`))

	// Per balance, from the callers' side: on_hand is what was imported
	// minus the codes sold, reserved is the held codes.
	for _, sku := range codeSKUs {
		for _, loc := range locs {
			key := sku + "@" + loc
			sold := b.sqlInt(t, `SELECT coalesce(sum(ol.quantity), 0) FROM order_lines ol JOIN skus s ON s.id = ol.sku_id JOIN locations l ON l.id = ol.location_id
				WHERE s.code = $1 AND l.code = $2`, sku, loc)
			rows := b.sqlInt(t, `SELECT count(*) FROM codes c JOIN skus s ON s.id = c.sku_id JOIN locations l ON l.id = c.location_id
				WHERE s.code = $1 AND l.code = $2`, sku, loc)
			on, _ := b.Balance(t, sku, loc)
			if rows != w.imported[key] || on != w.imported[key]-sold {
				t.Errorf("%s: %d code rows, on_hand %d; want %d imported, %d - %d sold", key, rows, on, w.imported[key], w.imported[key], sold)
			}
		}
	}

	// What callers were told agrees with where each reservation ended.
	for _, id := range slices.Sorted(maps.Keys(w.told)) {
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
			default:
				ok = status == told
			}
			if !ok {
				t.Errorf("reservation %s ended %s, but callers were told %v", id, status, w.told[id])
				break
			}
		}
	}

	// Every sold code, revealed: each one imported for its line's balance,
	// none on two order lines, as many as were sold.
	rows, err = b.Pool.Query(b.Ctx, `SELECT r.id::text FROM reservations r WHERE r.status = 'confirmed'`)
	if err != nil {
		t.Fatal(err)
	}
	var confirmed []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		confirmed = append(confirmed, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	revealed := 0
	for _, id := range confirmed {
		res, err := b.Store.ReservationGetByID(b.Ctx, domain.Scope{}, id)
		if err != nil || res == nil || res.Order == nil {
			t.Fatalf("confirmed %s: %+v %v", id, res, err)
		}
		for _, ol := range res.Order.Lines {
			if ol.Kind != domain.KindCodes {
				continue
			}
			codes := b.codesReveal(t, ol.ID)
			if len(codes) != ol.Quantity {
				t.Fatalf("order line %+v reveals %d codes", ol, len(codes))
			}
			if err := w.recordReveal(ol, codes); err != nil {
				t.Fatal(err)
			}
			revealed += len(codes)
		}
	}
	if sold := b.sqlInt(t, `SELECT count(*) FROM codes WHERE status = 'sold'`); revealed != sold || len(w.revealed) != sold {
		t.Fatalf("%d codes revealed (%d distinct) for %d sold", revealed, len(w.revealed), sold)
	}
	if after := b.deadlocksSoFar(t); after != deadlocksBefore {
		t.Fatalf("pg_stat_database.deadlocks went from %d to %d during the workload", deadlocksBefore, after)
	}
}
