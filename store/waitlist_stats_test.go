package store_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"inventory/domain"
	"inventory/store"
)

// TestWaitlistOverviewReadsOnlyTheWaiting: the metrics' totals and the admin
// panel's lines (a first page, and a connection's page after a line) are
// read from the waiting entries alone. With 20,000 ended
// entries of a long sale behind 30 waiting, each statement reads a handful
// of pages (EXPLAIN ANALYZE BUFFERS), not the table; and the answers are
// the lines as they are: longest first, ties by SKU code, units summed, the
// front's join time.
func TestWaitlistOverviewReadsOnlyTheWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, sku := range []string{"WL-A", "WL-B", "WL-C"} {
		b.Stock(t, sku, "L1", 0)
	}
	if _, err := b.Pool.Exec(b.Ctx, `
		INSERT INTO waitlist_entries (checkout_id, request_key, fingerprint, sku_id, quantity, offer_ttl_seconds, expires_at, status, ended_at)
		SELECT 'gone' || g, 'k', '\x00', (SELECT id FROM skus WHERE code = 'WL-A'), 1, 900, now(), 'left', now()
		FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	// WL-B: 12 waiting for 2 units each; WL-A and WL-C: 9 each, for 1.
	for _, l := range []struct {
		sku  string
		n, q int
	}{{"WL-B", 12, 2}, {"WL-C", 9, 1}, {"WL-A", 9, 1}} {
		for i := range l.n {
			b.mustJoin(t, fmt.Sprintf("%s-%d", l.sku, i), "k", l.sku, "", l.q)
		}
	}
	if _, err := b.Pool.Exec(b.Ctx, `VACUUM ANALYZE waitlist_entries`); err != nil {
		t.Fatal(err)
	}
	// lines after: waitlistLinesConnection's next page, after WL-B's line.
	for _, c := range []struct {
		name, q string
		args    []any
	}{
		{"totals", store.WaitlistTotalsStatement, nil},
		{"lines", store.WaitlistLinesStatement, []any{20, nil, nil}},
		{"lines after", store.WaitlistLinesStatement, []any{20, 12, "WL-B"}},
	} {
		name, q, args := c.name, c.q, c.args
		var plan []map[string]any
		if err := b.Pool.QueryRow(b.Ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+q, args...).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		top := plan[0]["Plan"].(map[string]any)
		blocks := top["Shared Hit Blocks"].(float64) + top["Shared Read Blocks"].(float64)
		if blocks > 30 {
			t.Fatalf("%s read %.0f pages for 30 waiting entries behind 20,000 ended ones, want at most 30", name, blocks)
		}
		t.Logf("%s: %.0f pages", name, blocks)
	}

	totals, err := b.Store.WaitlistTotals(b.Ctx)
	if err != nil || totals != (store.WaitlistTotals{Waiting: 30, LongestLine: 12}) {
		t.Fatalf("totals %+v %v", totals, err)
	}
	lines, err := b.Store.WaitlistLines(b.Ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, fmt.Sprintf("%s %d %d", l.SKU, l.Waiting, l.Units))
	}
	if want := []string{"WL-B 12 24", "WL-A 9 9"}; !slices.Equal(got, want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	var front domain.WaitlistLine
	if err := b.Pool.QueryRow(b.Ctx, `SELECT min(joined_at) FROM waitlist_entries w JOIN skus s ON s.id = w.sku_id
		WHERE s.code = 'WL-B' AND w.status = 'waiting'`).Scan(&front.OldestJoinedAt); err != nil {
		t.Fatal(err)
	}
	if !lines[0].OldestJoinedAt.Equal(front.OldestJoinedAt) || lines[0].OldestWaitSeconds < 0 {
		t.Fatalf("WL-B's front joined %v (%d s ago), want %v", lines[0].OldestJoinedAt, lines[0].OldestWaitSeconds, front.OldestJoinedAt)
	}
	for _, n := range []int{0, domain.MaxWaitlistLines + 1} {
		if _, err := b.Store.WaitlistLines(b.Ctx, n); err == nil {
			t.Fatalf("WaitlistLines(%d) answered", n)
		}
	}
}

// TestWaitlistLineUnitsCappedAtTheLargestInt: 2,148 checkouts waiting for
// MaxQuantity units of one SKU wait for more than a GraphQL Int holds; the
// line still reads, its units at 2,147,483,647, instead of failing the
// admin's whole page.
func TestWaitlistLineUnitsCappedAtTheLargestInt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "WL-BIG", "L1", 0)
	if _, err := b.Pool.Exec(b.Ctx, `
		INSERT INTO waitlist_entries (checkout_id, request_key, fingerprint, sku_id, quantity, offer_ttl_seconds, expires_at)
		SELECT 'big' || g, 'k', '\x00', (SELECT id FROM skus WHERE code = 'WL-BIG'), $1, 900, now() + interval '1 hour'
		FROM generate_series(1, 2148) g`, domain.MaxQuantity); err != nil {
		t.Fatal(err)
	}
	lines, err := b.Store.WaitlistLines(b.Ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].Waiting != 2148 || lines[0].Units != math.MaxInt32 {
		t.Fatalf("lines %+v; want WL-BIG's 2,148 entries with units capped at %d", lines, math.MaxInt32)
	}
}
