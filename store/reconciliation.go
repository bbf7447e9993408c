package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

var _ domain.Reconciler = (*Store)(nil)

// Reconciliation compares every balance with its ledger in one consistent
// snapshot: each column must equal the sum of its deltas. It reports; it never
// corrects.
func (s *Store) Reconciliation(ctx context.Context) ([]domain.ReconciliationIssue, error) {
	var issues []domain.ReconciliationIssue
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			WITH ledger AS (
				SELECT sku_id, location_id, sum(on_hand_delta) AS on_hand, sum(reserved_delta) AS reserved,
				       sum(pending_supply_delta) AS pending_supply, sum(preordered_delta) AS preordered
				FROM stock_movements GROUP BY sku_id, location_id
			)
			SELECT s.code, l.code, col, have, want
			FROM balances b
			JOIN skus s ON s.id = b.sku_id
			JOIN locations l ON l.id = b.location_id
			LEFT JOIN ledger g ON g.sku_id = b.sku_id AND g.location_id = b.location_id
			CROSS JOIN LATERAL (VALUES
				('on_hand', b.on_hand::bigint, coalesce(g.on_hand, 0)),
				('reserved', b.reserved::bigint, coalesce(g.reserved, 0)),
				('pending_supply', b.pending_supply::bigint, coalesce(g.pending_supply, 0)),
				('preordered', b.preordered::bigint, coalesce(g.preordered, 0))
			) AS c(col, have, want)
			WHERE have <> want
			ORDER BY s.code, l.code, col`)
		if err != nil {
			return err
		}
		issues, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.ReconciliationIssue, error) {
			var i domain.ReconciliationIssue
			var col string
			var have, want int64
			if err := r.Scan(&i.SKU, &i.Location, &col, &have, &want); err != nil {
				return i, err
			}
			i.Kind = col + "_ledger_mismatch"
			i.Detail = fmt.Sprintf("%s is %d but the ledger sums to %d", col, have, want)
			return i, nil
		})
		return err
	})
	return issues, wrap("Reconciliation", err)
}
