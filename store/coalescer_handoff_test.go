package store

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// handoffItem is a request of the handoff test's coalescer.
type handoffItem struct {
	batchTurn
	n int
}

// TestBatchHandoffOverlapsTheNextBatch: a batch that hands off as it sends
// its last round trip lets the requests queued behind it start their batch
// while it still runs (its commit), without waiting for the queue's spread
// timer (an hour here) or the batch's end; without a handoff they wait.
func TestBatchHandoffOverlapsTheNextBatch(t *testing.T) {
	t.Parallel()
	started := make(chan int, 4)
	handOff, release := make(chan struct{}), make(chan struct{})
	c := newCoalescer("test", 4, 10, time.Minute, slog.Default, func(ctx context.Context, batch []*handoffItem) {
		started <- batch[0].n
		if batch[0].n == 1 {
			<-handOff
			batchHandoff(ctx)
			<-release
		}
	})
	c.spreadAfter = time.Hour
	done := make(chan error, 2)
	submit := func(n int) { go func() { done <- c.submit(context.Background(), &handoffItem{n: n}) }() }

	submit(1)
	if n := <-started; n != 1 {
		t.Fatalf("first batch started with request %d", n)
	}
	submit(2)
	for queued := 0; queued == 0; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		queued = len(c.queue)
		c.mu.Unlock()
	}
	select {
	case n := <-started:
		t.Fatalf("request %d's batch started before the running batch handed off", n)
	case <-time.After(50 * time.Millisecond):
	}
	close(handOff)
	select {
	case n := <-started:
		if n != 2 {
			t.Fatalf("after the handoff a batch started with request %d, want 2", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued request's batch did not start after the running batch handed off")
	}
	if err := <-done; err != nil {
		t.Fatalf("request 2: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("request 1: %v", err)
	}
	// The leaders retire once their requests are answered, just after.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		leaders, queued := c.leaders, len(c.queue)
		c.mu.Unlock()
		if leaders == 0 && queued == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after both batches: %d leaders, %d queued; want none", leaders, queued)
		}
	}
}
