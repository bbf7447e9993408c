package store

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// querier is what read helpers need: a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const reservationColumns = `r.id, r.checkout_id, r.request_key, r.status, r.expires_at, r.created_at, r.release_reason`

func scanReservation(row pgx.Row) (domain.Reservation, error) {
	var r domain.Reservation
	var status string
	var reason *string
	if err := row.Scan(&r.ID, &r.CheckoutID, &r.RequestKey, &status, &r.ExpiresAt, &r.CreatedAt, &reason); err != nil {
		return r, err
	}
	r.Status = domain.ReservationStatus(strings.ToUpper(status))
	if reason != nil {
		rr := domain.ReleaseReason(strings.ToUpper(*reason))
		r.ReleaseReason = &rr
	}
	return r, nil
}

// loadReservation reads a reservation with its lines and, once confirmed, its
// order; pgx.ErrNoRows when there is none.
func loadReservation(ctx context.Context, q querier, id string) (domain.Reservation, error) {
	list, err := loadReservations(ctx, q, []string{id})
	if err != nil {
		return domain.Reservation{}, err
	}
	return list[0], nil
}

// loadReservations is loadReservation for many, in the order of ids, in two
// queries whatever their number; pgx.ErrNoRows when one of them is missing.
func loadReservations(ctx context.Context, q querier, ids []string) ([]domain.Reservation, error) {
	rows, err := q.Query(ctx, `SELECT `+reservationColumns+` FROM reservations r WHERE r.id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Reservation, error) { return scanReservation(r) })
	if err != nil {
		return nil, err
	}
	byID := make(map[string]domain.Reservation, len(got))
	for _, r := range got {
		byID[r.ID] = r
	}
	list := make([]domain.Reservation, len(ids))
	for i, id := range ids {
		canonical, _ := canonicalUUID(id) // the database took it as a uuid
		r, ok := byID[canonical]
		if !ok {
			return nil, pgx.ErrNoRows
		}
		list[i] = r
	}
	return list, loadDetails(ctx, q, list)
}

// loadDetails fills in lines and, for confirmed ones, orders for a list of
// reservations with one query each, whatever the list's length.
func loadDetails(ctx context.Context, q querier, list []domain.Reservation) error {
	ids := make([]string, len(list))
	byID := make(map[string]*domain.Reservation, len(list))
	for i := range list {
		ids[i] = list[i].ID
		list[i].Lines = []domain.ReservationLine{}
		byID[list[i].ID] = &list[i]
	}
	rows, err := q.Query(ctx, `
		SELECT rl.reservation_id, rl.line_no, s.code, l.code, rl.quantity, rl.preorder_quantity
		FROM reservation_lines rl JOIN skus s ON s.id = rl.sku_id JOIN locations l ON l.id = rl.location_id
		WHERE rl.reservation_id = ANY($1::uuid[])
		ORDER BY rl.line_no, l.priority, l.code`, ids)
	if err != nil {
		return err
	}
	var rid string
	var line domain.ReservationLine
	if _, err := pgx.ForEachRow(rows, []any{&rid, &line.InputLine, &line.SKU, &line.Location, &line.Quantity, &line.PreorderQuantity}, func() error {
		byID[rid].Lines = append(byID[rid].Lines, line)
		return nil
	}); err != nil {
		return err
	}
	var confirmed []string // only these have an order
	for _, r := range list {
		if r.Status == domain.StatusConfirmed {
			confirmed = append(confirmed, r.ID)
		}
	}
	if len(confirmed) == 0 {
		return nil
	}
	orders, err := loadOrders(ctx, q, `o.reservation_id = ANY($1::uuid[])`, confirmed)
	if err != nil {
		return err
	}
	for _, o := range orders {
		byID[o.reservationID].Order = &o.Order
	}
	return nil
}

// orderWithReservation is an order and the reservation it sold.
type orderWithReservation struct {
	domain.Order
	reservationID string
}

// loadOrders reads the orders matching where (over orders o, with $1) and
// their lines.
func loadOrders(ctx context.Context, q querier, where string, arg any) ([]orderWithReservation, error) {
	rows, err := q.Query(ctx, `
		SELECT o.id, o.ref, o.checkout_id, o.created_at, o.reservation_id,
		       ol.id, s.kind, s.code, l.code, ol.quantity, ol.title, ol.unit_price, ol.currency, ol.pending,
		       CASE WHEN ol.commits THEN `+inHandSQL+` ELSE 0 END, ol.fulfilled, ol.cancelled
		FROM orders o
		JOIN order_lines ol ON ol.order_id = o.id
		JOIN skus s ON s.id = ol.sku_id JOIN locations l ON l.id = ol.location_id
		WHERE `+where+`
		ORDER BY o.id, ol.id`, arg)
	if err != nil {
		return nil, err
	}
	var out []orderWithReservation
	var id, lastID int64
	var o orderWithReservation
	var ol domain.OrderLine
	var kind string
	_, err = pgx.ForEachRow(rows, []any{&id, &o.Ref, &o.CheckoutID, &o.CreatedAt, &o.reservationID,
		&ol.ID, &kind, &ol.SKU, &ol.Location, &ol.Quantity, &ol.Title, &ol.UnitPrice, &ol.Currency, &ol.PendingCodes,
		&ol.Committed, &ol.Fulfilled, &ol.Cancelled}, func() error {
		if len(out) == 0 || id != lastID {
			out = append(out, orderWithReservation{Order: domain.Order{Ref: o.Ref, CheckoutID: o.CheckoutID, CreatedAt: o.CreatedAt}, reservationID: o.reservationID})
			lastID = id
		}
		ol.Kind = kindFromDB(kind)
		cur := &out[len(out)-1]
		cur.Lines = append(cur.Lines, ol)
		ol = domain.OrderLine{}
		return nil
	})
	return out, err
}

// ReservationGetByID returns the reservation, or nil when it does not exist,
// the id is malformed, or it is outside scope: a checkout cannot tell another
// checkout's reservation from none.
func (s *Store) ReservationGetByID(ctx context.Context, scope domain.Scope, id string) (*domain.Reservation, error) {
	id, ok := canonicalUUID(id)
	if !ok {
		return nil, nil
	}
	var out *domain.Reservation
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		r, err := loadReservation(ctx, tx, id)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !scope.Allows(r.CheckoutID) {
			return nil
		}
		out = &r
		return err
	})
	return out, wrap("ReservationGetByID", err)
}

// ReservationListByCheckout returns one page of a checkout's reservations,
// newest first (keyset on created_at, id, so pages neither skip nor repeat
// rows while new ones arrive). A cursor that names no reservation of this
// checkout is refused.
func (s *Store) ReservationListByCheckout(ctx context.Context, checkoutID string, page domain.ReservationPage) ([]domain.Reservation, error) {
	if err := domain.CheckIdentifier([]string{"checkoutId"}, checkoutID); err != nil {
		return nil, domain.Limitf("%s", err.(*domain.Error).Message)
	}
	if page.First < 1 || page.First > domain.MaxReservationPage {
		return nil, domain.Limitf("first must be between 1 and %d", domain.MaxReservationPage)
	}
	if page.After != nil {
		after, ok := canonicalUUID(*page.After)
		if !ok {
			return nil, domain.Limitf("after is not a reservation id")
		}
		page.After = &after
	}
	var out []domain.Reservation
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		var rows pgx.Rows
		var err error
		if page.After == nil {
			rows, err = tx.Query(ctx, `SELECT `+reservationColumns+` FROM reservations r WHERE r.checkout_id = $1
				ORDER BY r.created_at DESC, r.id DESC LIMIT $2`, checkoutID, page.First)
		} else {
			var found bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM reservations WHERE id = $1 AND checkout_id = $2)`,
				*page.After, checkoutID).Scan(&found); err != nil {
				return err
			}
			if !found {
				return domain.Limitf("after names no reservation of this checkout")
			}
			rows, err = tx.Query(ctx, `SELECT `+reservationColumns+` FROM reservations r
				WHERE r.checkout_id = $1 AND (r.created_at, r.id) < (SELECT created_at, id FROM reservations WHERE id = $3)
				ORDER BY r.created_at DESC, r.id DESC LIMIT $2`, checkoutID, page.First, *page.After)
		}
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Reservation, error) { return scanReservation(r) }); err != nil {
			return err
		}
		return loadDetails(ctx, tx, out)
	})
	if _, ok := err.(*domain.LimitError); ok {
		return nil, err
	}
	return out, wrap("ReservationListByCheckout", err)
}

// OrderGetByRef returns the order, or nil when it does not exist or is outside
// scope.
func (s *Store) OrderGetByRef(ctx context.Context, scope domain.Scope, ref string) (*domain.Order, error) {
	orders, err := loadOrders(ctx, s.pool, `o.ref = $1`, ref)
	if err != nil {
		return nil, wrap("OrderGetByRef", err)
	}
	if len(orders) == 0 || !scope.Allows(orders[0].CheckoutID) {
		return nil, nil
	}
	return &orders[0].Order, nil
}

// readTx is a consistent read-only snapshot across a read's several queries.
var readTx = pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}

// canonicalUUID returns the canonical form of a client's id (reservation or
// webhook endpoint), or false when it is not a UUID. uuid.Parse also takes spellings PostgreSQL does
// not ("urn:uuid:…", braces), so the id sent to SQL is always re-spelled.
func canonicalUUID(id string) (string, bool) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", false
	}
	return u.String(), true
}
