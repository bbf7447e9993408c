package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// lockedReservation is a reservation row locked FOR NO KEY UPDATE, with what the
// transitions decide on. id is the canonical form of the id the caller spelled
// (any form uuid.Parse accepts, urn:uuid: among them, which PostgreSQL does
// not read): everything after the lock uses it. due is evaluated with
// clock_timestamp() after the lock was granted (see dueNow), so a confirm that
// waited behind the expiry job sees the truth.
type lockedReservation struct {
	id         string
	checkoutID string
	status     domain.ReservationStatus
	due        bool
	expiresAt  time.Time
}

// lockReservation locks the reservation for a transition. A malformed id, an
// unknown one and one outside scope are all NOT_FOUND: a checkout cannot probe
// for other checkouts' reservations.
func lockReservation(ctx context.Context, tx pgx.Tx, scope domain.Scope, id string) (lockedReservation, error) {
	var r lockedReservation
	id, ok := canonicalUUID(id)
	r.id = id
	if !ok {
		// Not quoted: errors never echo what could be any input.
		return r, &domain.Error{Code: domain.CodeNotFound, Field: []string{"input", "id"}, Message: "no reservation has this id (not a reservation id)"}
	}
	notFound := &domain.Error{Code: domain.CodeNotFound, Field: []string{"input", "id"}, Message: "no reservation " + id}
	var status string
	err := tx.QueryRow(ctx, `SELECT checkout_id, status, expires_at FROM reservations WHERE id = $1 FOR NO KEY UPDATE`, id).
		Scan(&r.checkoutID, &status, &r.expiresAt)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && !scope.Allows(r.checkoutID) {
		return r, notFound
	}
	if err != nil {
		return r, err
	}
	r.status = domain.ReservationStatus(strings.ToUpper(status))
	r.due, err = dueNow(ctx, tx, r.expiresAt)
	return r, err
}

// dueNow asks the database clock whether a deadline has passed. It must be a
// statement of its own, run after the row lock is held: in the locking SELECT,
// clock_timestamp() is evaluated before the lock wait and only re-evaluated if
// the lock holder changed the row, so a confirm that waited past the deadline
// behind a transaction that changed nothing would see a stale "not due".
func dueNow(ctx context.Context, tx pgx.Tx, deadline time.Time) (bool, error) {
	var due bool
	err := tx.QueryRow(ctx, `SELECT $1::timestamptz <= clock_timestamp()`, deadline).Scan(&due)
	return due, err
}

// ReservationConfirm sells a held reservation: in one transaction it marks it
// confirmed (only while expires_at > clock_timestamp(), checked after the row
// lock), takes the stock off on_hand and reserved with ledger rows, and writes
// the order with the buyer's snapshots. Confirming again with the same orderRef
// returns the same result; after the deadline it is RESERVATION_EXPIRED even if
// the expiry job has not run yet.
//
// Concurrent confirms are first offered to a batch
// (confirmCoalescer, confirmBatch) that confirms the plain ones in one
// transaction; what a batch leaves out comes back here and runs alone.
func (s *Store) ReservationConfirm(ctx context.Context, scope domain.Scope, in domain.ConfirmInput) (domain.Reservation, error) {
	if err := in.Validate(); err != nil {
		return domain.Reservation{}, err
	}
	if id, ok := confirmCoalescable(in); ok {
		q := &queuedConfirm{scope: scope, in: in, id: id, actor: domain.ActorFrom(ctx)}
		if err := s.confirmBatches.submit(ctx, q); err != nil {
			return domain.Reservation{}, wrap("ReservationConfirm", err)
		}
		if q.confirmed {
			return q.res, nil
		}
	}
	return s.confirmOne(ctx, scope, in)
}

// confirmOne is ReservationConfirm in a transaction of its own: any confirm,
// and those a batch left out, whose outcome it decides.
func (s *Store) confirmOne(ctx context.Context, scope domain.Scope, in domain.ConfirmInput) (domain.Reservation, error) {
	res, err := s.transition(ctx, scope, in.ID, func(tx pgx.Tx, r lockedReservation) (domain.ReservationStatus, error) {
		switch {
		case r.status == domain.StatusConfirmed:
			var ref string
			if err := tx.QueryRow(ctx, `SELECT ref FROM orders WHERE reservation_id = $1`, r.id).Scan(&ref); err != nil {
				return "", err
			}
			if ref != in.OrderRef {
				return "", invalidTransition("reservation is already confirmed as order %s", ref)
			}
			return "", nil
		case r.status == domain.StatusReleased:
			return "", invalidTransition("reservation was released; reserve again")
		case r.status == domain.StatusExpired || r.due:
			return "", expired(r)
		}
		if err := writeOrder(ctx, tx, r.id, in); err != nil {
			return "", err
		}
		return domain.StatusConfirmed, closeHolds(ctx, tx, []string{r.id}, domain.StatusConfirmed, nil)
	})
	return res, wrap("ReservationConfirm", err)
}

