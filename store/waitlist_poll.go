package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// WaitlistCheckoutsChanged reads, for those of checkoutIDs with an entry
// changed at or after changedSince or a waiting entry whose deadline fell
// after deadlineSince (it reads EXPIRED before its expiry job runs), when
// their entries last changed; and the database's time of the read. It is
// the one fallback read per poll behind every waitlistChanged subscription
// of an instance (events.Broker): what a lost notification would otherwise
// never push. The unique index on (checkout_id, request_key) finds each
// checkout's entries.
func (s *Store) WaitlistCheckoutsChanged(ctx context.Context, checkoutIDs []string, changedSince, deadlineSince time.Time) ([]domain.WaitlistCheckoutChange, time.Time, error) {
	var out []domain.WaitlistCheckoutChange
	var at time.Time
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT checkout_id, max(updated_at),
			       bool_or(status = 'waiting' AND expires_at > $3 AND expires_at <= clock_timestamp())
			FROM waitlist_entries
			WHERE checkout_id = ANY($1)
			  AND (updated_at >= $2 OR (status = 'waiting' AND expires_at > $3 AND expires_at <= clock_timestamp()))
			GROUP BY checkout_id`,
			checkoutIDs, changedSince, deadlineSince)
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[domain.WaitlistCheckoutChange]); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT statement_timestamp()`).Scan(&at)
	})
	return out, at, wrap("WaitlistCheckoutsChanged", err)
}
