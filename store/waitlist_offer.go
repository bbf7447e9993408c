package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// freed names the balances a transaction made units available on: explicit
// (sku, location) pairs, and the balances of the lines of reservations it
// ended (released or expired), which the statements look up themselves.
type freed struct {
	skuIDs, locationIDs []int64
	reservationIDs      []string
}

// freedAt is freed for explicit balances.
func freedAt(keys ...balanceKey) freed {
	var f freed
	for _, k := range keys {
		f.skuIDs = append(f.skuIDs, k.skuID)
		f.locationIDs = append(f.locationIDs, k.locationID)
	}
	return f
}

// Lock order for offers. Every writer locks balance rows in (sku, location)
// order, and a checkout's lock (checkoutLockSpace) before any balance row.
// An offer needs more than the freed balance:
//
//   - an entry without a location is offered units as a reserve would
//     source them, from every balance of its SKU, so the freeing path must
//     hold them all. Each path locks, with the balance it frees and in the
//     same statement, every balance of a SKU that has such an entry waiting
//     (lockLineStatement, lockFreedStatement, the stock sync's lock). A join
//     without a location locks all the SKU's balances too (lockWaitFree),
//     so no such entry can appear while the freeing path holds one of them
//     — except one committed just before the path's lock was granted but
//     after its statement's snapshot: scopeStatement then locks what is
//     missing with NOWAIT, and if another transaction has a row, the
//     freeing transaction runs again (errOfferBusy), when its lock
//     statement sees the entry (a code import, which cannot run again,
//     fails instead: it locks the balances just before it adds the codes,
//     so the window is that of one statement);
//   - an entry joined with a checkout token is offered only within its
//     checkout's caps, which are exact only under the checkout's lock (its
//     reserves and joins count under it). Taken after the balances, a
//     blocking lock could wait for a reserve of that checkout that waits
//     for one of those balances: a cycle. So the offer only tries the lock
//     (pg_try_advisory_xact_lock); a lock that is taken makes the whole
//     transaction run again (errOfferBusy), taking that checkout's lock
//     first this time, in the global order (inTx). A transaction that
//     cannot run again (a code import, the last attempt) passes such an
//     entry over without a reason instead: never past a cap.

// lockLineStatement locks balance ($1 SKU, $2 location) and, if its SKU
// has an entry without a location waiting, every balance of the SKU, in
// location order: what a path that frees units on one balance runs before
// it first locks the balance.
const lockLineStatement = `
SELECT FROM balances b
WHERE b.sku_id = $1
  AND (b.location_id = $2 OR EXISTS (SELECT FROM waitlist_entries w WHERE w.sku_id = $1 AND w.status = 'waiting' AND w.location_id IS NULL))
ORDER BY b.location_id
FOR NO KEY UPDATE`

// lockLine runs lockLineStatement for k.
func lockLine(ctx context.Context, tx pgx.Tx, k balanceKey) error {
	_, err := tx.Exec(ctx, lockLineStatement, k.skuID, k.locationID)
	return err
}

// lockFreedStatement is lockLineStatement for the balances of the lines of
// reservations $1 (the holds a release or an expiry ends).
const lockFreedStatement = `
SELECT FROM balances b
WHERE b.sku_id IN (SELECT sku_id FROM reservation_lines WHERE reservation_id = ANY($1::uuid[]))
  AND ((b.sku_id, b.location_id) IN (SELECT sku_id, location_id FROM reservation_lines WHERE reservation_id = ANY($1::uuid[]))
       OR EXISTS (SELECT FROM waitlist_entries w WHERE w.sku_id = b.sku_id AND w.status = 'waiting' AND w.location_id IS NULL))
ORDER BY b.sku_id, b.location_id
FOR NO KEY UPDATE`

// errOfferBusy makes inTx run a freeing transaction again: an offer needed
// a lock another transaction has (see the lock order above). The next
// attempt locks checkouts first.
type errOfferBusy struct{ checkouts []string }

func (e *errOfferBusy) Error() string { return "an offer needs a lock another transaction holds" }

// pgLockNotAvailable is a NOWAIT lock that another transaction holds.
const pgLockNotAvailable = "55P03"

// offerScope is what a freeing transaction offers from: the balances that
// take part (the freed ones, and all the balances of a SKU with an entry
// without a location waiting), all locked by it, and whether anyone
// waiting may fit what is free there.
type offerScope struct {
	skuIDs, locationIDs []int64
	fits                bool
}

