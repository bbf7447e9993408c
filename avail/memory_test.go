package avail_test

import (
	"runtime"
	"testing"
	"time"

	"inventory/avail"
	"inventory/domain"
)

// 100,000 balances (10,000 SKUs with realistic codes at 10 locations) held
// in the copy take less than 100 MB of heap, and a query over 500 of them
// is answered from it.
func TestCopyOf100kBalancesFitsIn100MB(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.Pool.Exec(b.Ctx, `
		INSERT INTO locations (code, name, priority) SELECT 'WH-' || i, 'Warehouse ' || i, i FROM generate_series(1, 10) i;
		INSERT INTO skus (code, name, kind) SELECT 'SKU-HEADPHONES-' || lpad(i::text, 6, '0'), 'Item ' || i, 'quantity' FROM generate_series(1, 10000) i;
		INSERT INTO balances (sku_id, location_id, on_hand, reserved, pending_supply)
		SELECT s.id, l.id, 100, (s.id % 7)::int, (s.id % 3)::int FROM skus s CROSS JOIN locations l`); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	started := time.Now()
	in := b.instance(t, avail.Config{MaxLag: time.Second})
	skus := make([]string, 500)
	for i := range skus {
		skus[i] = "SKU-HEADPHONES-" + pad(i*20+1)
	}
	q := domain.AvailabilityQuery{SKUs: skus}
	waitFor(t, 60*time.Second, "the copy to load", func() bool { _, _, ok := in.copy.Get(q); return ok })
	loaded := time.Since(started)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	got, _, _ := in.copy.Get(q)
	if len(got) != 500 || got[0] == nil || len(got[0].Locations) != 10 {
		t.Fatalf("answer for 500 SKUs: %d entries, first %+v", len(got), got[0])
	}
	t.Logf("100,000 balances: %.1f MB of heap, loaded in %v", float64(heap)/1e6, loaded.Round(time.Millisecond))
	if heap > 100e6 {
		t.Fatalf("the copy of 100,000 balances takes %.1f MB of heap, want < 100 MB", float64(heap)/1e6)
	}
	runtime.KeepAlive(in)
}

func pad(i int) string {
	s := []byte("000000")
	for k := 5; k >= 0 && i > 0; k-- {
		s[k] = byte('0' + i%10)
		i /= 10
	}
	return string(s)
}
