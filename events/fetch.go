package events

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"

	"inventory/domain"
)

// listen waits for the relay's notifications on a connection of its own.
func (b *Broker) listen(ctx context.Context) {
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			b.connects.Add(1)
			if b.cfg.Listen != nil {
				return pgx.ConnectConfig(ctx, b.cfg.Listen.Copy())
			}
			return pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
		},
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				b.logger.WarnContext(ctx, "events: listen", "err", err)
			}
		},
		ReconnectDelay: time.Second,
	}
	l.Handle(domain.StockEventsChannel, pgxlisten.HandlerFunc(func(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
		if seq, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			b.notified.Store(seq)
			b.notifiedAt.Store(time.Now().UnixNano())
		}
		select {
		case b.fetch <- struct{}{}:
		default: // a fetch is already due
		}
		return nil
	}))
	l.Handle(domain.WaitlistChannel, &b.waitlist)
	_ = l.Listen(ctx) // returns ctx.Err() when ctx ends
}

// fetchLoop reads newly published events into memory and wakes subscribers,
// on each notification and every Poll.
func (b *Broker) fetchLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.fetch:
		case <-t.C:
		}
		fetchCtx, cancel := context.WithTimeout(ctx, stepTimeout)
		err := b.fetchNew(fetchCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			b.logger.ErrorContext(ctx, "events: fetch", "err", err)
			b.setProblem(problemNoFetch) // cleared by the next fetch that works (every Poll at most)
			continue
		}
		b.setProblem(b.checkStall(ctx, time.Now()))
	}
}

// checkStall returns the Problem of a stream that has stopped moving while
// events wait: committed events have waited longer than MaxStall for the
// relay, by the head the last fetch read (its CaughtUp is how far back
// every committed change was published, so it grows old only while events
// wait). A relay instance that froze inside its transaction is cut off
// within 2 × RelayTimeout and another takes over, so past MaxStall the
// relay is stuck everywhere (a lock held by something the bound does not
// cover, the relay failing on every instance): every instance reports it,
// and the stall is logged once when it begins and once when it ends.
func (b *Broker) checkStall(ctx context.Context, now time.Time) string {
	head, ok := b.StockHead()
	if !ok || head.CaughtUp.IsZero() || b.cfg.MaxStall < 0 {
		return ""
	}
	waited := now.Sub(head.CaughtUp)
	stalled := waited > b.cfg.MaxStall
	switch {
	case stalled && !b.stalled:
		b.logger.ErrorContext(ctx, "events: the stream is stalled: committed events wait for the relay; readiness fails until it moves",
			"waited", waited.Round(time.Millisecond), "max_stall", b.cfg.MaxStall, "head_seq", head.Seq)
	case !stalled && b.stalled:
		b.logger.InfoContext(ctx, "events: the stream moves again", "head_seq", head.Seq)
	}
	b.stalled = stalled
	if !stalled {
		return ""
	}
	return fmt.Sprintf(problemStalledAt, waited.Round(time.Second), b.cfg.MaxStall)
}

func (b *Broker) fetchNew(ctx context.Context) error {
	for {
		b.mu.RLock()
		after := b.last
		b.mu.RUnlock()
		events, head, err := b.store.StockEventsFetch(ctx, after, domain.MaxStockEventsPage)
		if err != nil {
			return err
		}
		// Stored before the events are: whoever applies them and then asks
		// for the head gets one at least as new.
		b.head.Store(&head)
		if len(events) == 0 {
			return nil
		}
		b.mu.Lock()
		b.recent = append(b.recent, events...)
		// Trimmed into a new array only past twice the bound, to the
		// bound: copying the whole window at every fetch once it is full
		// cost a tenth of the server's CPU at 2,600 holds/s (10,000 events
		// copied per fetch); this way each event is copied about once.
		if extra := len(b.recent) - b.cfg.Recent; extra > b.cfg.Recent {
			b.recent = append(b.recent[:0:0], b.recent[extra:]...)
		}
		b.last = events[len(events)-1].Seq
		close(b.wake)
		b.wake = make(chan struct{})
		b.mu.Unlock()
		if len(events) < domain.MaxStockEventsPage {
			return nil
		}
	}
}

// since returns up to max in-memory events after cursor, whether memory
// reaches back that far, and the channel closed at the next arrival.
func (b *Broker) since(cursor int64, max int) ([]domain.StockEvent, bool, <-chan struct{}) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if cursor >= b.last {
		return nil, true, b.wake
	}
	// Memory is the newest cfg.Recent events, however many more the array
	// still holds until fetchNew trims it.
	recent := b.recent
	if over := len(recent) - b.cfg.Recent; over > 0 {
		recent = recent[over:]
	}
	if len(recent) == 0 || recent[0].Seq > cursor+1 {
		return nil, false, b.wake
	}
	i := int(cursor + 1 - recent[0].Seq)
	end := min(i+max, len(recent))
	// Shared, not copied (every subscriber reads every batch): an element
	// of recent is never written once appended; fetchNew appends past the
	// length (which no reader's slice reaches: capped here) and trims into
	// a new array.
	return recent[i:end:end], true, b.wake
}