// transition runs one state change of a reservation in one transaction: lock
// the row (NOT_FOUND outside scope), let decide act on it — returning the
// status it closed the hold with, if it did (see closeHolds) — read the
// reservation as it now is, and only then settle the balances, so the
// contended balance rows stay locked for the last statements only. Past the
// lock only the canonical id (r.id) is used, by transition and by decide.
func (s *Store) transition(ctx context.Context, scope domain.Scope, id string, decide func(pgx.Tx, lockedReservation) (domain.ReservationStatus, error)) (domain.Reservation, error) {
	var res domain.Reservation
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := lockReservation(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		id := r.id
		ended, err := decide(tx, r)
		if err != nil {
			return err
		}
		if res, err = loadReservation(ctx, tx, id); err != nil || ended == "" {
			return err
		}
		if ended != domain.StatusConfirmed {
			// Released (or expired): the units go to the line first.
			return s.settleAndOffer(ctx, tx, []string{id}, ended)
		}
		if err := settleHolds(ctx, tx, []string{id}, ended, balancesOf(res) == 1); err != nil {
			return err
		}
		if !hasPreorder(res) {
			return nil
		}
		// A pre-order confirmed while stock is already there is filled now
		// rather than at the next delivery; the order then reads differently.
		if err := allocateForReservation(ctx, tx, id); err != nil {
			return err
		}
		res, err = loadReservation(ctx, tx, id)
		return err
	})
	return res, err
}

// balancesOf counts the distinct balances the reservations' lines are on.
func balancesOf(list ...domain.Reservation) int {
	seen := map[[2]string]bool{}
	for _, r := range list {
		for _, l := range r.Lines {
			seen[[2]string{l.SKU, l.Location}] = true
		}
	}
	return len(seen)
}

func hasPreorder(r domain.Reservation) bool {
	for _, l := range r.Lines {
		if l.PreorderQuantity > 0 {
			return true
		}
	}
	return false
}

// expired is RESERVATION_EXPIRED for a hold whose deadline has passed.
func expired(r lockedReservation) error {
	return &domain.Error{Code: domain.CodeReservationExpired, Field: []string{"input", "id"},
		Message: "the hold expired at " + r.expiresAt.UTC().Format(time.RFC3339) + "; reserve again with a new requestKey"}
}

