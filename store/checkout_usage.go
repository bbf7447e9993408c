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

// checkoutUsage is what a checkout's live holds hold.
type checkoutUsage struct {
	holds int
	units map[string]int // by SKU code
}

// lockCheckoutUsage locks the checkouts, in sorted order (the one order of
// every reserve, taken after its reservation rows are inserted and before any
// balance row is locked), and returns what each one's live holds hold. This
// transaction's own new reservations have no lines yet, so they are not
// counted.
//
// Why a lock: two reserves of one checkout at once would each count the other
// out and together pass a limit. With it the second counts after the first
// committed or rolled back. The count runs in a statement after the lock is
// granted, so in READ COMMITTED it sees what the first committed; both go in
// one round trip (in a batch's, with its other statements).
func lockCheckoutUsage(ctx context.Context, tx pgx.Tx, checkouts []string) (map[string]*checkoutUsage, error) {
	b := &pgx.Batch{}
	usage := queueCheckoutUsage(b, checkouts)
	return usage, tx.SendBatch(ctx, b).Close()
}

// queueCheckoutUsage queues lockCheckoutUsage's two statements on b; the map
// it returns is filled when b's results are read (BatchResults.Close).
func queueCheckoutUsage(b *pgx.Batch, checkouts []string) map[string]*checkoutUsage {
	checkouts = slices.Compact(slices.Sorted(slices.Values(checkouts)))
	usage := make(map[string]*checkoutUsage, len(checkouts))
	for _, c := range checkouts {
		usage[c] = &checkoutUsage{units: map[string]int{}}
	}
	b.Queue(`SELECT count(pg_advisory_xact_lock($2, hashtext(c))) FROM (SELECT c FROM unnest($1::text[]) AS c ORDER BY c) o`,
		checkouts, checkoutLockSpace)
	b.Queue(`
		SELECT r.checkout_id, r.id, s.code, l.quantity
		FROM reservations r
		JOIN reservation_lines l ON l.reservation_id = r.id
		JOIN skus s ON s.id = l.sku_id
		WHERE r.checkout_id = ANY($1) AND r.status = 'held' AND r.expires_at > clock_timestamp()`, checkouts).
		Query(func(rows pgx.Rows) error {
			seen := map[string]bool{}
			var checkout, id, sku string
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
// nil if it may.
func fairUseError(limits *domain.FairUse, u *checkoutUsage, lines []domain.ReserveLine) error {
	if err := limits.CheckHolds(u.holds); err != nil {
		return err
	}
	units, first := domain.UnitsBySKU(lines)
	for i, l := range lines {
		if first[l.SKU] == i {
			if err := limits.CheckUnits(i, l.SKU, u.units[l.SKU], units[l.SKU]); err != nil {
				return err
			}
		}
	}
	return nil
}
