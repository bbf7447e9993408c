package store

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

var _ domain.WaitlistFeed = (*Store)(nil)

// notifyWaitlist tells waitlistChanged subscribers (every instance's broker
// listens on domain.WaitlistChannel) that these entries' checkouts have
// changed entries. NOTIFY is transactional: delivered at commit, dropped on
// rollback, and repeated payloads of one transaction arrive once. Waitlist
// status changes are rare beside reserves, so one statement here is cheap;
// offers notify inside offerStatement instead, without a round trip.
func notifyWaitlist(ctx context.Context, tx pgx.Tx, entryIDs ...string) error {
	_, err := tx.Exec(ctx, `
		SELECT pg_notify('`+domain.WaitlistChannel+`', checkout_id)
		FROM (SELECT DISTINCT checkout_id FROM waitlist_entries WHERE id = ANY($1::uuid[])) c`, entryIDs)
	return err
}

// WaitlistEntriesForCheckout reads a checkout's entries that are waiting or
// were changed at or after since (nil: WaitlistChangeWindow before now), as loadEntry reads one (a waiting entry
// past its deadline reads EXPIRED), in join order, without their positions
// (Position nil): every subscription runs this every WaitlistFeedPoll, and
// counting the entries ahead of each in a long line is a walk through it;
// WaitlistEntryGet reads the position of the few entries that changed. The
// unique index on (checkout_id, request_key) finds the checkout's entries.
func (s *Store) WaitlistEntriesForCheckout(ctx context.Context, checkoutID string, since *time.Time) ([]domain.WaitlistEntry, time.Time, error) {
	var out []domain.WaitlistEntry
	var at time.Time
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, `
			SELECT w.id, w.checkout_id, w.request_key, s.code, l.code, w.quantity,
			       CASE WHEN w.status = 'waiting' AND w.expires_at <= clock_timestamp() THEN 'expired' ELSE w.status END,
			       w.joined_at, w.expires_at, w.reservation_id, w.offer_ttl_seconds, `+entrySkipColumns+`, statement_timestamp()
			FROM waitlist_entries w
			JOIN skus s ON s.id = w.sku_id
			LEFT JOIN locations l ON l.id = w.location_id
			WHERE w.checkout_id = $1 AND (w.status = 'waiting' OR w.updated_at >= coalesce($2, statement_timestamp() - make_interval(secs => $4)))
			ORDER BY w.seq
			LIMIT $3`, checkoutID, since, domain.MaxWaitlistFeed, domain.WaitlistChangeWindow.Seconds())
		if err != nil {
			return err
		}
		for rows.Next() {
			var e domain.WaitlistEntry
			var status string
			var skip entrySkip
			if err := rows.Scan(&e.ID, &e.CheckoutID, &e.RequestKey, &e.SKU, &e.Location, &e.Quantity, &status,
				&e.JoinedAt, &e.ExpiresAt, &e.ReservationID, &e.OfferTTLSeconds, &skip.reason, &skip.maxHolds, &skip.maxUnits, &at); err != nil {
				return err
			}
			e.Status = domain.WaitlistStatus(strings.ToUpper(status))
			e.SkippedReason = skip.text(e.SKU)
			out = append(out, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			return tx.QueryRow(ctx, `SELECT statement_timestamp()`).Scan(&at)
		}
		return nil
	})
	return out, at, wrap("WaitlistEntriesForCheckout", err)
}