// writeOrder inserts the order of reservation id (canonical) and one order
// line per reservation line, with the snapshot given for its SKU.
func writeOrder(ctx context.Context, tx pgx.Tx, id string, in domain.ConfirmInput) error {
	var checkoutID string
	var orderID int64
	err := tx.QueryRow(ctx, `
		INSERT INTO orders (ref, reservation_id, checkout_id)
		SELECT $1, id, checkout_id FROM reservations WHERE id = $2
		ON CONFLICT (ref) DO NOTHING
		RETURNING id, checkout_id`, in.OrderRef, id).Scan(&orderID, &checkoutID)
	if errors.Is(err, pgx.ErrNoRows) {
		return &domain.Error{Code: domain.CodeAlreadyExists, Field: []string{"input", "orderRef"},
			Message: "orderRef " + strconv.Quote(in.OrderRef) + " already names another order"}
	}
	if err != nil {
		return err
	}
	n := len(in.Lines)
	skus, titles, prices, currencies := make([]string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	for i, l := range in.Lines {
		skus[i], titles[i], prices[i], currencies[i] = l.SKU, l.Title, l.UnitPrice, l.Currency
	}
	var unmatched *int
	if err := tx.QueryRow(ctx, `
		SELECT min(snap.ord) - 1 FROM unnest($1::text[]) WITH ORDINALITY AS snap(sku, ord)
		WHERE NOT EXISTS (SELECT FROM reservation_lines rl JOIN skus s ON s.id = rl.sku_id
		                  WHERE rl.reservation_id = $2 AND s.code = snap.sku)`, skus, id).Scan(&unmatched); err != nil {
		return err
	}
	if unmatched != nil {
		return &domain.Error{Code: domain.CodeInvalidInput, Line: unmatched, SKU: skus[*unmatched],
			Field:   []string{"input", "lines", strconv.Itoa(*unmatched), "sku"},
			Message: "snapshot for SKU " + skus[*unmatched] + ", which is not in this reservation"}
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO order_lines (order_id, reservation_line_id, sku_id, location_id, quantity, title, unit_price, currency,
		                         preorder_quantity, pending, commits)
		SELECT $1, rl.id, rl.sku_id, rl.location_id, rl.quantity, snap.title, snap.price, snap.currency,
		       rl.preorder_quantity, rl.preorder_quantity, `+commitsSQL+`
		FROM reservation_lines rl
		JOIN skus s ON s.id = rl.sku_id
		JOIN locations l ON l.id = rl.location_id
		LEFT JOIN unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS snap(sku, title, price, currency) ON snap.sku = s.code
		WHERE rl.reservation_id = $2
		ORDER BY rl.line_no, rl.id`, orderID, id, skus, titles, prices, currencies)
	return err
}

// ReservationRelease gives a held reservation's stock back. Releasing a
// reservation that was already released or has expired returns it as it is
// (the stock is not held either way); releasing a confirmed one is
// INVALID_TRANSITION.
func (s *Store) ReservationRelease(ctx context.Context, scope domain.Scope, in domain.ReleaseInput) (domain.Reservation, error) {
	if err := in.Validate(); err != nil {
		return domain.Reservation{}, err
	}
	res, err := s.transition(ctx, scope, in.ID, func(tx pgx.Tx, r lockedReservation) (domain.ReservationStatus, error) {
		switch r.status {
		case domain.StatusConfirmed:
			return "", invalidTransition("reservation is confirmed; a sold order is not released")
		case domain.StatusHeld:
			return domain.StatusReleased, closeHolds(ctx, tx, []string{r.id}, domain.StatusReleased, &in.Reason)
		}
		return "", nil
	})
	return res, wrap("ReservationRelease", err)
}

// ReservationExtend moves a held hold's deadline to ttlSeconds from now. Only
// while held and not yet due. When the deadline moves later, the existing
// expiry job snoozes when it runs early; when it moves earlier, a new job is
// scheduled at the new deadline.
func (s *Store) ReservationExtend(ctx context.Context, scope domain.Scope, in domain.ExtendInput) (domain.Reservation, error) {
	if err := in.Validate(); err != nil {
		return domain.Reservation{}, err
	}
	res, err := s.transition(ctx, scope, in.ID, func(tx pgx.Tx, r lockedReservation) (domain.ReservationStatus, error) {
		switch {
		case r.status == domain.StatusConfirmed || r.status == domain.StatusReleased:
			return "", invalidTransition("reservation is %s; only a held reservation can be extended", strings.ToLower(string(r.status)))
		case r.status == domain.StatusExpired || r.due:
			return "", expired(r)
		}
		var expiresAt time.Time
		var lifetime float64
		if err := tx.QueryRow(ctx, `
			UPDATE reservations SET expires_at = clock_timestamp() + make_interval(secs => $2), updated_at = now()
			WHERE id = $1 RETURNING expires_at, extract(epoch FROM expires_at - created_at)`, r.id, in.TTLSeconds).Scan(&expiresAt, &lifetime); err != nil {
			return "", err
		}
		// Rolled back if refused: nothing changes.
		if err := in.Limits.CheckLifetime(lifetime); err != nil {
			return "", err
		}
		if !expiresAt.Before(r.expiresAt) {
			return "", nil
		}
		return "", s.scheduleExpiry(ctx, tx, HoldDeadline{ReservationID: r.id, At: expiresAt})
	})
	return res, wrap("ReservationExtend", err)
}

// endHolds moves held reservations (locked by the caller) to a terminal status
// and settles their stock: closeHolds, then settleHolds, then, for holds
// that gave units back, offers them to waiting entries (offerFreed).
func (s *Store) endHolds(ctx context.Context, tx pgx.Tx, ids []string, status domain.ReservationStatus, reason *domain.ReleaseReason) error {
	if err := closeHolds(ctx, tx, ids, status, reason); err != nil {
		return err
	}
	if status == domain.StatusConfirmed {
		return settleHolds(ctx, tx, ids, status, false)
	}
	return s.settleAndOffer(ctx, tx, ids, status)
}

// closeHolds does everything of ending held reservations that touches no
// balance row: the status, the ledger rows (one per reservation line), and the
// codes — sold to their order lines on confirm, available again otherwise.
// Callers run it before settleHolds so that the contended balance rows are
// locked as briefly as possible: from settleHolds to commit.
func closeHolds(ctx context.Context, tx pgx.Tx, ids []string, status domain.ReservationStatus, reason *domain.ReleaseReason) error {
	var dbReason *string
	if reason != nil {
		r := strings.ToLower(string(*reason))
		dbReason = &r
	}
	cause := strings.ToLower(string(status))
	// One statement: the status, the ledger rows and the codes. An expired
	// hold ends at its deadline at the earliest: the transaction that found
	// it due may have started (now()) a moment before the deadline.
	var closed int
	err := tx.QueryRow(ctx, `
		WITH r AS (
			UPDATE reservations SET status = $2, release_reason = $3, updated_at = now(),
			       ended_at = CASE WHEN $2 = 'expired' THEN greatest(now(), expires_at) ELSE now() END
			WHERE id = ANY($1::uuid[]) AND status = 'held'
			RETURNING id
		), ledger AS (
			INSERT INTO stock_movements (sku_id, location_id, on_hand_delta, reserved_delta, committed_delta, preordered_delta,
			                             cause, actor, reservation_id)
			SELECT rl.sku_id, rl.location_id,
			       CASE WHEN $4 AND NOT c.commits THEN preorder_quantity - quantity ELSE 0 END,
			       preorder_quantity - quantity,
			       CASE WHEN $4 AND c.commits THEN quantity - preorder_quantity ELSE 0 END,
			       CASE WHEN $4 THEN 0 ELSE -preorder_quantity END,
			       $2, $5, reservation_id
			FROM reservation_lines rl
			CROSS JOIN LATERAL (SELECT `+commitsSQL+` AS commits FROM skus s, locations l
			                    WHERE s.id = rl.sku_id AND l.id = rl.location_id) c
			WHERE reservation_id IN (SELECT id FROM r) AND NOT ($4 AND quantity = preorder_quantity)
		), sold AS (
			UPDATE codes c SET status = 'sold', order_line_id = ol.id, updated_at = now()
			FROM order_lines ol JOIN reservation_lines rl ON rl.id = ol.reservation_line_id
			WHERE $4 AND c.reservation_line_id = rl.id AND c.status = 'held' AND rl.reservation_id IN (SELECT id FROM r)
		), freed AS (
			UPDATE codes SET status = 'available', reservation_line_id = NULL, updated_at = now()
			WHERE NOT $4 AND status = 'held'
			  AND reservation_line_id IN (SELECT id FROM reservation_lines WHERE reservation_id IN (SELECT id FROM r))
		)
		SELECT count(*) FROM r`, ids, cause, dbReason, status == domain.StatusConfirmed, domain.ActorFrom(ctx).Name).Scan(&closed)
	if err != nil {
		return err
	}
	if closed != len(ids) {
		return fmt.Errorf("closeHolds: %d of %d reservations were held", closed, len(ids))
	}
	return nil
}

// settleHolds applies ended reservations to their balances: confirmed takes
// the in-stock part off reserved and off on_hand, or, where the location ships
// on shipment, onto committed (the pre-ordered part stays promised on the
// order line), released and expired give the in-stock part
// back to reserved and the pre-ordered part back to preordered. Balance rows
// are locked in (sku, location) order first, the one lock order every writer
// uses.
//
// It is one statement however many reservations end together (the expiry of
// a storm of holds is set-based): each balance is updated once, by the sum of
// its reservations, and each reservation still gets its own stock event
// carrying the balance exactly as it left it, as if they had been applied one
// after another in the order of ids: the k-th of a balance's reservations
// leaves it at (final value) + (what the reservations after it moved).
//
// oneBalance says every line is on the same balance: then the UPDATE itself
// takes the only lock, and the separate ordering statement is skipped — one
// round trip less while a contended row is held.
func settleHolds(ctx context.Context, tx pgx.Tx, ids []string, status domain.ReservationStatus, oneBalance bool) error {
	if err := lockHeldBalances(ctx, tx, ids, oneBalance); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, settleStatement, ids, status == domain.StatusConfirmed, strings.ToLower(string(status)))
	return err
}

// settleAndOffer is settleHolds for holds that gave their units back
// (released or expired), followed by the offer of those units to the
// balances' waiting entries (offerFreed). The balances are locked in order
// with, for a SKU with an entry without a location waiting, all its other
// balances (lockFreedStatement: the offer may source from them), and
// whether anyone waiting fits is asked, all in the settling statement's
// round trip, so with nobody to offer to (the usual case) a release costs
// one round trip while the balance rows are locked.
func (s *Store) settleAndOffer(ctx context.Context, tx pgx.Tx, ids []string, status domain.ReservationStatus) error {
	b := &pgx.Batch{}
	b.Queue(lockFreedStatement, ids)
	s.queueExpiredOffers(tx, b, ids, status)
	b.Queue(settleStatement, ids, false, strings.ToLower(string(status)))
	sc := queueScope(b, freed{reservationIDs: ids})
	if err := tx.SendBatch(ctx, b).Close(); err != nil || !sc.fits {
		return err
	}
	_, err := s.offerNow(ctx, tx, sc)
	return err
}

// lockHeldBalances locks the balances of the reservations' lines in (sku,
// location) order, unless oneBalance says there is only one (the settling
// UPDATE then takes the only lock).
func lockHeldBalances(ctx context.Context, tx pgx.Tx, ids []string, oneBalance bool) error {
	if oneBalance {
		return nil
	}
	_, err := tx.Exec(ctx, `
		SELECT FROM balances
		WHERE (sku_id, location_id) IN (SELECT sku_id, location_id FROM reservation_lines WHERE reservation_id = ANY($1::uuid[]))
		ORDER BY sku_id, location_id
		FOR NO KEY UPDATE`, ids)
	return err
}

// settleStatement is settleHolds' one statement: $1 the reservation ids, $2
// whether they were confirmed, $3 the stock events' cause.
const settleStatement = `
		WITH per_res AS (
			SELECT i.ord, rl.reservation_id, rl.sku_id, rl.location_id,
			       sum(rl.quantity - rl.preorder_quantity)::int AS stock, sum(rl.preorder_quantity)::int AS preorder
			FROM unnest($1::uuid[]) WITH ORDINALITY AS i(id, ord)
			JOIN reservation_lines rl ON rl.reservation_id = i.id
			GROUP BY i.ord, rl.reservation_id, rl.sku_id, rl.location_id
		), per_balance AS (
			SELECT sku_id, location_id, sum(stock)::int AS stock, sum(preorder)::int AS preorder
			FROM per_res GROUP BY sku_id, location_id
		), b AS (
			UPDATE balances b
			SET reserved = b.reserved - t.stock,
			    on_hand = b.on_hand - CASE WHEN $2 AND NOT t.commits THEN t.stock ELSE 0 END,
			    committed = b.committed + CASE WHEN $2 AND t.commits THEN t.stock ELSE 0 END,
			    preordered = b.preordered - CASE WHEN $2 THEN 0 ELSE t.preorder END,
			    updated_at = now()
			FROM (SELECT pb.*, ` + commitsSQL + ` AS commits
			      FROM per_balance pb JOIN skus s ON s.id = pb.sku_id JOIN locations l ON l.id = pb.location_id) t
			WHERE b.sku_id = t.sku_id AND b.location_id = t.location_id
			RETURNING b.sku_id, b.location_id, b.on_hand, b.reserved, b.committed, t.commits
		), later AS (
			-- what the reservations after each one (same balance) moved
			SELECT ord, reservation_id, sku_id, location_id,
			       coalesce(sum(stock) OVER (PARTITION BY sku_id, location_id ORDER BY ord
			                                 ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING), 0) AS after_stock
			FROM per_res
		)
		INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved, committed, reservation_id, checkout_id)
		SELECT b.sku_id, b.location_id, $3,
		       b.on_hand + CASE WHEN $2 AND NOT b.commits THEN l.after_stock ELSE 0 END,
		       b.reserved + l.after_stock,
		       b.committed - CASE WHEN $2 AND b.commits THEN l.after_stock ELSE 0 END,
		       l.reservation_id, r.checkout_id
		FROM later l
		JOIN b ON b.sku_id = l.sku_id AND b.location_id = l.location_id
		JOIN reservations r ON r.id = l.reservation_id
		ORDER BY l.sku_id, l.location_id, l.ord`

func invalidTransition(format string, args ...any) error {
	return &domain.Error{Code: domain.CodeInvalidTransition, Field: []string{"input", "id"}, Message: fmt.Sprintf(format, args...)}
}
