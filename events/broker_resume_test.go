package events_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"inventory/domain"
	"inventory/events"
	"inventory/store"
	"inventory/testkit"
)

// whoKey names, in a subscription's context, who makes a store call.
type whoKey struct{}

func withWho(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, whoKey{}, who)
}

// afterCall is one StockEventsAfter call: by whom ("" for the broker's own
// fetch loop), from which cursor, and the newest seq it returned.
type afterCall struct {
	who   string
	after int64
	n     int
	last  int64
}

// recordingStore is the real store, recording every StockEventsAfter call
// the broker makes on its own behalf or a subscription's.
type recordingStore struct {
	*store.Store
	mu    sync.Mutex
	calls []afterCall
}

func (r *recordingStore) StockEventsAfter(ctx context.Context, after int64, limit int) ([]domain.StockEvent, error) {
	evs, err := r.Store.StockEventsAfter(ctx, after, limit)
	r.record(ctx, after, evs)
	return evs, err
}

func (r *recordingStore) record(ctx context.Context, after int64, evs []domain.StockEvent) {
	who, _ := ctx.Value(whoKey{}).(string)
	c := afterCall{who: who, after: after, n: len(evs)}
	if len(evs) > 0 {
		c.last = evs[len(evs)-1].Seq
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

// StockEventsFetch is the broker's own fetch of new events: recorded as
// StockEventsAfter's calls are.
func (r *recordingStore) StockEventsFetch(ctx context.Context, after int64, limit int) ([]domain.StockEvent, domain.StockHead, error) {
	evs, head, err := r.Store.StockEventsFetch(ctx, after, limit)
	r.record(ctx, after, evs)
	return evs, head, err
}

// callsBy returns the calls made for who.
func (r *recordingStore) callsBy(who string) []afterCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []afterCall
	for _, c := range r.calls {
		if c.who == who {
			out = append(out, c)
		}
	}
	return out
}

// waitBrokerHas waits until the broker's fetch loop has read seq into memory.
func (r *recordingStore) waitBrokerHas(t *testing.T, seq int64) {
	t.Helper()
	waitFor(t, 10*time.Second, "the broker to fetch the newest events", func() bool {
		for _, c := range r.callsBy("") {
			if c.last >= seq {
				return true
			}
		}
		return false
	})
}

// A subscriber that disconnects and resubscribes with after = the last seq
// it received gets exactly the events it missed, then continues live: from
// the database when its cursor is older than the broker's memory (Recent:
// 10), also while writers keep writing, and from memory when it is not.
func TestBrokerResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &recordingStore{Store: b.Store}
	br, _ := b.startBroker(t, rec, events.Config{Tick: 10 * time.Millisecond, Recent: 10})
	b.Catalog(t, domain.KindQuantity, []string{"RS-A", "RS-B"}, "RS-L")

	b.receiveMany(t, 30, "RS-L", "RS-A", "RS-B")
	n := b.waitPublished(t)
	if n != 30 {
		t.Fatalf("%d events, want 30", n)
	}

	// Read 15, then disconnect: what was still in the channel is lost to
	// the client, which only knows the last seq it took.
	zero := int64(0)
	first := subscribeCtx(t, withWho(context.Background(), "first"), br, "first", &zero, passAll, 256, false)
	var read []domain.StockEvent
	for len(read) < 15 {
		select {
		case e, ok := <-first.ch:
			if !ok {
				t.Fatalf("channel closed after %d events: %v", len(read), first.err)
			}
			read = append(read, e)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d events within 10s", len(read))
		}
	}
	requireDense(t, "the first subscription", seqs(read), 1, 15)
	first.cancel()
	if err := first.waitEnded(t, 5*time.Second); err != nil {
		t.Fatalf("a cancelled subscription ended with %v", err)
	}
	for range first.ch { // closed after done
	}
	last := read[len(read)-1].Seq

	// More changes, made while the client is away and while it comes back.
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := range 40 {
			if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: []string{"RS-A", "RS-B"}[i%2], Location: "RS-L", Quantity: 1, Reference: testkit.Ref("PO")}); err != nil {
				t.Errorf("receive: %v", err)
				return
			}
			if i == 20 {
				time.Sleep(50 * time.Millisecond) // let the relay publish some
			}
		}
	}()
	waitFor(t, 10*time.Second, "events past 50 to be published", func() bool {
		s, err := b.Store.StockEventsLatest(b.Ctx)
		return err == nil && s > 50
	})
	// The broker keeps 10 events in memory: seq 16 is long gone from there.
	resumed := subscribeCtx(t, withWho(context.Background(), "resumed"), br, "resumed", &last, passAll, 256, true)
	<-written
	if t.Failed() {
		t.FailNow()
	}
	n = b.waitPublished(t)
	if n != 70 {
		t.Fatalf("%d events, want 70", n)
	}
	resumed.waitSeq(t, n, 10*time.Second)
	requireDense(t, "the resumed subscription", seqs(resumed.events()), last+1, n)
	requireSameEvents(t, "the resumed subscription", resumed.events(), b.Published(t, last))
	if calls := rec.callsBy("resumed"); len(calls) == 0 || calls[0].after != last || calls[0].n == 0 {
		t.Fatalf("the resumed subscription's database reads: %+v; want the first from seq %d", calls, last)
	}

	// It continues live.
	b.receiveMany(t, 20, "RS-L", "RS-A", "RS-B")
	n = b.waitPublished(t)
	resumed.waitSeq(t, n, 10*time.Second)
	requireDense(t, "the resumed subscription, live", seqs(resumed.events()), last+1, n)
	requireLastIsBalance(t, b, "the resumed subscription", append(read, resumed.events()...))

	// With the broker's memory holding n-9..n: resuming from n-10 (memory
	// starts right after it) or later needs no database read; from n-11 it
	// does.
	rec.waitBrokerHas(t, n)
	for _, c := range []struct {
		name     string
		after    int64
		database bool
	}{
		{"edge", n - 10, false},
		{"recent", n - 4, false},
		{"newest", n, false},
		{"older", n - 11, true},
	} {
		s := subscribeCtx(t, withWho(context.Background(), c.name), br, c.name, &c.after, passAll, 256, true)
		if c.after < n {
			s.waitSeq(t, n, 10*time.Second)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
		requireDense(t, c.name, seqs(s.events()), c.after+1, n)
		calls := rec.callsBy(c.name)
		if c.database && (len(calls) == 0 || calls[0].after != c.after) {
			t.Fatalf("resuming from %d (older than memory): database reads %+v", c.after, calls)
		}
		if !c.database && len(calls) != 0 {
			t.Fatalf("resuming from %d (in memory) read the database: %+v", c.after, calls)
		}
		defer s.cancel()
	}
	// All of them, and the resumed one, get what comes next, once.
	b.receiveMany(t, 3, "RS-L", "RS-A")
	n2 := b.waitPublished(t)
	resumed.waitSeq(t, n2, 10*time.Second)
	requireDense(t, "the resumed subscription at the end", seqs(resumed.events()), last+1, n2)
	t.Logf("resumed from seq %d (database), continued live to %d", last, n2)
}

