package store

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// checkoutLockSpace is the first key of the advisory locks that serialize a
// checkout's new holds while its fair-use limits are checked (the second is
// a hash of the checkout id; a collision only serializes two checkouts).
const checkoutLockSpace = 0x1f8a

// lockCheckoutsStatement takes the locks of checkouts $1 ($2 is
// checkoutLockSpace), waiting for them, in the one order every transaction
// that waits for several takes them in.
const lockCheckoutsStatement = `SELECT count(pg_advisory_xact_lock($2, hashtext(c))) FROM (SELECT c FROM unnest($1::text[]) AS c ORDER BY c) o`

// checkoutUsage is what a checkout's live holds hold.
type checkoutUsage struct {
	holds int
	units map[int64]int // by SKU id
}

// lockCheckoutUsage locks the checkouts, in sorted order (the one order of
// every reserve, taken after its reservation rows are inserted and before any
// balance row is locked), and returns what each one's live holds hold, with
// the ids of the SKU codes in skus (for fairUseError; an unknown code is
// absent). This transaction's own new reservations have no lines yet, so
// they are not counted.
//
// Why a lock: two reserves of one checkout at once would each count the other
// out and together pass a limit. With it the second counts after the first
// committed or rolled back. The count runs in a statement after the lock is
// granted, so in READ COMMITTED it sees what the first committed; both go in
// one round trip (in a batch's, with its other statements).
func lockCheckoutUsage(ctx context.Context, tx pgx.Tx, checkouts, skus []string) (map[string]*checkoutUsage, map[string]int64, error) {
	b := &pgx.Batch{}
	usage := queueCheckoutUsage(b, checkouts)
	ids := map[string]int64{}
	b.Queue(`SELECT code, id FROM skus WHERE code = ANY($1)`, skus).Query(func(rows pgx.Rows) error {
		var code string
		var id int64
		_, err := pgx.ForEachRow(rows, []any{&code, &id}, func() error { ids[code] = id; return nil })
		return err
	})
	return usage, ids, tx.SendBatch(ctx, b).Close()
}

// queueCheckoutUsage queues lockCheckoutUsage's two statements on b; the map
// it returns is filled when b's results are read (BatchResults.Close).
//
// Every batch of checkout-token reserves pays for the count, so it reads only
// what the limits need: the checkouts' held rows through
// reservations_checkout_held_idx (one descent per checkout, its live holds
// alone) and one index lookup per live hold for its lines, with units keyed
// by SKU id, which the callers know for the SKUs they ask about (a batch from
// its balance rows), rather than joining skus for each line's code, or
// walking the whole due-holds index and then three lookups per live hold,
// which is several times the buffer reads per batch. Exactness is the
// lock's and the statement order's, not the plan's: the same rows are
// counted whichever way they are found.
func queueCheckoutUsage(b *pgx.Batch, checkouts []string) map[string]*checkoutUsage {
	checkouts = slices.Compact(slices.Sorted(slices.Values(checkouts)))
	usage := make(map[string]*checkoutUsage, len(checkouts))
	for _, c := range checkouts {
		usage[c] = &checkoutUsage{units: map[int64]int{}}
	}
	b.Queue(lockCheckoutsStatement, checkouts, checkoutLockSpace)
	// The checkouts' live holds and their lines: the statement is the
	// function's (migration 00019), planned once per server connection.
	b.Queue(`SELECT * FROM inventory_checkout_holds($1::text[])`, checkouts).
		Query(func(rows pgx.Rows) error {
			seen := map[string]bool{}
			var checkout, id string
			var sku int64
			var quantity int
			_, err := pgx.ForEachRow(rows, []any{&checkout, &id, &sku, &quantity}, func() error {
				u := usage[checkout]
				if !seen[id] {
					seen[id] = true
					u.holds++
				}
				u.units[sku] += quantity
				return nil
			})
			return err
		})
	return usage
}

// fairUseError says why a checkout with usage u may not also hold lines, or
// nil if it may. skuIDs maps the lines' SKU codes to ids; a code without one
// (an unknown SKU, refused later by the claim) has no units held.
func fairUseError(limits *domain.FairUse, u *checkoutUsage, lines []domain.ReserveLine, skuIDs map[string]int64) error {
	if err := limits.CheckHolds(u.holds); err != nil {
		return err
	}
	units, first := domain.UnitsBySKU(lines)
	for i, l := range lines {
		if first[l.SKU] == i {
			held := 0
			if id, ok := skuIDs[l.SKU]; ok {
				held = u.units[id]
			}
			if err := limits.CheckUnits(i, l.SKU, held, units[l.SKU]); err != nil {
				return err
			}
		}
	}
	return nil
}
