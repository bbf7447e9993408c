package resolvers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/domain"
	"inventory/events"
	"inventory/pgtest"
	"inventory/testkit"
)

// countingFeed counts a real store's reads of one checkout's entries.
type countingFeed struct {
	domain.WaitlistFeed
	reads atomic.Int64
}

func (c *countingFeed) WaitlistEntriesForCheckout(ctx context.Context, checkoutID string, since *time.Time) ([]domain.WaitlistEntry, time.Time, error) {
	c.reads.Add(1)
	return c.WaitlistFeed.WaitlistEntriesForCheckout(ctx, checkoutID, since)
}

// TestWaitlistChangesPollOnceForAll: the fallback re-read that catches a
// change whose notification was lost is one read per poll for all of an
// instance's waitlistChanged subscriptions, not one per subscription: 50
// idle subscriptions of 50 checkouts each re-read their entries every
// poll (50 reads a poll, 10 a second at the 5 s default, while nothing
// changes). Now idle subscriptions read nothing; a change made without a
// notification (written straight to the table) still reaches its
// subscription within two polls, and only its own.
func TestWaitlistChangesPollOnceForAll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleAdmin, Name: "test-admin"}))
	defer cancel()
	pool := pgtest.NewPool(t)
	st := testkit.NewStore(t, pool)
	if _, err := st.LocationCreate(ctx, domain.CreateLocationInput{Code: "AMS", Name: "Amsterdam"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SKUCreate(ctx, domain.CreateSKUInput{Code: "DROP", Name: "Drop", Kind: domain.KindQuantity}); err != nil {
		t.Fatal(err)
	}
	const poll = 200 * time.Millisecond
	broker := events.NewBroker(st, pool, events.Config{Tick: 10 * time.Millisecond, WaitlistPoll: poll}, slog.New(slog.DiscardHandler))
	var running sync.WaitGroup
	running.Go(func() { _ = broker.Run(ctx) })
	defer running.Wait()
	defer cancel()

	feed := &countingFeed{WaitlistFeed: st}
	r := &Resolver{Waitlists: st, WaitlistFeed: feed, WaitlistSignals: broker, Broker: broker}
	const subscribers = 50
	var entries []domain.WaitlistEntry
	var streams []<-chan *domain.WaitlistEntry
	for i := range subscribers {
		e, _, err := st.WaitlistJoin(ctx, domain.JoinWaitlistInput{CheckoutID: fmt.Sprint("cart-", i), RequestKey: "k", SKU: "DROP", Quantity: 1, TTLSeconds: 600})
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
		ch, err := r.waitlistChanges(ctx, e.CheckoutID)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, ch)
	}
	// The joins' own notifications may arrive after their subscriptions
	// began (each wakes one re-read): let them pass first.
	time.Sleep(500 * time.Millisecond)
	before := feed.reads.Load()
	// Longer than WaitlistFeedPoll, each subscription's own poll before.
	idleFor := domain.WaitlistFeedPoll + 2*poll
	time.Sleep(idleFor)
	idle := feed.reads.Load() - before
	t.Logf("%d idle subscriptions over %s (%d polls): %d reads of their entries", subscribers, idleFor, idleFor/poll, idle)
	if idle > 0 {
		t.Fatalf("%d idle subscriptions read their entries %d times in %s, want 0", subscribers, idle, idleFor)
	}

	if _, err := pool.Exec(ctx, `UPDATE waitlist_entries SET status = 'left', ended_at = now(), updated_at = now() WHERE id = $1`, entries[7].ID); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-streams[7]:
		if got.ID != entries[7].ID || got.Status != domain.WaitlistLeft {
			t.Fatalf("pushed %+v, want entry 7 LEFT", got)
		}
	case <-time.After(10 * poll):
		t.Fatal("a change without a notification was not pushed within 10 polls")
	}
	if n := feed.reads.Load() - before; n > 4 {
		t.Fatalf("one changed checkout cost %d reads of entries, want only its own (at most 4)", n)
	}
}
