package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// freed names the balances a transaction made units available on: explicit
// (sku, location) pairs, and the balances of the lines of reservations it
// ended (released or expired), which the offer statement looks up itself.
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

// offerStatement offers what is free on the freed balances to their waiting
// entries, first-fit in join order, all in one statement:
//
//   - pick walks each balance's line (waitlist_entries_line_idx) from the
//     front with a recursive CTE: each step finds the next waiting entry
//     after the last one offered whose quantity fits what is still free, so
//     an entry needing more is skipped and keeps its place. Before each
//     step, one probe of waitlist_entries_fit_idx asks whether any waiting
//     entry of the SKU fits at all (an earlier one that fitted would have
//     been taken at its turn, since what is free only shrinks along the
//     walk), so nothing waiting, or nothing that fits, costs a probe rather
//     than a walk through the line;
//   - locked locks the picked entries in id order, the one order every
//     offer takes them in: two freeing transactions on two balances of a
//     SKU may pick the same unlocated entries, and then one waits for the
//     other rather than each holding an entry the other needs;
//   - upd marks the picked entries OFFERED, only while still waiting (a
//     concurrent leave or offer may have ended one: the caller then runs
//     the statement again, see finishOffers), with the id of their new
//     reservation;
//   - told notifies each offered entry's checkout (notifyWaitlist; the
//     first row adds 0 times its count, so that it runs);
//   - one HELD reservation per offered entry (request key waitlist:<entry
//     id>, the entry's offer TTL), its line, the balance's reserved count,
//     a ledger row and a stock event each, written like a reserve's: the
//     k-th offer of a balance's event carries the balance as it left it.
//
// The balances must already be locked by the caller's transaction (the
// freeing change did it), so no other writer changes what is free while the
// line is walked. An entry without a location is offered by whichever
// balance of its SKU reaches it first and fits it whole (an offer is never
// split across locations: taking a second balance's lock here would break
// the lock order); if two balances of one SKU pick it in the same statement,
// chosen keeps one and the caller runs again. Entries expired by their TTL
// but not yet marked are passed over.
//
// It answers one row with the number picked, and one more row per offer
// (reservation, line, deadline, SKU, location, quantity, kind).
const offerStatement = `
WITH RECURSIVE target AS (
	SELECT DISTINCT sku_id, location_id FROM (
		SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS t(sku_id, location_id)
		UNION ALL
		SELECT sku_id, location_id FROM reservation_lines WHERE reservation_id = ANY($3::uuid[])
	) t
), bal AS (
	SELECT b.sku_id, b.location_id, b.on_hand - b.reserved AS free
	FROM balances b JOIN target t ON t.sku_id = b.sku_id AND t.location_id = b.location_id
	WHERE b.on_hand > b.reserved
	  AND (SELECT min(w.quantity) FROM waitlist_entries w WHERE w.sku_id = b.sku_id AND w.status = 'waiting') <= b.on_hand - b.reserved
), pick AS (
	SELECT b.sku_id, b.location_id, e.seq, e.id, b.free - e.quantity AS remaining
	FROM bal b CROSS JOIN LATERAL (
		SELECT w.seq, w.id, w.quantity FROM waitlist_entries w
		WHERE w.sku_id = b.sku_id AND w.status = 'waiting'
		  AND (w.location_id = b.location_id OR w.location_id IS NULL)
		  AND w.quantity <= b.free AND w.expires_at > clock_timestamp()
		ORDER BY w.seq LIMIT 1) e
	UNION ALL
	SELECT p.sku_id, p.location_id, e.seq, e.id, p.remaining - e.quantity
	FROM pick p CROSS JOIN LATERAL (
		SELECT w.seq, w.id, w.quantity FROM waitlist_entries w
		WHERE w.sku_id = p.sku_id AND w.status = 'waiting' AND w.seq > p.seq
		  AND (w.location_id = p.location_id OR w.location_id IS NULL)
		  AND w.quantity <= p.remaining AND w.expires_at > clock_timestamp()
		ORDER BY w.seq LIMIT 1) e
	WHERE p.remaining > 0
	  AND (SELECT min(w.quantity) FROM waitlist_entries w WHERE w.sku_id = p.sku_id AND w.status = 'waiting') <= p.remaining
), chosen AS (
	SELECT DISTINCT ON (id) id, sku_id, location_id, gen_random_uuid() AS res_id
	FROM pick ORDER BY id, sku_id, location_id
), locked AS (
	SELECT w.id FROM waitlist_entries w
	WHERE w.id IN (SELECT id FROM chosen) AND w.status = 'waiting'
	ORDER BY w.id
	FOR NO KEY UPDATE
), upd AS (
	UPDATE waitlist_entries w
	SET status = 'offered', reservation_id = c.res_id, ended_at = now(), updated_at = now()
	FROM chosen c WHERE w.id = c.id AND w.id IN (SELECT id FROM locked) AND w.status = 'waiting'
	RETURNING w.id, w.seq, w.checkout_id, w.quantity, w.offer_ttl_seconds, w.fingerprint, c.sku_id, c.location_id, c.res_id
), res AS (
	INSERT INTO reservations (id, checkout_id, request_key, fingerprint, expires_at)
	SELECT res_id, checkout_id, 'waitlist:' || id, fingerprint, clock_timestamp() + make_interval(secs => offer_ttl_seconds)
	FROM upd
	RETURNING id, expires_at
), line AS (
	INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity)
	SELECT res_id, 0, sku_id, location_id, quantity FROM upd
	RETURNING id, reservation_id
), per_balance AS (
	SELECT sku_id, location_id, sum(quantity)::int AS q FROM upd GROUP BY sku_id, location_id
), b AS (
	UPDATE balances b SET reserved = b.reserved + t.q, updated_at = now()
	FROM per_balance t WHERE b.sku_id = t.sku_id AND b.location_id = t.location_id
	RETURNING b.sku_id, b.location_id, b.on_hand, b.reserved
), ledger AS (
	INSERT INTO stock_movements (sku_id, location_id, reserved_delta, cause, actor, reservation_id)
	SELECT sku_id, location_id, quantity, 'reserved', $4, res_id FROM upd ORDER BY sku_id, location_id, seq
), event AS (
	INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved, reservation_id, checkout_id)
	SELECT u.sku_id, u.location_id, 'reserved', b.on_hand,
	       b.reserved - coalesce(sum(u.quantity) OVER (PARTITION BY u.sku_id, u.location_id ORDER BY u.seq
	                                                   ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING), 0),
	       u.res_id, u.checkout_id
	FROM upd u JOIN b ON b.sku_id = u.sku_id AND b.location_id = u.location_id
	ORDER BY u.sku_id, u.location_id, u.seq
), told AS (
	SELECT count(pg_notify('` + domain.WaitlistChannel + `', checkout_id))::int AS n FROM (SELECT DISTINCT checkout_id FROM upd) c
)
SELECT (SELECT count(*)::int FROM pick) + (SELECT 0 * n FROM told), NULL::uuid, NULL::bigint, NULL::timestamptz, NULL::bigint, NULL::bigint, NULL::int, NULL::text, NULL::float8
UNION ALL
SELECT NULL, u.res_id, l.id, r.expires_at, u.sku_id, u.location_id, u.quantity, s.kind,
       -- The statement's snapshot of the entry: joined_at never changes.
       (SELECT extract(epoch FROM clock_timestamp() - w.joined_at) FROM waitlist_entries w WHERE w.id = u.id)::float8
FROM upd u
JOIN res r ON r.id = u.res_id
JOIN line l ON l.reservation_id = u.res_id
JOIN skus s ON s.id = u.sku_id`

