package resolvers

import (
	"slices"
	"sync"
	"testing"
)

// TestLatestHoldsOneValuePerKey: a key put again while queued keeps its
// place and takes the newer value; a popped key queues again at the end.
func TestLatestHoldsOneValuePerKey(t *testing.T) {
	t.Parallel()
	var l latest[int]
	l.put("a", 1)
	l.put("b", 1)
	l.put("a", 2)
	var got []int
	var keys []string
	for v, ok := l.peek(); ok; v, ok = l.peek() {
		got = append(got, v)
		keys = append(keys, l.order[0])
		l.pop()
		if len(got) == 1 {
			l.put("a", 3)
		}
	}
	if !slices.Equal(keys, []string{"a", "b", "a"}) || !slices.Equal(got, []int{2, 1, 3}) {
		t.Fatalf("sent %v %v, want a=2 b=1 a=3", keys, got)
	}
}

// TestDirtySetUnderConcurrentMarks: marks from many goroutines while
// another takes are never lost: every key marked after a take is in a
// later take.
func TestDirtySetUnderConcurrentMarks(t *testing.T) {
	t.Parallel()
	order := []string{"a", "b", "c", "d"}
	var d dirtySet
	var wg sync.WaitGroup
	for _, k := range order {
		wg.Go(func() {
			for range 1000 {
				d.mark(k)
			}
		})
	}
	seen := map[string]bool{}
	for range 100 {
		keys, _ := d.take(order)
		for _, k := range keys {
			seen[k] = true
		}
	}
	wg.Wait()
	keys, _ := d.take(order)
	for _, k := range keys {
		seen[k] = true
	}
	if len(seen) != len(order) {
		t.Fatalf("keys taken: %v, want all of %v", seen, order)
	}
	if rest, _ := d.take(order); rest != nil {
		t.Fatalf("taken twice: %v", rest)
	}
}
