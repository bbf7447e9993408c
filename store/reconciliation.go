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
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) (err error) {
		issues, err = reconcile(ctx, tx)
		return err
	})
	return issues, wrap("Reconciliation", err)
}

// reconcile lists the issues of tx's snapshot: ledger mismatches, then holds
// and codes, then waitlists, each by SKU and location.
func reconcile(ctx context.Context, tx pgx.Tx) ([]domain.ReconciliationIssue, error) {
	rows, err := tx.Query(ctx, `
			WITH ledger AS (
				SELECT sku_id, location_id, sum(on_hand_delta) AS on_hand, sum(reserved_delta) AS reserved,
				       sum(committed_delta) AS committed, sum(pending_supply_delta) AS pending_supply, sum(preordered_delta) AS preordered
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
				('committed', b.committed::bigint, coalesce(g.committed, 0)),
				('pending_supply', b.pending_supply::bigint, coalesce(g.pending_supply, 0)),
				('preordered', b.preordered::bigint, coalesce(g.preordered, 0))
			) AS c(col, have, want)
			WHERE have <> want
			ORDER BY s.code, l.code, col`)
	if err != nil {
		return nil, err
	}
	ledgerIssues, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.ReconciliationIssue, error) {
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
	if err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, holdsAndCodesCheck)
	if err != nil {
		return nil, err
	}
	holdIssues, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.ReconciliationIssue, error) {
		var i domain.ReconciliationIssue
		var have, want int64
		if err := r.Scan(&i.Kind, &i.SKU, &i.Location, &have, &want); err != nil {
			return i, err
		}
		i.Detail = fmt.Sprintf(holdIssueDetail[i.Kind], have, want)
		return i, nil
	})
	if err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, waitlistCheck)
	if err != nil {
		return nil, err
	}
	waitIssues, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.ReconciliationIssue, error) {
		var i domain.ReconciliationIssue
		var location *string
		if err := r.Scan(&i.Kind, &i.SKU, &location, &i.Detail); err != nil {
			return i, err
		}
		if location != nil {
			i.Location = *location
		}
		return i, nil
	})
	if err != nil {
		return nil, err
	}
	return append(append(ledgerIssues, holdIssues...), waitIssues...), nil
}

// holdsAndCodesCheck compares each balance with the rows it summarizes:
// reserved with the in-stock part of held lines, preordered with the
// pre-ordered part of held lines plus confirmed pre-orders still pending,
// committed with the units in hand for open order lines at on-shipment
// locations, and, for CODES SKUs, on_hand and reserved with the code rows.
const holdsAndCodesCheck = `
	WITH held AS (
		SELECT rl.sku_id, rl.location_id, sum(rl.quantity - rl.preorder_quantity) AS stock, sum(rl.preorder_quantity) AS preorder
		FROM reservation_lines rl JOIN reservations r ON r.id = rl.reservation_id
		WHERE r.status = 'held' GROUP BY 1, 2
	), pending AS (
		SELECT sku_id, location_id, sum(pending) AS pending FROM order_lines WHERE pending > 0 GROUP BY 1, 2
	), unshipped AS (
		SELECT ol.sku_id, ol.location_id, sum(` + inHandSQL + `) AS units
		FROM order_lines ol WHERE ` + unshippedSQL + ` GROUP BY 1, 2
	), code_counts AS (
		SELECT sku_id, location_id, count(*) FILTER (WHERE status IN ('available', 'held')) AS on_hand, count(*) FILTER (WHERE status = 'held') AS reserved
		FROM codes GROUP BY 1, 2
	)
	SELECT v.issue, s.code, l.code, have, want
	FROM balances b
	JOIN skus s ON s.id = b.sku_id
	JOIN locations l ON l.id = b.location_id
	LEFT JOIN held h ON h.sku_id = b.sku_id AND h.location_id = b.location_id
	LEFT JOIN pending p ON p.sku_id = b.sku_id AND p.location_id = b.location_id
	LEFT JOIN unshipped u ON u.sku_id = b.sku_id AND u.location_id = b.location_id
	LEFT JOIN code_counts c ON c.sku_id = b.sku_id AND c.location_id = b.location_id
	CROSS JOIN LATERAL (VALUES
		('reserved_vs_held_lines', b.reserved::bigint, coalesce(h.stock, 0)),
		('preordered_vs_preorders', b.preordered::bigint, coalesce(h.preorder, 0) + coalesce(p.pending, 0)),
		('committed_vs_open_orders', b.committed::bigint, coalesce(u.units, 0)),
		('on_hand_vs_codes', CASE WHEN s.kind = 'codes' THEN b.on_hand::bigint END, coalesce(c.on_hand, 0)),
		('reserved_vs_held_codes', CASE WHEN s.kind = 'codes' THEN b.reserved::bigint END, coalesce(c.reserved, 0))
	) AS v(issue, have, want)
	WHERE have IS NOT NULL AND have <> want
	ORDER BY s.code, l.code, v.issue`

