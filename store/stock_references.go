package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// stockAct is one receipt or adjustment as its reference keys it (see
// migrations/00013_stock_references.sql): what a retry must repeat exactly.
type stockAct struct {
	kind      string // "received" or "adjusted": separate keys
	reference string
	delta     int
	reason    *string // adjustments only
}

// claimReference records act under its (sku, location, kind, reference) key
// before the balance is touched, and says whether the key already names the
// same act (a replay: the caller changes nothing and answers the balance).
// The primary key makes a concurrent twin, on any instance, wait here until
// the first commits (then it is a replay) or rolls back (then it goes on as
// the first). The same key with another delta or reason is
// IDEMPOTENCY_KEY_REUSED. Nothing is locked while waiting, so the wait
// cannot join a cycle with the balance lock taken after it.
func claimReference(ctx context.Context, tx pgx.Tx, k balanceKey, sku, location string, act stockAct) (replay bool, err error) {
	tag, err := tx.Exec(ctx, `
		INSERT INTO stock_references (sku_id, location_id, kind, reference, delta, reason)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT DO NOTHING`, k.skuID, k.locationID, act.kind, act.reference, act.delta, act.reason)
	if err != nil || tag.RowsAffected() == 1 {
		return false, err
	}
	var delta int
	var reason *string
	if err := tx.QueryRow(ctx, `SELECT delta, reason FROM stock_references WHERE sku_id = $1 AND location_id = $2 AND kind = $3 AND reference = $4`,
		k.skuID, k.locationID, act.kind, act.reference).Scan(&delta, &reason); err != nil {
		return false, err
	}
	if delta == act.delta && deref(reason) == deref(act.reason) {
		return true, nil
	}
	what := fmt.Sprintf("a receipt of %d", delta)
	if act.kind == "adjusted" {
		what = fmt.Sprintf("an adjustment by %d (reason %s)", delta, strconv.Quote(deref(reason)))
	}
	return false, &domain.Error{Code: domain.CodeIdempotencyKeyReused, SKU: sku, Field: []string{"input", "reference"},
		Message: "reference " + strconv.Quote(act.reference) + " was already used at " + sku + "@" + location + " for " + what +
			"; a retry must repeat it exactly, a new act needs a new reference"}
}
