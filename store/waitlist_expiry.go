package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// WaitlistExpire expires one entry at its deadline if it is still waiting
// (expired says it did); its River job calls it. Before the deadline it
// returns the deadline (notBefore) and changes nothing; an entry that already
// ended (offered, left, expired by a set) is not an error: the job is done.
func (s *Store) WaitlistExpire(ctx context.Context, id string) (notBefore *time.Time, expired bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		notBefore, expired = nil, false
		var status string
		var expiresAt time.Time
		err := tx.QueryRow(ctx, `SELECT status, expires_at FROM waitlist_entries WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&status, &expiresAt)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && status != "waiting" {
			return nil
		}
		if err != nil {
			return err
		}
		// After the lock, as for holds (dueNow).
		due, err := dueNow(ctx, tx, expiresAt)
		if err != nil {
			return err
		}
		if !due {
			notBefore = &expiresAt
			return nil
		}
		expired = true
		if _, err = tx.Exec(ctx, `UPDATE waitlist_entries SET status = 'expired', ended_at = now(), updated_at = now() WHERE id = $1`, id); err != nil {
			return err
		}
		return notifyWaitlist(ctx, tx, id)
	})
	return notBefore, expired, wrap("WaitlistExpire", err)
}

// WaitlistExpireDue expires up to limit waiting entries whose TTL has passed
// (set-based, skipping rows another transaction has locked: a leave or an
// offer has them) and returns how many. Offers and reads already treat a
// waiting entry past its deadline as expired; this makes it so in the table.
func (s *Store) WaitlistExpireDue(ctx context.Context, limit int) (int, error) {
	// Each expired entry's checkout is notified (notifyWaitlist) in the same
	// statement.
	var n int
	err := s.pool.QueryRow(ctx, `
		WITH expired AS (
			UPDATE waitlist_entries SET status = 'expired', ended_at = now(), updated_at = now()
			WHERE id IN (SELECT id FROM waitlist_entries
			             WHERE status = 'waiting' AND expires_at <= clock_timestamp()
			             ORDER BY expires_at LIMIT $1
			             FOR NO KEY UPDATE SKIP LOCKED)
			RETURNING checkout_id)
		SELECT coalesce(sum(n), 0)::int FROM (
			SELECT count(*) AS n, pg_notify('`+domain.WaitlistChannel+`', checkout_id) FROM expired GROUP BY checkout_id) t`, limit).Scan(&n)
	if err != nil {
		return 0, wrap("WaitlistExpireDue", err)
	}
	return n, nil
}
