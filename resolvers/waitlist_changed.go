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
// before the subscription is answered. Then it re-reads on every signal and
// every WaitlistFeedPoll. A failed read is retried at the next signal or
// poll; the stream ends with ctx, or when the instance shuts down
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
		poll := time.NewTicker(domain.WaitlistFeedPoll)
		defer poll.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-wake:
				if !ok { // the instance is shutting down
					subscriptionEnded(ctx)(&domain.ErrStreamStopped{})
					return
				}
			case <-poll.C:
			}
			entries, _, err := r.WaitlistFeed.WaitlistEntriesForCheckout(ctx, checkoutID, &since)
			if err != nil {
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
					continue // tried again at the next signal or poll
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
