package store

import (
	"context"
	"time"
)

// CodeRevealsPrune deletes at most limit code-reveal audit rows recorded
// longer than keep ago (by the database's clock), oldest first, in one short
// transaction, and returns how many it deleted. The retention job calls it
// in a loop so that no single statement holds locks on, or writes WAL for,
// an unbounded number of rows.
func (s *Store) CodeRevealsPrune(ctx context.Context, keep time.Duration, limit int) (int, error) {
	n, err := s.pruneOlder(ctx, `DELETE FROM code_reveals WHERE id IN (
		SELECT id FROM code_reveals WHERE at < now() - make_interval(secs => $1) ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED)`, keep, limit)
	return n, wrap("CodeRevealsPrune", err)
}

// WebhookDeliveriesPrune deletes at most limit webhook delivery log rows
// (attempts, test sends included) older than keep, oldest first, in one
// short transaction, and returns how many it deleted. An attempt number
// counts the rows still kept for its webhook-id, so an event still retried
// after keep (an endpoint paused for longer and resumed) counts from 1 again.
func (s *Store) WebhookDeliveriesPrune(ctx context.Context, keep time.Duration, limit int) (int, error) {
	n, err := s.pruneOlder(ctx, `DELETE FROM webhook_deliveries WHERE id IN (
		SELECT id FROM webhook_deliveries WHERE at < now() - make_interval(secs => $1) ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED)`, keep, limit)
	return n, wrap("WebhookDeliveriesPrune", err)
}

// pruneOlder runs one bounded DELETE (a single statement: its own
// transaction). SKIP LOCKED: rows another pass is deleting are left to it.
func (s *Store) pruneOlder(ctx context.Context, sql string, keep time.Duration, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, sql, keep.Seconds(), limit)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