// A cursor older than what has been pruned ends the subscription with
// *domain.ErrCursorExpired (and closes its channel); a cursor at the pruning
// point gets the kept events and continues live.
func TestBrokerExpiredCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"EX"}, "EX-L")
	b.receiveMany(t, 10, "EX-L", "EX")
	if n, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil || n != 10 {
		t.Fatalf("publish: %d, %v", n, err)
	}
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE stock_events SET published_at = now() - interval '2 hours' WHERE seq <= 5`); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Store.StockEventsPrune(b.Ctx, time.Hour); err != nil || n != 5 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	br, _ := b.startBroker(t, b.Store, events.Config{Tick: 10 * time.Millisecond})

	old := int64(2)
	expired := subscribe(t, br, "expired", &old, passAll, 16, true)
	err := expired.waitEnded(t, 10*time.Second)
	var ce *domain.ErrCursorExpired
	if !errors.As(err, &ce) || ce.After != 2 || ce.OldestKept != 5 {
		t.Fatalf("subscribing after seq 2 with 1..5 pruned ended with %v, want *domain.ErrCursorExpired{2, 5}", err)
	}
	expired.waitClosed(t, 5*time.Second)
	if got := expired.events(); len(got) != 0 {
		t.Fatalf("an expired cursor got events: %+v", got)
	}

	kept := int64(5)
	s := subscribe(t, br, "kept", &kept, passAll, 16, true)
	s.waitSeq(t, 10, 10*time.Second)
	b.receiveMany(t, 2, "EX-L", "EX")
	s.waitSeq(t, 12, 10*time.Second)
	requireDense(t, "the subscription at the pruning point", seqs(s.events()), 6, 12)

	// Without a cursor: from now on only.
	live := subscribe(t, br, "live", nil, passAll, 16, true)
	time.Sleep(100 * time.Millisecond) // it has started and found nothing new
	b.receiveMany(t, 2, "EX-L", "EX")
	live.waitSeq(t, 14, 10*time.Second)
	requireDense(t, "the subscription without a cursor", seqs(live.events()), 13, 14)
}