// scopeStatement finds the offer's scope for the balances $1/$2 and the
// reservations $3 freed, locking (NOWAIT) the balances it adds that the
// freeing path does not hold yet (normally none: it locked them in order).
//
// fits is a probe, not the answer: the line's smallest quantity against
// what is free on a balance, or across a SKU's balances for an entry
// without a location, one descent of waitlist_entries_fit_idx or
// waitlist_entries_unlocated_idx each. As EXISTS (… quantity <= free), a
// plan made before the table is first analyzed can read the whole line of
// the SKU, under the balance lock of every release and expiry, so a long
// line would slow every hold's end on its SKU. With nobody waiting, as is
// usual, the statement is a few index probes, sent in the round trip of
// the freeing path's own last statement. The sum across a SKU's balances
// is taken only for a SKU with an entry without a location (least IS NOT
// NULL, the cheaper test, runs first): taken for every freed SKU, it
// scanned the scope once per SKU, 28 of 37 ms for a set of 1,000 expiries.
//
// What is free on an added balance is read from the row as the lock
// returned it (the newest version), not from the statement's snapshot.
const scopeStatement = `
WITH t AS (
	SELECT DISTINCT sku_id, location_id FROM (
		SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS t(sku_id, location_id)
		UNION ALL
		SELECT sku_id, location_id FROM reservation_lines WHERE reservation_id = ANY($3::uuid[])
	) t
), unlocated AS (
	SELECT s.sku_id, (SELECT min(w.quantity) FROM waitlist_entries w
	                  WHERE w.sku_id = s.sku_id AND w.status = 'waiting' AND w.location_id IS NULL) AS least
	FROM (SELECT DISTINCT sku_id FROM t) s
), added AS (
	SELECT b.sku_id, b.location_id, b.on_hand - b.reserved - b.committed AS free
	FROM balances b JOIN unlocated u ON u.sku_id = b.sku_id AND u.least IS NOT NULL
	WHERE NOT EXISTS (SELECT FROM t WHERE t.sku_id = b.sku_id AND t.location_id = b.location_id)
	ORDER BY b.sku_id, b.location_id
	FOR NO KEY UPDATE OF b NOWAIT
), part AS (
	SELECT b.sku_id, b.location_id, b.on_hand - b.reserved - b.committed AS free
	FROM balances b JOIN t ON t.sku_id = b.sku_id AND t.location_id = b.location_id
	UNION ALL
	SELECT * FROM added
)
SELECT coalesce(array_agg(p.sku_id), '{}'), coalesce(array_agg(p.location_id), '{}'),
       coalesce(bool_or(p.free > 0 AND (SELECT min(w.quantity) FROM waitlist_entries w WHERE w.sku_id = p.sku_id AND w.status = 'waiting') <= p.free), false)
       OR EXISTS (SELECT FROM unlocated u WHERE u.least IS NOT NULL
                  AND u.least <= (SELECT sum(greatest(q.free, 0)) FROM part q WHERE q.sku_id = u.sku_id))
FROM part p`

// queueScope queues scopeStatement for f on b; the scope is set when b's
// results are read. A row it could not lock is errOfferBusy.
func queueScope(b *pgx.Batch, f freed) *offerScope {
	sc := &offerScope{}
	b.Queue(scopeStatement, f.skuIDs, f.locationIDs, f.reservationIDs).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&sc.skuIDs, &sc.locationIDs, &sc.fits)
		if pgCode(err) == pgLockNotAvailable {
			return &errOfferBusy{}
		}
		return err
	})
	return sc
}

