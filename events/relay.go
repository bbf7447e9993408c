package events

import (
	"context"
	"time"
)

// stepTimeout bounds one publish or fetch, waiting for a connection of the
// events pool included, so a stuck step fails (and is retried, and reported
// by readiness) instead of stopping live events silently.
const stepTimeout = 10 * time.Second

func (b *Broker) publishOnce(ctx context.Context, limit int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	b.attemptsN.Add(1)
	n, head, err := b.store.StockEventsRelay(ctx, limit, b.cfg.RelayTimeout)
	if n > 0 {
		b.ownLast.Store(head.Seq)
	}
	if !head.CaughtUp.IsZero() {
		// A relay transaction that took every waiting event knows the head
		// as well as a fetch: at idle, when nothing is fetched, it keeps
		// the availability copy's staleness known without a probe.
		b.head.Store(&head)
	}
	return n, err
}

// standByTicks is how many ticks after another instance's newest
// notification this one stands by: a few, so that a notification delayed on
// a busy machine or a tick of the relaying instance that found nothing new
// does not bring every instance back at once.
const standByTicks = 4

// standingBy says whether another instance is relaying: the newest
// notification came within standByTicks ticks and carried a seq this
// instance did not assign. Then this tick is skipped. Every instance trying
// every tick would cost each of them a transaction per tick, most of them
// publishing nothing; with this one instance relays while it keeps
// publishing, and the others take over within standByTicks ticks of its
// last notification when it stops (killed or cut off; or simply idle: with
// nothing to publish nobody notifies, see below). Who relays never matters
// for correctness: the store's advisory lock orders relay transactions
// whoever runs them.
//
// At idle the instance that published last keeps trying every tick, and
// the others every idleTicks ticks: an idle instance trying every tick
// would cost the primary a transaction per tick (40 a second at the
// default Tick), N of them N times that. The price is when that instance
// is gone and the first change after a quiet spell waits up to idleTicks
// ticks (200 ms by default) for another to publish it.
func (b *Broker) standingBy(now time.Time, tick int64) bool {
	if b.notified.Load() <= b.ownLast.Load() {
		return false // this instance published the newest: it relays
	}
	if now.UnixNano()-b.notifiedAt.Load() < int64(standByTicks*b.cfg.Tick) {
		return true // another instance is relaying
	}
	return tick%idleTicks != 0
}

// idleTicks is how often, in ticks, an instance that did not publish last
// tries while nobody publishes.
const idleTicks = 8

// relay publishes committed events every tick, unless another instance's
// relay is publishing them (standingBy). The store's advisory lock lets one
// at a time do it.
func (b *Broker) relay(ctx context.Context) {
	t := time.NewTicker(b.cfg.Tick)
	defer t.Stop()
	failing := false
	for tick := int64(0); ; tick++ {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if b.standingBy(now, tick) {
				continue
			}
		}
		const batch = 5000
		for {
			n, err := b.publishOnce(ctx, batch)
			b.publishedN.Add(int64(n))
			if ctx.Err() != nil {
				return
			}
			// Said once when publishing starts failing (not every tick),
			// and once when it works again.
			switch {
			case err != nil && !failing:
				b.logger.ErrorContext(ctx, "events: publish failing; retrying every tick", "err", err)
			case err == nil && failing:
				b.logger.InfoContext(ctx, "events: publishing again")
			}
			failing = err != nil
			if n < batch {
				break
			}
		}
	}
}