// offerFreed hands what f freed to the waiting entries of its balances,
// inside the freeing transaction and before it commits (see offerStatement),
// with each new hold's expiry job and, for CODES SKUs, its codes. So a plain
// reserve never gets a unit a waiting entry fits, and a unit is offered once:
// the balance rows stay locked from the freeing change to commit.
//
// It first asks, in a small statement of its own (fitStatement), whether
// anyone waiting fits what is free at all: the usual answer, and then the
// offer statement, whose plan is many times larger, is not run. It returns
// how many entries it offered.
func (s *Store) offerFreed(ctx context.Context, tx pgx.Tx, f freed) (int, error) {
	b := &pgx.Batch{}
	fits := queueFitCheck(b, f)
	if err := tx.SendBatch(ctx, b).Close(); err != nil || !*fits {
		return 0, err
	}
	return s.offerNow(ctx, tx, f)
}

// offerNow runs offerStatement for f and finishes its offers.
func (s *Store) offerNow(ctx context.Context, tx pgx.Tx, f freed) (int, error) {
	b := &pgx.Batch{}
	run := queueOffer(b, f)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	return s.finishOffers(ctx, tx, f, run)
}

// fitStatement says whether any freed balance has a waiting entry that fits
// what is free there (the same probe of waitlist_entries_fit_idx the offer
// statement starts with; location and TTL are the offer's to check). The
// probe is the line's smallest quantity against what is free, one index
// descent whatever the statistics: as EXISTS (… quantity <= free), a plan
// made before the table was first analyzed read the whole line of the SKU
// (10,000 entries, 2 ms, under the balance lock of every release and
// expiry: 500 holds expired in 2.49 s against 0.78 s without a line).
const fitStatement = `
SELECT EXISTS (
	SELECT FROM (
		SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS t(sku_id, location_id)
		UNION ALL
		SELECT sku_id, location_id FROM reservation_lines WHERE reservation_id = ANY($3::uuid[])
	) t
	JOIN balances b ON b.sku_id = t.sku_id AND b.location_id = t.location_id
	WHERE b.on_hand > b.reserved
	  AND (SELECT min(w.quantity) FROM waitlist_entries w WHERE w.sku_id = b.sku_id AND w.status = 'waiting') <= b.on_hand - b.reserved)`

