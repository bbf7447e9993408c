package api

import (
	"strings"
	"testing"
)

// TestByteLRUBoundsBytes: the cache holds what fits in its bytes, evicting
// the least recently used, and never keeps an entry larger than a sixteenth
// of its budget.
func TestByteLRUBoundsBytes(t *testing.T) {
	t.Parallel()
	c := newByteLRU(1600, func(k, v string) int64 { return int64(len(k) + len(v)) })
	for i := range 20 {
		c.add(strings.Repeat("k", i+1), strings.Repeat("v", 99-i)) // 100 bytes each
	}
	if got := c.bytes(); got != 1600 {
		t.Fatalf("holds %d bytes, want 1600", got)
	}
	if _, ok := c.get("k"); ok {
		t.Fatal("the oldest entry was not evicted")
	}
	if _, ok := c.get(strings.Repeat("k", 20)); !ok {
		t.Fatal("the newest entry is missing")
	}
	c.add("big", strings.Repeat("v", 101))
	if _, ok := c.get("big"); ok {
		t.Fatal("an entry over a sixteenth of the budget was kept")
	}
}
