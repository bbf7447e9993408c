package main

import (
	"testing"
	"time"
)

// TestReserveClockStaleness: a viewer's value V0−k is timed from the k-th
// answered reserve; the first value (k = 0), a value below what was
// answered and one from before the load are not timed.
func TestReserveClockStaleness(t *testing.T) {
	t.Parallel()
	c := reserveClock{times: []int64{1_000, 2_000, 3_000}}
	for _, tc := range []struct {
		available, recv int64
		want            time.Duration
		ok              bool
	}{
		{available: 99, recv: 1_500, want: 500, ok: true}, // the 1st reserve's unit
		{available: 97, recv: 3_250, want: 250, ok: true}, // the 3rd
		{available: 97, recv: 2_900, want: 0, ok: true},   // the viewer got it before the reserve's answer: not negative
		{available: 100, recv: 5_000},                     // the value before the load
		{available: 101, recv: 5_000},                     // higher than at the start
		{available: 96, recv: 5_000},                      // a 4th unit gone that no answer accounts for
	} {
		got, ok := c.staleness(100, viewerUpdate{available: tc.available, recv: tc.recv})
		if got != tc.want || ok != tc.ok {
			t.Errorf("available %d at %d: got %v, %v; want %v, %v", tc.available, tc.recv, got, ok, tc.want, tc.ok)
		}
	}
}

// TestLoopbackAddrsDistinct: the viewers' source addresses never repeat
// within 10,000 viewers at one per address, and stay in 127.0.0.0/8.
func TestLoopbackAddrsDistinct(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for i := range 10_000 {
		a := loopbackAddr(i).String()
		if seen[a] {
			t.Fatalf("address %d repeats %s", i, a)
		}
		seen[a] = true
		if a[:4] != "127." {
			t.Fatalf("address %d is %s, not loopback", i, a)
		}
	}
}