// queueFitCheck queues fitStatement on b; the answer is set when b's
// results are read.
func queueFitCheck(b *pgx.Batch, f freed) *bool {
	fits := new(bool)
	b.Queue(fitStatement, f.skuIDs, f.locationIDs, f.reservationIDs).QueryRow(func(row pgx.Row) error { return row.Scan(fits) })
	return fits
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
	holds     []HoldDeadline
	codeLines []heldLine
	lineIDs   []int64
	waited    []float64 // seconds from join to offer, per offer (metrics)
}

// queueOffer queues offerStatement on b, so a freeing path can send it in
// the round trip of its own last statement (settleHolds does): the balance
// rows are locked from that statement to commit, and every round trip in
// between is time a contended row stays locked.
func queueOffer(b *pgx.Batch, f freed) *offerRun {
	run := &offerRun{}
	b.Queue(offerStatement, f.skuIDs, f.locationIDs, f.reservationIDs, offerActor).Query(func(rows pgx.Rows) error {
		var n *int
		var resID *string
		var lineID, skuID, locID *int64
		var expiresAt *time.Time
		var quantity *int
		var kind *string
		var waited *float64
		_, err := pgx.ForEachRow(rows, []any{&n, &resID, &lineID, &expiresAt, &skuID, &locID, &quantity, &kind, &waited}, func() error {
			if n != nil {
				run.picked = *n
				return nil
			}
			run.holds = append(run.holds, HoldDeadline{ReservationID: *resID, At: *expiresAt})
			run.waited = append(run.waited, *waited)
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

// finishOffers completes a run of offerStatement: the new holds' expiry jobs
// and, for CODES SKUs, their codes. Then, while a run picked an entry it did
// not offer (ended by a concurrent leave, or picked by two balances), it runs
// the statement again, since what was meant for that entry may fit one
// further back; each run offers at least one entry or finds the picked ones
// no longer waiting, so it ends. It returns how many entries were offered.
func (s *Store) finishOffers(ctx context.Context, tx pgx.Tx, f freed, run *offerRun) (int, error) {
	total := 0
	for {
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
		b := &pgx.Batch{}
		run = queueOffer(b, f)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return total, err
		}
	}
}
