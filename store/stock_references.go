package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// Idempotency keys of stock changes, where the caller asked for them: a
// receipt's reference names one receipt (stock_references), an adjustment is
// keyed only by its optional requestKey (stock_adjustment_keys; see
// migrations/00021_stock_adjustment_keys.sql).
//
// Each claim records its key before the balance is touched and says whether
// the key already names the same act (a replay: the caller changes nothing
// and answers the balance). The primary key makes a concurrent twin, on any
// instance, wait in its INSERT until the first commits (then it is a replay)
// or rolls back (then it goes on as the first). The same key with other
// inputs is IDEMPOTENCY_KEY_REUSED. Nothing is locked while waiting, so the
// wait cannot join a cycle with the balance lock taken after it.

// claimReceipt claims in's (sku, location, reference) for a receipt of
// in.Quantity.
func claimReceipt(ctx context.Context, tx pgx.Tx, k balanceKey, in domain.ReceiveStockInput) (replay bool, err error) {
	tag, err := tx.Exec(ctx, `
		INSERT INTO stock_references (sku_id, location_id, reference, delta)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT DO NOTHING`, k.skuID, k.locationID, in.Reference, in.Quantity)
	if err != nil || tag.RowsAffected() == 1 {
		return false, err
	}
	var quantity int
	if err := tx.QueryRow(ctx, `SELECT delta FROM stock_references WHERE sku_id = $1 AND location_id = $2 AND reference = $3`,
		k.skuID, k.locationID, in.Reference).Scan(&quantity); err != nil {
		return false, err
	}
	if quantity == in.Quantity {
		return true, nil
	}
	return false, &domain.Error{Code: domain.CodeIdempotencyKeyReused, SKU: in.SKU, Field: []string{"input", "reference"},
		Message: fmt.Sprintf("this reference already names a receipt of %d at %s@%s; a retry must repeat it exactly, another delivery needs a reference of its own (its delivery note)",
			quantity, in.SKU, in.Location)}
}

// claimAdjustment claims in's (sku, location, requestKey) for an adjustment
// with in's delta, reason, reference and expectedOnHand. in.RequestKey must
// be set.
func claimAdjustment(ctx context.Context, tx pgx.Tx, k balanceKey, in domain.AdjustStockInput) (replay bool, err error) {
	tag, err := tx.Exec(ctx, `
		INSERT INTO stock_adjustment_keys (sku_id, location_id, request_key, delta, reason, reference, expected_on_hand)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT DO NOTHING`, k.skuID, k.locationID, *in.RequestKey, in.Delta, in.Reason, in.Reference, in.ExpectedOnHand)
	if err != nil || tag.RowsAffected() == 1 {
		return false, err
	}
	var was domain.AdjustStockInput
	if err := tx.QueryRow(ctx, `
		SELECT delta, reason, reference, expected_on_hand FROM stock_adjustment_keys
		WHERE sku_id = $1 AND location_id = $2 AND request_key = $3`,
		k.skuID, k.locationID, *in.RequestKey).Scan(&was.Delta, &was.Reason, &was.Reference, &was.ExpectedOnHand); err != nil {
		return false, err
	}
	var differ []string
	if was.Delta != in.Delta {
		differ = append(differ, fmt.Sprintf("delta %d", was.Delta))
	}
	if was.Reason != in.Reason {
		differ = append(differ, "reason "+strconv.Quote(was.Reason))
	}
	if was.Reference != in.Reference {
		differ = append(differ, "another reference")
	}
	if !sameInt(was.ExpectedOnHand, in.ExpectedOnHand) {
		expected := "no expectedOnHand"
		if was.ExpectedOnHand != nil {
			expected = fmt.Sprintf("expectedOnHand %d", *was.ExpectedOnHand)
		}
		differ = append(differ, expected)
	}
	if len(differ) == 0 {
		return true, nil
	}
	return false, &domain.Error{Code: domain.CodeIdempotencyKeyReused, SKU: in.SKU, Field: []string{"input", "requestKey"},
		Message: fmt.Sprintf("this requestKey already names an adjustment at %s@%s with %s; a retry must repeat it exactly, a new adjustment needs a new requestKey",
			in.SKU, in.Location, strings.Join(differ, ", "))}
}

func sameInt(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
