package store

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// balanceColumns selects a domain.Balance; the query must alias balances b,
// skus s and locations l.
const balanceColumns = `s.code, l.code, b.on_hand, b.reserved, b.committed, b.pending_supply, b.preordered, b.updated_at`

func scanBalance(r pgx.CollectableRow) (domain.Balance, error) {
	var b domain.Balance
	err := r.Scan(&b.SKU, &b.Location, &b.OnHand, &b.Reserved, &b.Committed, &b.PendingSupply, &b.Preordered, &b.UpdatedAt)
	return b, err
}

// balanceKey identifies one balance row by the ids behind its codes.
type balanceKey struct {
	skuID, locationID int64
	kind              domain.StockKind
}

// scanBalanceKey reads a row of (sku_id, location_id, kind).
func scanBalanceKey(r pgx.CollectableRow) (balanceKey, error) {
	var k balanceKey
	var kind string
	err := r.Scan(&k.skuID, &k.locationID, &kind)
	k.kind = kindFromDB(kind)
	return k, err
}

// resolveBalance turns codes into ids, answering UNKNOWN_SKU / UNKNOWN_LOCATION,
// and makes sure the balance row exists so it can be locked. Creating the row is
// idempotent and rolls back with the caller's transaction.
func resolveBalance(ctx context.Context, tx pgx.Tx, sku, location string) (balanceKey, error) {
	var k balanceKey
	var skuID, locID *int64
	var kind *string
	err := tx.QueryRow(ctx, `
		SELECT (SELECT id FROM skus WHERE code = $1), (SELECT kind FROM skus WHERE code = $1),
		       (SELECT id FROM locations WHERE code = $2)`, sku, location).Scan(&skuID, &kind, &locID)
	if err != nil {
		return k, err
	}
	if skuID == nil {
		return k, &domain.Error{Code: domain.CodeUnknownSKU, Message: "unknown SKU " + strconv.Quote(sku), Field: []string{"input", "sku"}, SKU: sku}
	}
	if locID == nil {
		return k, &domain.Error{Code: domain.CodeUnknownLocation, Message: "unknown location " + strconv.Quote(location), Field: []string{"input", "location"}, SKU: sku}
	}
	k = balanceKey{skuID: *skuID, locationID: *locID, kind: kindFromDB(*kind)}
	_, err = tx.Exec(ctx, `INSERT INTO balances (sku_id, location_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, k.skuID, k.locationID)
	return k, err
}

// movement is one ledger row; every balance change writes exactly one.
type movement struct {
	onHand, reserved, committed, pendingSupply, preordered int
	cause, reason, reference                               string
	reservationID                                          *string
	checkoutID                                             string // of the reservation, for its stock event
	orderActionID                                          *int64 // the fulfil or cancel, for its stock event (webhooks)
	// claim makes the change conditional on on_hand - reserved - committed
	// >= reserved delta and pending_supply - preordered >= preordered delta: the seeds'
	// conditional claim. applyMovement then answers errNotAvailable instead of
	// changing anything.
	claim bool
}

// errNotAvailable is a claim that found too little stock.
var errNotAvailable = errors.New("not enough available stock")

// movementStatement is applyMovement's one statement (movementArgs gives
// its arguments): the balance changed, its ledger row and stock event.
const movementStatement = `
		WITH b AS (
			UPDATE balances SET
				on_hand = on_hand + $3, reserved = reserved + $4,
				pending_supply = pending_supply + $5, preordered = preordered + $6,
				committed = committed + $15, updated_at = now()
			WHERE sku_id = $1 AND location_id = $2 AND (NOT $12 OR (on_hand - reserved - committed >= $4 AND pending_supply - preordered >= $6))
			RETURNING *
		), ledger AS (
			INSERT INTO stock_movements (sku_id, location_id, on_hand_delta, reserved_delta, committed_delta,
				pending_supply_delta, preordered_delta, cause, reason, reference, actor, reservation_id)
			SELECT sku_id, location_id, $3, $4, $15, $5, $6, $7, NULLIF($8, ''), NULLIF($9, ''), $10, $11 FROM b
		), event AS (
			INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved, committed, reservation_id, checkout_id, order_action_id)
			SELECT sku_id, location_id, $13, on_hand, reserved, committed, $11, NULLIF($14, ''), $16 FROM b
		)
		SELECT ` + balanceColumns + `
		FROM b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id`

// movementArgs are movementStatement's arguments for m on k.
func movementArgs(ctx context.Context, k balanceKey, m movement) []any {
	return []any{k.skuID, k.locationID, m.onHand, m.reserved, m.pendingSupply, m.preordered,
		m.cause, m.reason, m.reference, domain.ActorFrom(ctx).Name, m.reservationID, m.claim, eventCause(m.cause), m.checkoutID, m.committed, m.orderActionID}
}

// applyMovement changes a balance by m's deltas and appends m to the ledger in
// one statement, returning the balance after the change. The balance row must
// already be locked or the deltas must be safe under concurrency (the CHECK
// constraints still refuse anything that would oversell).
func applyMovement(ctx context.Context, tx pgx.Tx, k balanceKey, m movement) (domain.Balance, error) {
	rows, err := tx.Query(ctx, movementStatement, movementArgs(ctx, k, m)...)
	if err != nil {
		return domain.Balance{}, err
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBalance)
	if pgCode(err) == pgNumericOutOfRange {
		return b, domain.InvalidInput([]string{"input"}, "the change would take the balance past its maximum of 2147483647")
	}
	if errors.Is(err, pgx.ErrNoRows) {
		if m.claim {
			return b, errNotAvailable
		}
		return b, errors.New("balance row vanished inside its transaction")
	}
	return b, err
}

// readBalance reads one balance as it is now in the transaction.
func readBalance(ctx context.Context, tx pgx.Tx, k balanceKey) (domain.Balance, error) {
	rows, err := tx.Query(ctx, `
		SELECT `+balanceColumns+`
		FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
		WHERE b.sku_id = $1 AND b.location_id = $2`, k.skuID, k.locationID)
	if err != nil {
		return domain.Balance{}, err
	}
	return pgx.CollectExactlyOneRow(rows, scanBalance)
}

// eventCause is the stock event cause for a ledger cause: setting expected
// supply is an adjustment as far as watchers are concerned.
func eventCause(ledgerCause string) string {
	if ledgerCause == "preorder_set" {
		return "adjusted"
	}
	return ledgerCause
}
