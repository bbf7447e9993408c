package store

import (
	"context"
	"errors"
)

// WALPosition is the primary's current WAL position, in bytes since 0/0:
// what a standby must have replayed to show everything committed so far.
func (s *Store) WALPosition(ctx context.Context) (int64, error) {
	var lsn int64
	err := s.pool.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0')::int8`).Scan(&lsn)
	return lsn, wrap("WALPosition", err)
}

// WALReplayed is how far a streaming standby has replayed the primary's
// WAL, in bytes since 0/0; an error on a database that is not a standby
// (a replica URL that points at a primary would otherwise look current).
func (s *Store) WALReplayed(ctx context.Context) (int64, error) {
	var standby bool
	var lsn int64
	err := s.pool.QueryRow(ctx, `SELECT pg_is_in_recovery(), coalesce((pg_last_wal_replay_lsn() - '0/0')::int8, 0)`).Scan(&standby, &lsn)
	if err == nil && !standby {
		err = errors.New("not a standby (pg_is_in_recovery() is false)")
	}
	return lsn, wrap("WALReplayed", err)
}
