package api

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadinessIsSharedByProbes: 200 concurrent probes run one readiness
// check between them (each was a database round trip on the request pool),
// and a check after the TTL sees a change.
func TestReadinessIsSharedByProbes(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	var broken atomic.Bool
	check := func(context.Context) (string, error) {
		calls.Add(1)
		time.Sleep(20 * time.Millisecond)
		if broken.Load() {
			return "broken", nil
		}
		return "", nil
	}
	ready := sharedReadiness(check, 200*time.Millisecond)
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if reason, err := ready(t.Context()); reason != "" || err != nil {
				t.Errorf("ready: %q %v", reason, err)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("200 concurrent probes ran %d checks, want 1", n)
	}
	broken.Store(true)
	time.Sleep(250 * time.Millisecond)
	if reason, _ := ready(t.Context()); reason != "broken" {
		t.Fatalf("after the TTL: %q, want the new answer", reason)
	}
}