// offerStatement offers what is free on the scope's balances ($1, $2) to
// the waiting entries of their SKUs, first-fit in join order, in one
// statement:
//
//   - pick walks each SKU's line (waitlist_entries_line_idx) from the front
//     with a recursive CTE, carrying what is free on each balance, in
//     sourcing order (location priority, then code): each step finds the
//     next waiting entry whose quantity fits — at its location, or for an
//     entry without one, across the balances — so an entry needing more is
//     skipped and keeps its place. Before each step, one probe of
//     waitlist_entries_fit_idx asks whether any waiting entry of the SKU
//     needs no more than is free in all (what is free only shrinks along
//     the walk), so nothing waiting, or nothing that fits, costs a probe
//     rather than a walk through the line;
//   - an entry that fits is offered what it needs at its location, or,
//     without one, units taken by priority across the balances, as
//     claimSourced takes a sourced reserve line's — unless it was joined
//     with a checkout token and its checkout's live holds (counted as a
//     reserve counts them, inventory_checkout_holds) are at the cap its
//     join recorded, or the offer would take the units of the SKU in them
//     past theirs: then it is passed over ("holds", "units"), keeps its
//     place, and the walk goes on with the units it would have had;
//   - such an offer needs the checkout's lock ($4 lists the ones this
//     transaction holds); one not held is "need": if any pick needs one,
//     the statement changes nothing and answers which, for the caller to
//     take (offerNow). A checkout in $5 could not be locked, and its entry
//     is passed over without a reason ("busy");
//   - a checkout offered several entries of several SKUs at once counts
//     them together (chosen): those past its cap of holds are left waiting,
//     for the caller's next run to pass over;
//   - locked locks the chosen entries in id order, the one order every
//     offer takes them in; upd marks them OFFERED, only while still waiting
//     (a concurrent leave may have ended one: the caller then runs the
//     statement again, see offerNow), with the id of their new reservation;
//     skipped records why the passed-over ones were;
//   - told notifies each offered entry's checkout (notifyWaitlist; the
//     first row adds 0 times its count, so that it runs);
//   - one HELD reservation per offered entry (request key waitlist:<entry
//     id>, the entry's offer TTL), a line per balance it takes from, the
//     balances' reserved counts, a ledger row and a stock event per line,
//     written like a reserve's: the k-th offer line of a balance's event
//     carries the balance as it left it.
//
// The balances must already be locked by the caller's transaction
// (offerScope's), so no other writer changes what is free while the lines
// are walked. Entries expired by their TTL but not yet marked are passed
// over.
//
// It answers one row with the number of entries picked for an offer and
// the checkouts that need a lock, then one row per offer line
// (reservation, line, deadline, SKU, location, quantity, kind, and the
// entry's wait on the first line of each offer).
const offerStatement = `
WITH RECURSIVE part AS (
	SELECT b.sku_id, b.location_id, greatest(b.on_hand - b.reserved - b.committed, 0) AS free, l.priority, l.code
	FROM (SELECT DISTINCT * FROM unnest($1::bigint[], $2::bigint[]) AS p(sku_id, location_id)) p
	JOIN balances b ON b.sku_id = p.sku_id AND b.location_id = p.location_id
	JOIN locations l ON l.id = p.location_id
), start AS (
	SELECT sku_id, array_agg(location_id ORDER BY priority, code) AS locs, array_agg(free ORDER BY priority, code) AS free, sum(free)::int AS total
	FROM part GROUP BY sku_id
), pick AS (
	SELECT s.sku_id, s.locs, s.free, s.total, 0::bigint AS seq, NULL::uuid AS id, NULL::text AS act, NULL::int[] AS take, NULL::int AS holds
	FROM start s
	UNION ALL
	SELECT p.sku_id, p.locs,
	       CASE WHEN c.act IN ('offer', 'need') THEN k.rest ELSE p.free END,
	       CASE WHEN c.act IN ('offer', 'need') THEN p.total - e.quantity ELSE p.total END,
	       e.seq, e.id, c.act, k.take, c.holds
	FROM pick p
	CROSS JOIN LATERAL (
		SELECT w.seq, w.id, w.quantity, w.location_id, w.checkout_id, w.max_live_holds, w.max_units_per_sku
		FROM waitlist_entries w
		WHERE w.sku_id = p.sku_id AND w.status = 'waiting' AND w.seq > p.seq
		  AND w.quantity <= CASE WHEN w.location_id IS NULL THEN p.total ELSE p.free[array_position(p.locs, w.location_id)] END
		  AND w.expires_at > clock_timestamp()
		ORDER BY w.seq LIMIT 1) e
	CROSS JOIN LATERAL (
		SELECT CASE
		         WHEN e.max_live_holds IS NULL THEN 'offer'
		         WHEN h.holds >= e.max_live_holds THEN 'holds'
		         WHEN h.units + e.quantity > e.max_units_per_sku THEN 'units'
		         WHEN e.checkout_id = ANY($5::text[]) THEN 'busy'
		         WHEN e.checkout_id = ANY($4::text[]) THEN 'offer'
		         ELSE 'need' END AS act, h.holds
		FROM (SELECT count(DISTINCT u.reservation_id)::int AS holds,
		             coalesce(sum(u.quantity) FILTER (WHERE u.sku_id = p.sku_id), 0)::int AS units
		      FROM inventory_checkout_holds(ARRAY[e.checkout_id]) u
		      WHERE e.max_live_holds IS NOT NULL) h) c
	CROSS JOIN LATERAL (
		SELECT array_agg(z.t ORDER BY z.i) AS take, array_agg((z.f - z.t)::int ORDER BY z.i) AS rest
		FROM (SELECT a.i, a.f, CASE
		             WHEN c.act NOT IN ('offer', 'need') THEN 0
		             WHEN e.location_id IS NULL THEN
		                 least(a.f, greatest(e.quantity - coalesce(sum(a.f) OVER (ORDER BY a.i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0), 0))
		             WHEN a.loc = e.location_id THEN e.quantity
		             ELSE 0 END::int AS t
		      FROM unnest(p.locs, p.free) WITH ORDINALITY AS a(loc, f, i)) z) k
	WHERE p.total > 0
	  AND (SELECT min(w.quantity) FROM waitlist_entries w WHERE w.sku_id = p.sku_id AND w.status = 'waiting') <= p.total
), settled AS (
	SELECT NOT EXISTS (SELECT FROM pick WHERE act = 'need') AS ok
), offers AS (
	SELECT p.id, p.sku_id, p.locs, p.take, p.seq, p.holds, w.max_live_holds,
	       row_number() OVER (PARTITION BY w.checkout_id ORDER BY p.seq) AS nth
	FROM pick p JOIN waitlist_entries w ON w.id = p.id
	WHERE p.act = 'offer' AND (SELECT ok FROM settled)
), chosen AS (
	SELECT id, sku_id, locs, take, gen_random_uuid() AS res_id
	FROM offers WHERE max_live_holds IS NULL OR holds + nth - 1 < max_live_holds
), locked AS (
	SELECT w.id FROM waitlist_entries w
	WHERE w.id IN (SELECT id FROM chosen) AND w.status = 'waiting'
	ORDER BY w.id
	FOR NO KEY UPDATE
), upd AS (
	UPDATE waitlist_entries w
	SET status = 'offered', reservation_id = c.res_id, skipped_reason = NULL, ended_at = now(), updated_at = now()
	FROM chosen c WHERE w.id = c.id AND w.id IN (SELECT id FROM locked) AND w.status = 'waiting'
	RETURNING w.id, w.seq, w.checkout_id, w.offer_ttl_seconds, w.fingerprint, w.joined_at, c.sku_id, c.locs, c.take, c.res_id
), skipped AS (
	UPDATE waitlist_entries w
	SET skipped_reason = CASE p.act WHEN 'holds' THEN 'live_holds' ELSE 'units_per_sku' END
	FROM pick p
	WHERE w.id = p.id AND p.act IN ('holds', 'units') AND w.status = 'waiting' AND (SELECT ok FROM settled)
	  AND w.skipped_reason IS DISTINCT FROM CASE p.act WHEN 'holds' THEN 'live_holds' ELSE 'units_per_sku' END
), ol AS (
	SELECT u.id, u.res_id, u.sku_id, a.loc AS location_id, a.t AS quantity, u.seq, u.checkout_id,
	       row_number() OVER (PARTITION BY u.id ORDER BY a.i) AS nth,
	       extract(epoch FROM clock_timestamp() - u.joined_at)::float8 AS waited
	FROM upd u CROSS JOIN LATERAL unnest(u.locs, u.take) WITH ORDINALITY AS a(loc, t, i)
	WHERE a.t > 0
), res AS (
	INSERT INTO reservations (id, checkout_id, request_key, fingerprint, expires_at)
	SELECT res_id, checkout_id, 'waitlist:' || id, fingerprint, clock_timestamp() + make_interval(secs => offer_ttl_seconds)
	FROM upd
	RETURNING id, expires_at
), line AS (
	INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity)
	SELECT res_id, 0, sku_id, location_id, quantity FROM ol ORDER BY res_id, nth
	RETURNING id, reservation_id, location_id
), per_balance AS (
	SELECT sku_id, location_id, sum(quantity)::int AS q FROM ol GROUP BY sku_id, location_id
), b AS (
	UPDATE balances b SET reserved = b.reserved + t.q, updated_at = now()
	FROM per_balance t WHERE b.sku_id = t.sku_id AND b.location_id = t.location_id
	RETURNING b.sku_id, b.location_id, b.on_hand, b.reserved, b.committed
), ledger AS (
	INSERT INTO stock_movements (sku_id, location_id, reserved_delta, cause, actor, reservation_id)
	SELECT sku_id, location_id, quantity, 'reserved', $3, res_id FROM ol ORDER BY sku_id, location_id, seq
), event AS (
	INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved, committed, reservation_id, checkout_id)
	SELECT o.sku_id, o.location_id, 'reserved', b.on_hand,
	       b.reserved - coalesce(sum(o.quantity) OVER (PARTITION BY o.sku_id, o.location_id ORDER BY o.seq
	                                                   ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING), 0),
	       b.committed, o.res_id, o.checkout_id
	FROM ol o JOIN b ON b.sku_id = o.sku_id AND b.location_id = o.location_id
	ORDER BY o.sku_id, o.location_id, o.seq
), told AS (
	SELECT count(pg_notify('` + domain.WaitlistChannel + `', checkout_id))::int AS n FROM (SELECT DISTINCT checkout_id FROM upd) c
)
SELECT (SELECT count(*)::int FROM offers) + (SELECT 0 * n FROM told),
       (SELECT array_agg(DISTINCT w.checkout_id) FROM pick p JOIN waitlist_entries w ON w.id = p.id WHERE p.act = 'need'),
       NULL::uuid, NULL::bigint, NULL::timestamptz, NULL::bigint, NULL::bigint, NULL::int, NULL::text, NULL::float8
UNION ALL
SELECT NULL, NULL, o.res_id, l.id, r.expires_at, o.sku_id, o.location_id, o.quantity, s.kind, CASE WHEN o.nth = 1 THEN o.waited END
FROM ol o
JOIN res r ON r.id = o.res_id
JOIN line l ON l.reservation_id = o.res_id AND l.location_id = o.location_id
JOIN skus s ON s.id = o.sku_id`

