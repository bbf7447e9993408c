package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"inventory/domain"
)

// 200 checkouts race for 150 codes, one each: exactly 150 win, each holding
// one code of its own, and the other 50 are told OUT_OF_STOCK.
func TestCodesConcurrentReserveOneEach(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	codes := make([]string, 150)
	for i := range codes {
		codes[i] = codeName("GC", i)
	}
	if batch := b.codesImport(t, "GC", "AMS", "B-1", codes...); batch.Inserted != 150 {
		t.Fatalf("import: %+v", batch)
	}

	const checkouts = 200
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		ok, out    int
		heldIDs    = map[string]bool{}
		start      = make(chan struct{})
		started    = time.Now()
		outOfStock []*domain.Error
	)
	for i := range checkouts {
		wg.Go(func() {
			<-start
			res, replayed, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{
				CheckoutID: fmt.Sprintf("cart-%03d", i), RequestKey: "k", TTLSeconds: 900,
				Lines: []domain.ReserveLine{{SKU: "GC", Location: ptr("AMS"), Quantity: 1}}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if replayed || res.Status != domain.StatusHeld || len(res.Lines) != 1 || res.Lines[0].Quantity != 1 || res.Lines[0].PreorderQuantity != 0 {
					t.Errorf("checkout %d: replayed %v %+v", i, replayed, res)
				}
				ok++
				heldIDs[res.ID] = true
			case isCode(err, domain.CodeOutOfStock):
				out++
				e, _ := domain.AsError(err)
				outOfStock = append(outOfStock, e)
			default:
				t.Errorf("checkout %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d reservations for 150 codes in %s", checkouts, time.Since(started).Round(time.Millisecond))
	if t.Failed() {
		t.FailNow()
	}
	if ok != 150 || out != 50 || len(heldIDs) != 150 {
		t.Fatalf("%d reserved (%d distinct), %d out of stock; want 150 and 50", ok, len(heldIDs), out)
	}
	for _, e := range outOfStock {
		if e.Available == nil || *e.Available != 0 || e.SKU != "GC" || e.Line == nil || *e.Line != 0 {
			t.Fatalf("OUT_OF_STOCK error: %+v (available %s)", e, optInt(e.Available))
		}
	}

	for _, check := range []struct {
		what  string
		query string
		want  int
	}{
		{"held codes", `SELECT count(*) FROM codes WHERE status = 'held'`, 150},
		{"available codes", `SELECT count(*) FROM codes WHERE status = 'available'`, 0},
		{"held codes on a held reservation's line", `SELECT count(*) FROM codes c
			JOIN reservation_lines rl ON rl.id = c.reservation_line_id JOIN reservations r ON r.id = rl.reservation_id
			WHERE c.status = 'held' AND r.status = 'held'`, 150},
		{"distinct lines holding codes", `SELECT count(DISTINCT reservation_line_id) FROM codes WHERE status = 'held'`, 150},
		{"distinct reservations holding codes", `SELECT count(DISTINCT rl.reservation_id) FROM codes c JOIN reservation_lines rl ON rl.id = c.reservation_line_id`, 150},
		{"reservation lines linked to more codes than their quantity", `SELECT count(*) FROM reservation_lines rl
			WHERE (SELECT count(*) FROM codes c WHERE c.reservation_line_id = rl.id) > rl.quantity`, 0},
		{"reservation lines of held reservations without exactly one code", `SELECT count(*) FROM reservation_lines rl JOIN reservations r ON r.id = rl.reservation_id
			WHERE r.status = 'held' AND (SELECT count(*) FROM codes c WHERE c.reservation_line_id = rl.id) <> 1`, 0},
		{"codes linked to two lines (as code id repeated over the join)", `SELECT count(*) FROM (
			SELECT c.id FROM codes c JOIN reservation_lines rl ON rl.id = c.reservation_line_id GROUP BY c.id HAVING count(*) > 1) x`, 0},
		{"reservations", `SELECT count(*) FROM reservations`, 150},
		{"allocation failures", `SELECT count(*) FROM allocation_failures`, 50},
	} {
		if n := b.sqlInt(t, check.query); n != check.want {
			t.Errorf("%s: %d, want %d", check.what, n, check.want)
		}
	}
	if on, rsv := b.Balance(t, "GC", "AMS"); on != 150 || rsv != 150 {
		t.Errorf("balance: on_hand %d reserved %d, want 150 and 150", on, rsv)
	}
	var ids []string
	if err := b.Pool.QueryRow(b.Ctx, `SELECT array_agg(id::text) FROM reservations WHERE status = 'held'`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !heldIDs[id] {
			t.Errorf("reservation %s is held but no caller was told so", id)
		}
	}
	b.requireCodeInvariants(t)
}
