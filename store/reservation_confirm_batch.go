package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// Confirm batching: a checkout's confirm is its own transaction otherwise,
// with its commit and about ten round trips, so under load the pairs of a
// checkout (reserve, then confirm) would run at a fraction of the reserve
// rate.
const (
	confirmBatchLeaders = 4
	confirmBatchMax     = 64
	confirmBatchTimeout = 10 * time.Second
)

type confirmCoalescer = coalescer[*queuedConfirm]

// queuedConfirm is one confirm waiting for (or in) a batch. outcome is set by
// the batch before done.
type queuedConfirm struct {
	batchTurn
	scope domain.Scope
	in    domain.ConfirmInput
	id    string // canonical form of in.ID
	actor domain.Actor

	confirmed bool               // by the batch; else it runs alone (confirmOne)
	res       domain.Reservation // when confirmed
}

// confirmCoalescable says whether a confirm may join a batch: one whose id
// is a reservation id at all.
func confirmCoalescable(in domain.ConfirmInput) (string, bool) {
	return canonicalUUID(in.ID)
}

// runConfirmBatch confirms what a batch can; ctx is the batch's own (see
// coalescer and runReserveBatch).
func (s *Store) runConfirmBatch(ctx context.Context, batch []*queuedConfirm) {
	err := s.confirmBatch(ctx, batch)
	s.confirmStats.batches.Add(1)
	s.confirmStats.requests.Add(int64(len(batch)))
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) {
			s.confirmStats.failed.Add(1)
		}
		for _, q := range batch {
			q.confirmed = false // rolled back: each runs alone
		}
	}
}

// ConfirmBatchStats says what confirm coalescing did since the store was
// made, as ReservationBatchStats does for reserves.
func (s *Store) ConfirmBatchStats() (batches, requests, failed int64) {
	return s.confirmStats.batches.Load(), s.confirmStats.requests.Load(), s.confirmStats.failed.Load()
}