// offerFreed hands what f freed to the waiting entries of its balances,
// inside the freeing transaction and before it commits (see offerStatement),
// with each new hold's expiry job and, for CODES SKUs, its codes. So a plain
// reserve never gets a unit a waiting entry fits, and a unit is offered once:
// the balance rows stay locked from the freeing change to commit.
//
// It first asks, in a small statement of its own (scopeStatement), whether
// anyone waiting fits what is free at all: the usual answer, and then the
// offer statement, whose plan is many times larger, is not run. It returns
// how many entries it offered.
func (s *Store) offerFreed(ctx context.Context, tx pgx.Tx, f freed) (int, error) {
	b := &pgx.Batch{}
	sc := queueScope(b, f)
	if err := tx.SendBatch(ctx, b).Close(); err != nil || !sc.fits {
		return 0, err
	}
	return s.offerNow(ctx, tx, sc)
}

// offerAndRead offers what a change freed on k's balance, and returns the
// balance as it is afterwards (b when nothing was offered).
func (s *Store) offerAndRead(ctx context.Context, tx pgx.Tx, k balanceKey, b domain.Balance) (domain.Balance, error) {
	n, err := s.offerFreed(ctx, tx, freedAt(k))
	if err != nil || n == 0 {
		return b, err
	}
	return readBalance(ctx, tx, k)
}

