package resolvers

import (
	"context"
	"time"

	"inventory/domain"
	"inventory/fanout"
)

// waitlistChanges streams the checkout's waitlist entries, each time one's
// status differs from what was last sent: a new entry (WAITING), then its
// OFFERED, LEFT or EXPIRED. It registers for the checkout's signals before
// the first read, so a change committed between the two wakes it; that first
// read is the baseline (what is already so is not pushed) and is made
// before the subscription is answered. Then it re-reads on every signal: a
// notification for the checkout, the LISTEN connection made again, or the
// broker's one poll for all subscriptions finding a change no notification
// reported (events.Broker.pollWaitlists). A failed read is retried
// WaitlistFeedPoll later (the poll wakes a change once); the stream ends
// with ctx, or when the instance shuts down
// (ErrStreamStopped: over a WebSocket 1012, as for stock events).
func (r *Resolver) waitlistChanges(ctx context.Context, checkoutID string) (<-chan *domain.WaitlistEntry, error) {
	wake := r.WaitlistSignals.WatchWaitlist(ctx, checkoutID)
	entries, at, err := r.WaitlistFeed.WaitlistEntriesForCheckout(ctx, checkoutID, nil)
	if err != nil {
		return nil, err
	}
	// Fixed for the subscription's life: an entry that stops waiting is
	// read while its updated_at is after since (WaitlistChangeWindow).
	since := at.Add(-domain.WaitlistChangeWindow)
	sent := make(map[string]domain.WaitlistStatus, len(entries))
	for _, e := range entries {
		sent[e.ID] = e.Status
	}
	out := make(chan *domain.WaitlistEntry, r.Broker.SubscriberBuffer())
	go func() {
		defer close(out)
		var retry <-chan time.Time // set while a read failed: the poll wakes a change once
		for {
			select {
			case <-ctx.Done():
				return
			case <-retry:
			case _, ok := <-wake:
				if !ok { // the instance is shutting down
					subscriptionEnded(ctx)(&domain.ErrStreamStopped{})
					return
				}
			}
			retry = nil
			entries, _, err := r.WaitlistFeed.WaitlistEntriesForCheckout(ctx, checkoutID, &since)
			if err != nil {
				retry = time.After(domain.WaitlistFeedPoll)
				continue
			}
			for _, e := range entries {
				if sent[e.ID] == e.Status {
					continue
				}
				// The feed has no positions: the changed entry is read
				// whole, as it is now (it may have changed again since).
				full, err := r.Waitlists.WaitlistEntryGet(ctx, domain.Scope{CheckoutID: checkoutID}, e.ID)
				if err != nil || full == nil {
					retry = time.After(domain.WaitlistFeedPoll)
					continue // tried again at the next signal or retry
				}
				sent[e.ID] = full.Status
				select {
				case out <- full:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return fanout.Tag(ctx, out, noTag[*domain.WaitlistEntry]), nil
}
