package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/domain"
	"inventory/events"
	"inventory/testkit"
)

// A subscriber that never reads its channel is cut off after StallTimeout
// with a *domain.ErrSubscriberStalled naming the first seq it did not get, and its
// channel is closed, holding exactly the events that fitted; a healthy
// subscriber meanwhile receives every event, and writers are not slowed:
// rounds of writes with a stalled subscriber present alternate with rounds
// without, and the former take less than three times as long.
func TestBrokerStalledSubscriberIsCutOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const buffer, stallTimeout = 4, 300 * time.Millisecond
	br, _ := b.startBroker(t, b.Store, events.Config{Tick: 10 * time.Millisecond, Buffer: buffer, StallTimeout: stallTimeout})
	skus := []string{"ST-A", "ST-B", "ST-C"}
	b.Catalog(t, domain.KindQuantity, skus, "ST-L")

	zero := int64(0)
	healthy := subscribe(t, br, "healthy", &zero, passAll, 1024, true)

	// writeRound makes n receives from 4 goroutines and returns how long
	// they took.
	writeRound := func(n int) time.Duration {
		t.Helper()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for g := range 4 {
			wg.Go(func() {
				for i := range n / 4 {
					if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: skus[(g+i)%len(skus)], Location: "ST-L", Quantity: 1, Reference: testkit.Ref("PO")}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		d := time.Since(start)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return d
	}

	const rounds, perRound = 3, 120
	var without, with time.Duration
	writeRound(20) // warm up the pool's connections
	for r := range rounds {
		without += writeRound(perRound)

		// A subscriber whose channel (of the configured capacity) nobody
		// reads, from the newest seq.
		from := b.waitPublished(t)
		healthy.waitSeq(t, from, 10*time.Second)
		if br.SubscriberBuffer() != buffer {
			t.Fatalf("SubscriberBuffer is %d, want the configured %d", br.SubscriberBuffer(), buffer)
		}
		ch := make(chan domain.StockEvent, br.SubscriberBuffer())
		stalled := &subscriber{name: fmt.Sprintf("stalled-%d", r), ch: ch, ended: make(chan struct{}), closed: make(chan struct{})}
		var endedAt time.Time
		subscribedAt := time.Now()
		br.SubscribeStockEvents(b.Ctx, &from, domain.NewStockEventSink(passAll, ch), func(err error) {
			stalled.mu.Lock()
			defer stalled.mu.Unlock()
			stalled.doneCalls++
			if stalled.doneCalls == 1 {
				endedAt = time.Now()
				stalled.err = err
				close(stalled.ended)
			}
		})
		with += writeRound(perRound)

		err := stalled.waitEnded(t, 10*time.Second)
		var st *domain.ErrSubscriberStalled
		if !errors.As(err, &st) {
			t.Fatalf("%s ended with %v, want *domain.ErrSubscriberStalled", stalled.name, err)
		}
		if want := from + buffer + 1; st.Next != want || st.Timeout != stallTimeout {
			t.Fatalf("%s: Stalled{Next: %d, Timeout: %v}, want Next %d (after %d buffered from %d), Timeout %v",
				stalled.name, st.Next, st.Timeout, want, buffer, from, stallTimeout)
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(st.Next)) {
			t.Fatalf("the stall error %q does not name seq %d", msg, st.Next)
		}
		stalled.mu.Lock()
		if took := endedAt.Sub(subscribedAt); took < stallTimeout {
			t.Fatalf("%s was cut off %v after subscribing, before the stall timeout of %v", stalled.name, took, stallTimeout)
		}
		stalled.mu.Unlock()
		// The channel holds what fitted, then is closed.
		var kept []domain.StockEvent
		timeout := time.After(5 * time.Second)
	drain:
		for {
			select {
			case e, ok := <-ch:
				if !ok {
					break drain
				}
				kept = append(kept, e)
			case <-timeout:
				t.Fatalf("%s: channel not closed 5s after done", stalled.name)
			}
		}
		requireDense(t, stalled.name+"'s channel", seqs(kept), from+1, from+buffer)
	}

	n := b.waitPublished(t)
	healthy.waitSeq(t, n, 10*time.Second)
	requireDense(t, "the healthy subscriber", seqs(healthy.events()), 1, n)
	requireSameEvents(t, "the healthy subscriber", healthy.events(), b.Published(t, 0))
	requireLastIsBalance(t, b, "the healthy subscriber", healthy.events())
	select {
	case <-healthy.ended:
		t.Fatalf("the healthy subscriber ended: %v", healthy.err)
	default:
	}
	t.Logf("%d rounds of %d writes: %v without a stalled subscriber, %v with one (ratio %.2f)",
		rounds, perRound, without.Round(time.Millisecond), with.Round(time.Millisecond), float64(with)/float64(without))
	if with >= 3*without {
		t.Fatalf("writes took %v with a stalled subscriber, %v without: the stalled subscriber slows writers", with, without)
	}
}

// A convert that keeps only one SKU delivers exactly that SKU's events, in
// seq order; it is called once for every event, so the subscription's cursor
// moves past the filtered ones, and a resubscription after the last event
// delivered gets no duplicates and misses nothing.
func TestBrokerFilterBySKU(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br, _ := b.startBroker(t, b.Store, events.Config{Tick: 10 * time.Millisecond})
	skus := []string{"FL-A", "FL-B", "FL-C"}
	b.Catalog(t, domain.KindQuantity, skus, "FL-L")

	// converted records every seq convert was called with.
	type recorder struct {
		mu   sync.Mutex
		seqs []int64
	}
	filter := func(r *recorder) func(ctx context.Context, e domain.StockEvent) (domain.StockEvent, bool, error) {
		pass := onlySKU("FL-A")
		return func(ctx context.Context, e domain.StockEvent) (domain.StockEvent, bool, error) {
			r.mu.Lock()
			r.seqs = append(r.seqs, e.Seq)
			r.mu.Unlock()
			return pass(ctx, e)
		}
	}
	converted := func(r *recorder) []int64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]int64(nil), r.seqs...)
	}
	onlyA := func(evs []domain.StockEvent) []domain.StockEvent {
		var out []domain.StockEvent
		for _, e := range evs {
			if e.SKU == "FL-A" {
				out = append(out, e)
			}
		}
		return out
	}

	zero := int64(0)
	r1 := &recorder{}
	s1 := subscribe(t, br, "filtered", &zero, filter(r1), 256, true)
	// A, B, C in turn, 60 changes: the last A is followed by a B and a C.
	b.receiveMany(t, 60, "FL-L", skus...)
	n := b.waitPublished(t)
	want := onlyA(b.Published(t, 0))
	lastA := want[len(want)-1].Seq
	if lastA != n-2 {
		t.Fatalf("the last FL-A event is seq %d of %d", lastA, n)
	}
	s1.waitSeq(t, lastA, 10*time.Second)
	waitFor(t, 10*time.Second, "convert to see the newest event", func() bool { c := converted(r1); return len(c) > 0 && c[len(c)-1] == n })
	requireSameEvents(t, "the filtered subscription", s1.events(), want)
	requireDense(t, "the seqs passed to convert", converted(r1), 1, n)

	// Disconnect, change more, resubscribe after the last event delivered.
	s1.cancel()
	if err := s1.waitEnded(t, 5*time.Second); err != nil {
		t.Fatalf("cancelled: %v", err)
	}
	s1.waitClosed(t, 5*time.Second)
	b.receiveMany(t, 30, "FL-L", skus...)
	r2 := &recorder{}
	s2 := subscribe(t, br, "filtered again", &lastA, filter(r2), 256, true)
	b.receiveMany(t, 30, "FL-L", skus...)
	n2 := b.waitPublished(t)
	want2 := onlyA(b.Published(t, lastA))
	s2.waitSeq(t, want2[len(want2)-1].Seq, 10*time.Second)
	waitFor(t, 10*time.Second, "convert to see the newest event", func() bool { c := converted(r2); return len(c) > 0 && c[len(c)-1] == n2 })
	requireSameEvents(t, "the resubscribed filtered subscription", s2.events(), want2)
	requireDense(t, "the seqs passed to convert after resubscribing", converted(r2), lastA+1, n2)
	if len(want2) != 20 {
		t.Fatalf("%d FL-A events after seq %d, want 20", len(want2), lastA)
	}
}
