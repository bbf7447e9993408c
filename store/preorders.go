package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// PreorderSet sets how many units a supplier is expected to deliver to a
// balance. Reserve sells against pending_supply - preordered once stock runs
// out. It never goes below what is already pre-ordered (BELOW_RESERVED, with
// Available the lowest value allowed).
func (s *Store) PreorderSet(ctx context.Context, in domain.SetPreorderInput) (domain.Balance, error) {
	if err := in.Validate(); err != nil {
		return domain.Balance{}, err
	}
	b, err := s.balanceChange(ctx, in.SKU, in.Location, false, func(tx pgx.Tx, k balanceKey) (domain.Balance, error) {
		var pending, preordered int
		if err := tx.QueryRow(ctx, `SELECT pending_supply, preordered FROM balances WHERE sku_id = $1 AND location_id = $2 FOR NO KEY UPDATE`,
			k.skuID, k.locationID).Scan(&pending, &preordered); err != nil {
			return domain.Balance{}, err
		}
		if in.PendingSupply < preordered {
			return domain.Balance{}, &domain.Error{Code: domain.CodeBelowReserved, SKU: in.SKU, Field: []string{"input", "pendingSupply"}, Available: &preordered,
				Message: fmt.Sprintf("%d units are already pre-ordered against this supply; pendingSupply cannot go below that", preordered)}
		}
		return applyMovement(ctx, tx, k, movement{pendingSupply: in.PendingSupply - pending, cause: "preorder_set"})
	})
	return b, wrap("PreorderSet", err)
}

// supplyArrived is what a delivery (a receive, a code import) of arrived
// units does beyond adding them to on_hand: it fills waiting pre-orders
// (each allocation lowers pending_supply with preordered), then lowers
// pending_supply by the rest of what arrived, down to what is still owed to
// waiting pre-orders. Expected supply that has arrived is stock, not a
// promise any more: counted as both, it would let new pre-orders be sold
// against units that never come. It returns how many units went to
// pre-orders. The caller holds the balance row lock.
func supplyArrived(ctx context.Context, tx pgx.Tx, k balanceKey, arrived int) (int, error) {
	filled, err := allocatePreorders(ctx, tx, k)
	if err != nil || arrived <= filled {
		return filled, err
	}
	var uncommitted int // expected supply no pre-order is waiting for
	if err := tx.QueryRow(ctx, `SELECT pending_supply - preordered FROM balances WHERE sku_id = $1 AND location_id = $2`,
		k.skuID, k.locationID).Scan(&uncommitted); err != nil {
		return filled, err
	}
	if lower := min(arrived-filled, uncommitted); lower > 0 {
		if _, err := applyMovement(ctx, tx, k, movement{pendingSupply: -lower, cause: "preorder_set",
			reason: "supply arrived"}); err != nil {
			return filled, err
		}
	}
	return filled, nil
}

// allocatePreorders gives a balance's available stock to its confirmed,
// still-pending pre-order lines, oldest order line first, and returns how many
// units it allocated. For CODES SKUs the oldest available codes are sold to
// the order line in the same statement that counts them, so a pre-order is
// only ever reported filled with codes that are in the table. Each allocation
// takes the units off preordered and pending_supply together with on_hand,
// or, where the location ships on shipment, onto committed. The
// caller holds the balance row lock.
func allocatePreorders(ctx context.Context, tx pgx.Tx, k balanceKey) (int, error) {
	var available int
	var commits bool
	if err := tx.QueryRow(ctx, `
		SELECT b.on_hand - b.reserved - b.committed, `+commitsSQL+`
		FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
		WHERE b.sku_id = $1 AND b.location_id = $2 FOR NO KEY UPDATE OF b`,
		k.skuID, k.locationID).Scan(&available, &commits); err != nil {
		return 0, err
	}
	if available <= 0 {
		return 0, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT ol.id, ol.pending, ol.reservation_line_id, o.ref
		FROM order_lines ol JOIN orders o ON o.id = ol.order_id
		WHERE ol.sku_id = $1 AND ol.location_id = $2 AND ol.pending > 0
		ORDER BY ol.id
		FOR NO KEY UPDATE OF ol`, k.skuID, k.locationID)
	if err != nil {
		return 0, err
	}
	type pendingLine struct {
		id, reservationLineID int64
		pending               int
		ref                   string
	}
	lines, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pendingLine, error) {
		var p pendingLine
		return p, r.Scan(&p.id, &p.pending, &p.reservationLineID, &p.ref)
	})
	if err != nil {
		return 0, err
	}
	filled := 0
	for _, l := range lines {
		take := min(l.pending, available-filled)
		if take == 0 {
			break
		}
		if k.kind == domain.KindCodes {
			tag, err := tx.Exec(ctx, `
				UPDATE codes SET status = 'sold', order_line_id = $1, reservation_line_id = $2, updated_at = now()
				WHERE id IN (SELECT id FROM codes WHERE sku_id = $3 AND location_id = $4 AND status = 'available'
				             ORDER BY batch_id, id LIMIT $5 FOR NO KEY UPDATE SKIP LOCKED)`,
				l.id, l.reservationLineID, k.skuID, k.locationID, take)
			if err != nil {
				return 0, err
			}
			if int(tag.RowsAffected()) != take {
				return 0, fmt.Errorf("codes balance out of step: %d codes for %d available", tag.RowsAffected(), take)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE order_lines SET pending = pending - $2 WHERE id = $1`, l.id, take); err != nil {
			return 0, err
		}
		m := movement{onHand: -take, preordered: -take, pendingSupply: -take, cause: "preorder_allocated", reference: "order " + l.ref}
		if commits { // still on hand until it ships
			m.onHand, m.committed = 0, take
		}
		if _, err := applyMovement(ctx, tx, k, m); err != nil {
			return 0, err
		}
		filled += take
	}
	return filled, nil
}

// allocateForReservation runs allocatePreorders for each balance a just
// confirmed reservation pre-ordered from, in lock order.
func allocateForReservation(ctx context.Context, tx pgx.Tx, reservationID string) error {
	rows, err := tx.Query(ctx, `
		SELECT DISTINCT rl.sku_id, rl.location_id, s.kind FROM reservation_lines rl JOIN skus s ON s.id = rl.sku_id
		WHERE rl.reservation_id = $1 AND rl.preorder_quantity > 0
		ORDER BY rl.sku_id, rl.location_id`, reservationID)
	if err != nil {
		return err
	}
	keys, err := pgx.CollectRows(rows, scanBalanceKey)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := allocatePreorders(ctx, tx, k); err != nil {
			return err
		}
	}
	return nil
}