// holdIssueDetail words each holdsAndCodesCheck issue for a person.
var holdIssueDetail = map[string]string{
	"reserved_vs_held_lines":   "reserved is %d but held reservation lines hold %d",
	"committed_vs_open_orders": "committed is %d but open order lines have %d in hand, unshipped",
	"preordered_vs_preorders":  "preordered is %d but held and pending pre-orders add up to %d",
	"on_hand_vs_codes":         "on_hand is %d but %d codes are available or held",
	"reserved_vs_held_codes":   "reserved is %d but %d codes are held",
}

// waitlistCheck reports waitlist entries out of step with the stock: an
// OFFERED entry whose reservation is not its own (for its checkout, under
// its offer key, of its quantity: one line at its location, or, for an
// entry without one, lines of the SKU at distinct locations), and a waiting
// entry that fits what is free where it waits (on a balance it waits on,
// or, without a location, summed over the SKU's balances) — every freeing path offers before it commits,
// and a join is refused while enough is free, so units free and owed to the
// line at once mean a path that frees without offering. An entry passed
// over for its checkout's fair-use caps (skipped_reason) may wait beside
// free units: they went on to others, and are a plain reserve's until
// units come back again.
const waitlistCheck = `
	SELECT 'waitlist_offer_mismatch', s.code, l.code,
	       'entry ' || w.id || ' is offered reservation ' || coalesce(w.reservation_id::text, 'none') || ', which is not a hold of its quantity for its checkout'
	FROM waitlist_entries w
	JOIN skus s ON s.id = w.sku_id
	LEFT JOIN locations l ON l.id = w.location_id
	LEFT JOIN reservations r ON r.id = w.reservation_id
	WHERE w.status = 'offered'
	  AND (r.id IS NULL OR r.checkout_id <> w.checkout_id OR r.request_key <> 'waitlist:' || w.id
	       OR (SELECT coalesce(sum(rl.quantity), 0) FROM reservation_lines rl WHERE rl.reservation_id = r.id) <> w.quantity
	       OR EXISTS (SELECT FROM reservation_lines rl WHERE rl.reservation_id = r.id
	                  AND (rl.sku_id <> w.sku_id OR rl.location_id <> coalesce(w.location_id, rl.location_id)))
	       OR (SELECT count(*) - count(DISTINCT rl.location_id) FROM reservation_lines rl WHERE rl.reservation_id = r.id) <> 0)
	UNION ALL
	SELECT 'waitlist_fits_free', s.code, l.code,
	       'entry ' || w.id || ' waits for ' || w.quantity || ' while ' || (b.on_hand - b.reserved - b.committed) || ' are free here'
	FROM waitlist_entries w
	JOIN balances b ON b.sku_id = w.sku_id AND (w.location_id IS NULL OR b.location_id = w.location_id)
	JOIN skus s ON s.id = b.sku_id
	JOIN locations l ON l.id = b.location_id
	WHERE w.status = 'waiting' AND w.expires_at > now() AND w.skipped_reason IS NULL AND b.on_hand - b.reserved - b.committed >= w.quantity
	UNION ALL
	SELECT 'waitlist_fits_free', s.code, NULL,
	       'entry ' || w.id || ' waits for ' || w.quantity || ' at any location while ' || f.free || ' are free across locations'
	FROM waitlist_entries w
	JOIN skus s ON s.id = w.sku_id
	CROSS JOIN LATERAL (SELECT coalesce(sum(greatest(b.on_hand - b.reserved - b.committed, 0)), 0) AS free FROM balances b WHERE b.sku_id = w.sku_id) f
	WHERE w.status = 'waiting' AND w.location_id IS NULL AND w.expires_at > now() AND w.skipped_reason IS NULL AND f.free >= w.quantity
	  AND NOT EXISTS (SELECT FROM balances b WHERE b.sku_id = w.sku_id AND b.on_hand - b.reserved - b.committed >= w.quantity)
	ORDER BY 2, 3, 1, 4`