// offerActor is the ledger's actor of every offer's reserve: the line made
// the hold, not whoever freed the units (a shopper's release, a warehouse
// receipt), whose own ledger row says who they were.
const offerActor = "system:waitlist"

// offerRun is what one run of offerStatement picked and offered; it is
// filled when the batch it was queued on is read.
type offerRun struct {
	picked    int
	need      []string // checkouts whose locks the offers need (nothing was offered)
	holds     []HoldDeadline
	codeLines []heldLine
	lineIDs   []int64
	waited    []float64 // seconds from join to offer, per offer (metrics)
}

// queueOffer queues offerStatement on b for the scope's balances, with the
// checkouts this transaction has locked and those it could not lock.
func queueOffer(b *pgx.Batch, sc *offerScope, locked, busy []string) *offerRun {
	run := &offerRun{}
	b.Queue(offerStatement, sc.skuIDs, sc.locationIDs, offerActor, locked, busy).Query(func(rows pgx.Rows) error {
		var n *int
		var need []string
		var resID *string
		var lineID, skuID, locID *int64
		var expiresAt *time.Time
		var quantity *int
		var kind *string
		var waited *float64
		_, err := pgx.ForEachRow(rows, []any{&n, &need, &resID, &lineID, &expiresAt, &skuID, &locID, &quantity, &kind, &waited}, func() error {
			if n != nil {
				run.picked, run.need = *n, need
				return nil
			}
			if waited != nil { // an offer's first line
				run.holds = append(run.holds, HoldDeadline{ReservationID: *resID, At: *expiresAt})
				run.waited = append(run.waited, *waited)
			}
			if kindFromDB(*kind) == domain.KindCodes {
				run.codeLines = append(run.codeLines, heldLine{skuID: *skuID, locationID: *locID, quantity: *quantity, kind: domain.KindCodes})
				run.lineIDs = append(run.lineIDs, *lineID)
			}
			return nil
		})
		return err
	})
	return run
}

