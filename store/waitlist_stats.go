package store

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// WaitlistHooks are told about offers as the store makes them (metrics).
// Either may be nil. They run once the offering transaction commits (see
// reportAfterCommit), so a transaction that rolls back and runs again (a
// deadlock retried by inTx) reports its offers once.
type WaitlistHooks struct {
	// Offered is told how long an offered entry waited, from join to offer.
	Offered func(waited time.Duration)
	// OffersExpired is told how many offers' holds expired unused.
	OffersExpired func(n int)
}

// SetWaitlistHooks installs h (before the store serves requests).
func (s *Store) SetWaitlistHooks(h WaitlistHooks) { s.hooks.Store(&h) }

// commitReports are the reports a transaction made, to be told once it
// commits, and what its offers need to know of the attempt inTx is making.
// Only its own goroutine touches them.
type commitReports struct {
	fns []func()
	// checkouts were locked at the start of the attempt (inTx), for offers.
	checkouts []string
	// final is the last attempt: an offer cannot ask for another.
	final bool
}

// reportAfterCommit runs report once tx commits, if inTx runs tx; a
// transaction inTx rolls back (and runs again, after a deadlock) drops it,
// so an offer is counted once, when it is real. In any other transaction
// it runs now.
func (s *Store) reportAfterCommit(tx pgx.Tx, report func()) {
	if v, ok := s.afterCommit.Load(tx); ok {
		r := v.(*commitReports)
		r.fns = append(r.fns, report)
		return
	}
	report()
}

// reportCommitted tells (committed) or drops the reports of inTx's tx.
func (s *Store) reportCommitted(tx pgx.Tx, committed bool) {
	if tx == nil {
		return
	}
	v, ok := s.afterCommit.LoadAndDelete(tx)
	if !ok || !committed {
		return
	}
	for _, f := range v.(*commitReports).fns {
		f()
	}
}

// reportOffers tells the hooks, once tx commits, how long each offered
// entry waited.
func (s *Store) reportOffers(tx pgx.Tx, waited []float64) {
	h := s.hooks.Load()
	if h == nil || h.Offered == nil || len(waited) == 0 {
		return
	}
	s.reportAfterCommit(tx, func() {
		for _, w := range waited {
			h.Offered(time.Duration(w * float64(time.Second)))
		}
	})
}

// offerEntryOf is, in SQL, the id of the waitlist entry whose offer the
// reservation r is, from its request key waitlist:<entry id>; NULL for any
// other key. Reserve refuses that prefix from clients, but a key from before
// it was reserved may be anything, so only a uuid is cast: callers also
// check that the entry names r.
var offerEntryOf = `CASE WHEN r.request_key ~ '^` + domain.WaitlistOfferKeyPrefix +
	`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN substr(r.request_key, ` +
	strconv.Itoa(len(domain.WaitlistOfferKeyPrefix)+1) + `)::uuid END`

// queueExpiredOffers counts, in the batch that settles expired holds, how
// many of them were waitlist offers (primary-key probes of rows the
// transaction already locked), and reports them once tx commits.
func (s *Store) queueExpiredOffers(tx pgx.Tx, b *pgx.Batch, ids []string, status domain.ReservationStatus) {
	h := s.hooks.Load()
	if status != domain.StatusExpired || h == nil || h.OffersExpired == nil {
		return
	}
	b.Queue(`SELECT count(*)::int FROM reservations r JOIN waitlist_entries w ON w.id = `+offerEntryOf+` AND w.reservation_id = r.id
		WHERE r.id = ANY($1::uuid[])`, ids).
		QueryRow(func(r pgx.Row) error {
			var n int
			if err := r.Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				s.reportAfterCommit(tx, func() { h.OffersExpired(n) })
			}
			return nil
		})
}

// WaitlistTotals is the waitlists at a glance: entries waiting, and the
// length of the longest line (the SKU with the most waiting).
type WaitlistTotals struct {
	Waiting, LongestLine int
}

const waitlistTotalsStatement = `
SELECT coalesce(sum(n), 0)::int, coalesce(max(n), 0)::int
FROM (SELECT count(*) AS n FROM waitlist_entries WHERE status = 'waiting' GROUP BY sku_id) l`

// WaitlistTotals reads them in one statement, an index-only pass over the
// waiting entries (waitlist_entries_line_idx holds only those): its cost is
// the number waiting, not the history.
func (s *Store) WaitlistTotals(ctx context.Context) (WaitlistTotals, error) {
	var t WaitlistTotals
	err := s.pool.QueryRow(ctx, waitlistTotalsStatement).Scan(&t.Waiting, &t.LongestLine)
	return t, wrap("WaitlistTotals", err)
}

var _ domain.WaitlistOverview = (*Store)(nil)

// waitlistLinesStatement caps a line's units at GraphQL Int's largest,
// 2,147,483,647: 2,148 entries waiting for MaxQuantity each pass it, and
// the cast failed the whole statement.
const waitlistLinesStatement = `
WITH line AS (
	SELECT sku_id, count(*)::int AS waiting, least(sum(quantity), 2147483647)::int AS units
	FROM waitlist_entries WHERE status = 'waiting' GROUP BY sku_id
), top AS (
	SELECT l.*, s.code FROM line l JOIN skus s ON s.id = l.sku_id
	WHERE $2::int IS NULL OR l.waiting < $2 OR (l.waiting = $2 AND s.code > $3::text)
	ORDER BY l.waiting DESC, s.code LIMIT $1
)
SELECT t.code, t.waiting, t.units, f.joined_at, floor(extract(epoch FROM now() - f.joined_at))::int
FROM top t
CROSS JOIN LATERAL (
	SELECT w.joined_at FROM waitlist_entries w
	WHERE w.sku_id = t.sku_id AND w.status = 'waiting' ORDER BY w.seq LIMIT 1
) f
ORDER BY t.waiting DESC, t.code`

// WaitlistLines reads the first longest lines in one statement: the waiting
// entries counted per SKU (an index-only pass over waitlist_entries_line_idx,
// which holds only waiting entries), then, for each of the first, the front
// of its line (one descent of the same index: seq is join order).
func (s *Store) WaitlistLines(ctx context.Context, first int) ([]domain.WaitlistLine, error) {
	if first < 1 || first > domain.MaxWaitlistLines {
		return nil, domain.Limitf("first must be between 1 and %d", domain.MaxWaitlistLines)
	}
	return s.waitlistLines(ctx, first, nil)
}

// waitlistLines reads up to limit lines after the keyset position (nil:
// from the longest) in one statement.
func (s *Store) waitlistLines(ctx context.Context, limit int, after *domain.WaitlistLineKey) ([]domain.WaitlistLine, error) {
	var waiting *int
	var sku *string
	if after != nil {
		waiting, sku = &after.Waiting, &after.SKU
	}
	rows, err := s.pool.Query(ctx, waitlistLinesStatement, limit, waiting, sku)
	if err != nil {
		return nil, wrap("WaitlistLines", err)
	}
	lines, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.WaitlistLine, error) {
		var l domain.WaitlistLine
		err := r.Scan(&l.SKU, &l.Waiting, &l.Units, &l.OldestJoinedAt, &l.OldestWaitSeconds)
		return l, err
	})
	return lines, wrap("WaitlistLines", err)
}
