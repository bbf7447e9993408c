package events

import (
	"context"
	"maps"
	"slices"
	"time"

	"inventory/domain"
)

// WaitlistChanges finds, in one read, which watched checkouts' entries may
// have changed. store.Store is one.
type WaitlistChanges interface {
	WaitlistCheckoutsChanged(ctx context.Context, checkoutIDs []string, changedSince, deadlineSince time.Time) ([]domain.WaitlistCheckoutChange, time.Time, error)
}

// pollWaitlists is the fallback behind notifications for every
// waitlistChanged subscription on this instance: every cfg.WaitlistPoll,
// one read of the watched checkouts wakes those whose entries changed since
// it last looked (or whose waiting entry's deadline passed), and only
// those: one read a poll however many subscriptions, not one for each
// subscription re-reading its own entries. An entry's updated_at is its
// transaction's start, so each read looks back WaitlistChangeWindow for
// changes committed late, and remembers each checkout's newest change so a
// change wakes its checkout once, not at every poll of the window. The
// poll is the fallback: a change is first of all notified (NOTIFY at its
// commit), and a reconnected LISTEN wakes every watcher.
func (b *Broker) pollWaitlists(ctx context.Context) {
	feed, ok := b.store.(WaitlistChanges)
	if !ok {
		return
	}
	var last time.Time             // the previous read's database time
	seen := map[string]time.Time{} // newest change woken for, per watched checkout
	tick := time.NewTicker(b.cfg.WaitlistPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		watched := b.waitlist.watched()
		if len(watched) == 0 {
			clear(seen)
			continue
		}
		ids := slices.Collect(maps.Keys(watched))
		from := last
		if from.IsZero() {
			from = time.Now().Add(-b.cfg.WaitlistPoll)
		}
		changes, at, err := feed.WaitlistCheckoutsChanged(ctx, ids, from.Add(-domain.WaitlistChangeWindow), from)
		if err != nil {
			continue // the next poll looks back from the same time
		}
		last = at
		for _, c := range changes {
			// A checkout first looked at is woken for changes after its
			// first watcher came: its subscriptions read what was before.
			woken, ok := seen[c.CheckoutID]
			if !ok {
				woken = watched[c.CheckoutID]
			}
			if c.DeadlinesPassed || c.LastChanged.After(woken) {
				b.waitlist.wake(c.CheckoutID, false)
			}
			seen[c.CheckoutID] = c.LastChanged
		}
		for id := range seen { // forget checkouts no longer watched
			if _, ok := watched[id]; !ok {
				delete(seen, id)
			}
		}
	}
}