// tryLockStatement tries the locks of checkouts $1 (never waiting: see the
// lock order above) and answers those it could not take.
const tryLockStatement = `SELECT coalesce(array_agg(c), '{}') FROM unnest($1::text[]) AS c WHERE NOT pg_try_advisory_xact_lock($2, hashtext(c))`

// queueTryLocks queues tryLockStatement on b; the checkouts it could not
// lock are set when b's results are read.
func queueTryLocks(b *pgx.Batch, checkouts []string) *[]string {
	failed := new([]string)
	b.Queue(tryLockStatement, checkouts, checkoutLockSpace).QueryRow(func(row pgx.Row) error { return row.Scan(failed) })
	return failed
}

// offerNow runs offerStatement for sc until it has offered all it can, and
// finishes its offers: the new holds' expiry jobs and, for CODES SKUs,
// their codes. It returns how many entries were offered.
//
// A run that needs checkouts' locks offers nothing; the next run is sent
// with the attempt to lock them, in the same round trip. If one is taken,
// the transaction runs again with them locked first (errOfferBusy), or, if
// it cannot (it is not inTx's, or it is the last attempt), the locks are
// tried alone and entries of checkouts not locked are passed over.
//
// And while a run picked an entry it did not offer (ended by a concurrent
// leave, or a checkout's offers of one run past its cap), it runs again,
// since what was meant for that entry may fit one further back. Each run
// offers at least one entry, or finds the picked ones no longer waiting,
// or adds checkouts to those locked or busy, so it ends.
func (s *Store) offerNow(ctx context.Context, tx pgx.Tx, sc *offerScope) (int, error) {
	var locked, busy, try []string
	canRetry := false
	if v, ok := s.afterCommit.Load(tx); ok {
		run := v.(*commitReports)
		locked, canRetry = slices.Clone(run.checkouts), !run.final
	}
	total := 0
	for {
		b := &pgx.Batch{}
		var failed *[]string
		if len(try) > 0 {
			failed = queueTryLocks(b, try)
			if !canRetry {
				// This run must not assume them: decide first.
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return total, err
				}
				for _, c := range try {
					if slices.Contains(*failed, c) {
						busy = append(busy, c)
					} else {
						locked = append(locked, c)
					}
				}
				try, failed, b = nil, nil, &pgx.Batch{}
			}
		}
		run := queueOffer(b, sc, append(slices.Clone(locked), try...), busy)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return total, err
		}
		if failed != nil {
			if len(*failed) > 0 {
				return total, &errOfferBusy{checkouts: append(locked, try...)}
			}
			locked, try = append(locked, try...), nil
		}
		if len(run.need) > 0 {
			try = run.need
			continue
		}
		if len(run.holds) > 0 {
			if err := s.scheduleExpiry(ctx, tx, run.holds...); err != nil {
				return total, err
			}
			for i, h := range run.codeLines {
				if err := claimCodes(ctx, tx, run.lineIDs[i], h); err != nil {
					return total, err
				}
			}
		}
		total += len(run.holds)
		s.reportOffers(tx, run.waited)
		if run.picked == len(run.holds) {
			return total, nil
		}
	}
}

// isOfferBusy reports whether err asks for the transaction to run again
// for an offer's locks (errOfferBusy), and which checkouts to lock first.
func isOfferBusy(err error) (checkouts []string, ok bool) {
	var busy *errOfferBusy
	if errors.As(err, &busy) {
		return busy.checkouts, true
	}
	return nil, false
}