// confirmBatch confirms, in one transaction, every confirm of the batch that
// is plainly confirmable, doing what confirmOne does for one, set-based:
//
//  1. lock the reservations FOR NO KEY UPDATE in id order, and then read the
//     database clock (one round trip, pipelined: the clock is read after the
//     locks are granted, as dueNow explains);
//  2. keep the confirms whose reservation is held, not due, in the caller's
//     scope and has no pre-ordered line (a pre-order confirmed while stock
//     is there is allocated at once, which confirmOne does), and whose
//     snapshots all name SKUs of the reservation, once per reservation;
//  3. write their orders and order lines (with the snapshots) in one
//     statement, the orders in orderRef order (each holds its ref until
//     commit, so arrival order could cross another batch's: a deadlock);
//     an orderRef that already names an order leaves its confirm out;
//  4. closeHolds for them together, read them back, and settleHolds for
//     them together, as the expiry of many holds does.
//
// Every confirm it leaves out, it leaves untouched, and confirmOne then
// decides it alone after this transaction (a replay, NOT_FOUND, expired, a
// taken orderRef, a pre-order): the batch only ever does the plain case.
func (s *Store) confirmBatch(ctx context.Context, batch []*queuedConfirm) error {
	ids := make([]string, 0, len(batch))
	snapshots := false // the SKU lists are read only when a snapshot needs them
	for _, q := range batch {
		if !slices.Contains(ids, q.id) {
			ids = append(ids, q.id)
		}
		snapshots = snapshots || len(q.in.Lines) > 0
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		for _, q := range batch {
			q.confirmed = false // a retried transaction decides again
		}
		type locked struct {
			checkoutID string
			status     string
			expiresAt  time.Time
			preorder   bool
			skus       []string
		}
		rows := map[string]locked{}
		var now time.Time
		b := &pgx.Batch{}
		b.Queue(`SELECT r.id::text, r.checkout_id, r.status, r.expires_at,
			       EXISTS (SELECT FROM reservation_lines rl WHERE rl.reservation_id = r.id AND rl.preorder_quantity > 0),
			       CASE WHEN $2 THEN ARRAY(SELECT s.code FROM reservation_lines rl JOIN skus s ON s.id = rl.sku_id WHERE rl.reservation_id = r.id) END
			FROM reservations r WHERE r.id = ANY($1::uuid[]) ORDER BY r.id FOR NO KEY UPDATE OF r`, ids, snapshots).Query(func(rs pgx.Rows) error {
			var id string
			var l locked
			_, err := pgx.ForEachRow(rs, []any{&id, &l.checkoutID, &l.status, &l.expiresAt, &l.preorder, &l.skus}, func() error {
				l.skus = slices.Clone(l.skus) // the scan target is reused for the next row
				rows[id] = l
				return nil
			})
			return err
		})
		b.Queue(`SELECT clock_timestamp()`).QueryRow(func(r pgx.Row) error { return r.Scan(&now) })
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		s.inBatch("confirm", len(batch))

		// One confirm per reservation; the first in arrival order.
		var take []*queuedConfirm
		seen := map[string]bool{}
		for _, q := range batch {
			r, ok := rows[q.id]
			if !ok || seen[q.id] || !q.scope.Allows(r.checkoutID) || r.status != "held" || !now.Before(r.expiresAt) || r.preorder ||
				slices.ContainsFunc(q.in.Lines, func(l domain.OrderLineSnapshot) bool { return !slices.Contains(r.skus, l.SKU) }) {
				continue
			}
			seen[q.id] = true
			take = append(take, q)
		}
		if len(take) == 0 {
			return nil
		}

		refs, resIDs := make([]string, len(take)), make([]string, len(take))
		var snapOrd []int
		var snapSKU []string
		var titles, prices, currencies []*string
		for i, q := range take {
			refs[i], resIDs[i] = q.in.OrderRef, q.id
			for _, l := range q.in.Lines {
				snapOrd, snapSKU = append(snapOrd, i+1), append(snapSKU, l.SKU)
				titles, prices, currencies = append(titles, l.Title), append(prices, l.UnitPrice), append(currencies, l.Currency)
			}
		}
		ordered := map[string]bool{}
		orows, err := tx.Query(ctx, `
			WITH t AS (
				SELECT t.ref, t.id, t.ord, r.checkout_id
				FROM unnest($1::text[], $2::uuid[]) WITH ORDINALITY AS t(ref, id, ord) JOIN reservations r ON r.id = t.id
			), o AS (
				INSERT INTO orders (ref, reservation_id, checkout_id)
				SELECT ref, id, checkout_id FROM t ORDER BY ref COLLATE "C"
				ON CONFLICT (ref) DO NOTHING
				RETURNING id, reservation_id
			), lines AS (
				INSERT INTO order_lines (order_id, reservation_line_id, sku_id, location_id, quantity, title, unit_price, currency,
				                         preorder_quantity, pending, commits)
				SELECT o.id, rl.id, rl.sku_id, rl.location_id, rl.quantity, snap.title, snap.price, snap.currency,
				       rl.preorder_quantity, rl.preorder_quantity, `+commitsSQL+`
				FROM o JOIN t ON t.id = o.reservation_id JOIN reservation_lines rl ON rl.reservation_id = o.reservation_id
				JOIN skus s ON s.id = rl.sku_id
				JOIN locations l ON l.id = rl.location_id
				LEFT JOIN unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[]) AS snap(ord, sku, title, price, currency)
				       ON snap.ord = t.ord AND snap.sku = s.code
				ORDER BY t.ord, rl.line_no, rl.id
			)
			SELECT reservation_id::text FROM o`, refs, resIDs, snapOrd, snapSKU, titles, prices, currencies)
		if err != nil {
			return err
		}
		var rid string
		if _, err := pgx.ForEachRow(orows, []any{&rid}, func() error {
			ordered[rid] = true
			return nil
		}); err != nil {
			return err
		}
		take = slices.DeleteFunc(take, func(q *queuedConfirm) bool { return !ordered[q.id] })
		if len(take) == 0 {
			return nil
		}

		// The ledger names each confirm's own caller: one closeHolds per
		// actor (a batch is nearly always one payment backend's).
		byActor := map[domain.Actor][]string{}
		var actors []domain.Actor
		confirmed := make([]string, len(take))
		for i, q := range take {
			if _, ok := byActor[q.actor]; !ok {
				actors = append(actors, q.actor)
			}
			byActor[q.actor] = append(byActor[q.actor], q.id)
			confirmed[i] = q.id
		}
		for _, a := range actors {
			if err := closeHolds(domain.WithActor(ctx, a), tx, byActor[a], domain.StatusConfirmed, nil); err != nil {
				return err
			}
		}
		// Read back before settling, as transition does: the balance rows are
		// then locked only from settleHolds to commit.
		list, err := loadReservations(ctx, tx, confirmed)
		if err != nil {
			return err
		}
		if err := settleHolds(ctx, tx, confirmed, domain.StatusConfirmed, balancesOf(list...) == 1); err != nil {
			return err
		}
		for i, q := range take {
			q.res, q.confirmed = list[i], true
		}
		return nil
	})
}
