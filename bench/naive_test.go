package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/pgtest"
)

// TestNaiveServerNeverOversells starts the naive child (the test binary
// run with -naive-serve, as the bench runs itself) on a real database and
// sends concurrent reserves past the stock of a QUANTITY SKU (3 units at a
// time), the hot SKU and a CODES SKU: exactly the stock is held (counted in
// SQL afterwards), every other request is refused with 409, and a confirm
// takes its units off the balance once. resetNaive then restocks.
func TestNaiveServerNeverOversells(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var loc int64
	if err := pool.QueryRow(ctx, `INSERT INTO locations (code, name, priority) VALUES ('L1', 'test', 0) RETURNING id`).Scan(&loc); err != nil {
		t.Fatal(err)
	}
	st := naiveStock{spread: 1, spreadOnHand: 40, hotOnHand: 30, codes: 25}
	cat, err := seedNaive(ctx, pool, loc, st)
	if err != nil {
		t.Fatal(err)
	}
	n, err := startNaiveChild(naiveConfig{DatabaseURL: dbURL, MaxConns: 8, CodeLine: cat.codeLine}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer n.stop()

	for _, tc := range []struct {
		sku                 string
		quantity, attempts  int
		wantHeld, wantUnits int
	}{
		{sku: cat.spread[0], quantity: 3, attempts: 40, wantHeld: 13, wantUnits: 39}, // 1 unit left: 3 do not fit
		{sku: cat.hot, quantity: 1, attempts: 90, wantHeld: 30, wantUnits: 30},
		{sku: cat.codes, quantity: 1, attempts: 75, wantHeld: 25, wantUnits: 25},
	} {
		statuses := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		next := make(chan struct{}, tc.attempts)
		for range tc.attempts {
			next <- struct{}{}
		}
		close(next)
		for range 16 {
			wg.Go(func() {
				for range next {
					status, _ := naivePost(t, n.url+"/reserve", naiveHoldRequest{SKU: tc.sku, Location: "L1", Quantity: tc.quantity})
					mu.Lock()
					statuses[status]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if statuses[http.StatusOK] != tc.wantHeld || statuses[http.StatusConflict] != tc.attempts-tc.wantHeld {
			t.Errorf("%s: answers %v, want %d × 200 and %d × 409", tc.sku, statuses, tc.wantHeld, tc.attempts-tc.wantHeld)
		}
		var holds, units, reserved, onHand, heldCodes, distinctCodes int
		if err := pool.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM naive_holds h JOIN skus s ON s.id = h.sku_id WHERE s.code = $1),
				(SELECT coalesce(sum(quantity), 0) FROM naive_holds h JOIN skus s ON s.id = h.sku_id WHERE s.code = $1),
				(SELECT b.reserved FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = $1),
				(SELECT b.on_hand FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = $1),
				(SELECT count(*) FROM codes c JOIN skus s ON s.id = c.sku_id WHERE s.code = $1 AND c.status = 'held'),
				(SELECT count(DISTINCT c) FROM naive_holds h JOIN skus s ON s.id = h.sku_id, unnest(h.code_ids) c WHERE s.code = $1)`, tc.sku).
			Scan(&holds, &units, &reserved, &onHand, &heldCodes, &distinctCodes); err != nil {
			t.Fatal(err)
		}
		if holds != tc.wantHeld || units != tc.wantUnits {
			t.Errorf("%s: %d holds of %d units in naive_holds, want %d of %d", tc.sku, holds, units, tc.wantHeld, tc.wantUnits)
		}
		if tc.sku == cat.codes {
			// The seeds' code claim leaves the balance alone: the code rows are the stock.
			if heldCodes != tc.wantUnits || distinctCodes != tc.wantUnits {
				t.Errorf("%s: %d codes held, %d distinct codes in holds, want %d", tc.sku, heldCodes, distinctCodes, tc.wantUnits)
			}
		} else if reserved != tc.wantUnits || reserved > onHand {
			t.Errorf("%s: reserved %d of %d on hand, want %d", tc.sku, reserved, onHand, tc.wantUnits)
		}
	}

	// Out of stock: what is left of the spread SKU (1 unit) is held, then refused.
	if status, body := naivePost(t, n.url+"/reserve", naiveHoldRequest{SKU: cat.spread[0], Location: "L1", Quantity: 1}); status != http.StatusOK {
		t.Fatalf("the last unit: %d %s", status, body)
	}
	for _, sku := range []string{cat.spread[0], cat.hot, cat.codes} {
		if status, body := naivePost(t, n.url+"/reserve", naiveHoldRequest{SKU: sku, Location: "L1", Quantity: 1}); status != http.StatusConflict {
			t.Errorf("%s sold out: %d %s, want 409", sku, status, body)
		}
	}
	if status, _ := naivePost(t, n.url+"/reserve", naiveHoldRequest{SKU: "NOPE", Location: "L1", Quantity: 1}); status != http.StatusNotFound {
		t.Errorf("an unknown SKU: %d, want 404", status)
	}

	// Confirm once: the units leave on_hand and reserved; again: 409.
	var holdID int64
	if err := pool.QueryRow(ctx, `SELECT id FROM naive_holds WHERE sku_id = $1 AND quantity = 3 LIMIT 1`, cat.minSKU).Scan(&holdID); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{http.StatusOK, http.StatusConflict} {
		if status, body := naivePost(t, n.url+"/confirm", naiveHoldID{ID: holdID}); status != want {
			t.Fatalf("confirm #%d: %d %s, want %d", i+1, status, body, want)
		}
	}
	var reserved, onHand int
	if err := pool.QueryRow(ctx, `SELECT reserved, on_hand FROM balances WHERE sku_id = $1`, cat.minSKU).Scan(&reserved, &onHand); err != nil {
		t.Fatal(err)
	}
	if reserved != 37 || onHand != 37 {
		t.Errorf("after confirming 3 of 40 units: reserved %d, on_hand %d; want 37, 37", reserved, onHand)
	}

	// resetNaive restocks for the next cell.
	if err := resetNaive(ctx, pool, cat); err != nil {
		t.Fatal(err)
	}
	var bad int
	if err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM naive_holds) +
			(SELECT count(*) FROM codes WHERE status <> 'available') +
			(SELECT count(*) FROM balances WHERE reserved <> 0 OR on_hand <> CASE WHEN sku_id = $1 THEN $2::int WHEN sku_id = $3 THEN $4::int ELSE on_hand END)`,
		cat.hotSKU, st.hotOnHand, cat.minSKU, st.spreadOnHand).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("after resetNaive, %d rows are not as seeded", bad)
	}
}

// naivePost posts v as JSON to url and returns the answer's status and body.
func naivePost(t *testing.T, url string, v any) (int, string) {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
