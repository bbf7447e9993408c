package domain

import (
	"context"
	"time"
)

// WaitlistChannel is the PostgreSQL NOTIFY channel of waitlist entries:
// every transaction that changes an entry's status (join, offer, leave,
// expiry) notifies it with the entry's checkout id as payload, delivered at
// commit. waitlistChanged subscribers re-read that checkout's entries.
const WaitlistChannel = "inventory_waitlist"

// WaitlistChangeWindow is how far before a waitlistChanged subscription
// started its reads reach back for entries that are no longer waiting: an
// entry's updated_at is its changing transaction's start, which may precede
// the read that misses it (not yet committed) by the transaction's length,
// bounded far below this by the statement timeout.
const WaitlistChangeWindow = 10 * time.Minute

// MaxWaitlistFeed bounds one read of a checkout's entries for
// waitlistChanged (the oldest are kept: they changed first). A checkout
// token waits in at most FairUse.MaxLiveHolds lines at once.
const MaxWaitlistFeed = 1000

// WaitlistFeed reads what waitlistChanged pushes. Implemented by store.Store.
type WaitlistFeed interface {
	// WaitlistEntriesForCheckout returns the checkout's entries that are
	// waiting or changed at or after since (database time; nil:
	// WaitlistChangeWindow before the read), in join order, without
	// positions (Position nil: WaitlistEntryGet reads one's),
	// at most MaxWaitlistFeed, and the database's time of the read.
	WaitlistEntriesForCheckout(ctx context.Context, checkoutID string, since *time.Time) (entries []WaitlistEntry, at time.Time, err error)
}

// WaitlistSignals wakes waitlistChanged subscriptions on this instance.
// Implemented by events.Broker.
type WaitlistSignals interface {
	// WatchWaitlist returns a channel that receives (coalesced) whenever
	// the checkout's entries may have changed: a notification for it, or
	// the LISTEN connection made again (notifications may have been lost
	// while it was down). It stops when ctx ends.
	WatchWaitlist(ctx context.Context, checkoutID string) <-chan struct{}
}

// WaitlistFeedPoll is how often an instance looks, in one read for all its
// waitlistChanged subscriptions, for changes no notification reported
// (events.Broker.pollWaitlists), and how soon a subscription whose re-read
// failed tries again: the fallback that makes a lost notification delay a
// push rather than lose it (and that pushes an entry reading EXPIRED at its
// deadline before its expiry job has run).
const WaitlistFeedPoll = 5 * time.Second

// WaitlistCheckoutChange is, for one checkout, when its entries last
// changed and whether a waiting entry's deadline passed since the last
// look: what wakes its waitlistChanged subscriptions when no notification
// did.
type WaitlistCheckoutChange struct {
	CheckoutID      string
	LastChanged     time.Time
	DeadlinesPassed bool
}
