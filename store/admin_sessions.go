package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// adminSessionKeep is how long an expired session row stays (for audit)
// before a sign-in deletes it.
const adminSessionKeep = 24 * time.Hour

// AdminSessionCreate records a session for the live admin key whose secret
// hashes to keyHash and returns that key; nil (and nothing recorded) if there
// is none. It also deletes sessions that expired more than adminSessionKeep
// ago, so the table holds about one TTL's worth of sign-ins.
func (s *Store) AdminSessionCreate(ctx context.Context, keyHash, sessionHash []byte, expires time.Time) (*domain.APIKey, error) {
	var k *domain.APIKey
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		k = nil
		var name string
		err := tx.QueryRow(ctx, `
			WITH k AS (SELECT id, name FROM api_keys WHERE secret_hash = $1 AND role = 'admin' AND revoked_at IS NULL),
			s AS (INSERT INTO admin_sessions (id_hash, api_key_id, expires_at) SELECT $2, id, $3 FROM k)
			SELECT name FROM k`, keyHash, sessionHash, expires).Scan(&name)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		k = &domain.APIKey{Name: name, Role: domain.RoleAdmin}
		_, err = tx.Exec(ctx, `DELETE FROM admin_sessions WHERE expires_at < now() - make_interval(secs => $1)`, adminSessionKeep.Seconds())
		return err
	})
	if err != nil {
		return nil, wrap("AdminSessionCreate", err)
	}
	return k, nil
}

// AdminSessionGet returns the key of a live session (not signed out, not
// expired, its key live and still an admin's), or nil.
func (s *Store) AdminSessionGet(ctx context.Context, sessionHash []byte) (*domain.APIKey, error) {
	var k domain.APIKey
	var role string
	err := s.pool.QueryRow(ctx, `
		SELECT k.name, k.role FROM admin_sessions s JOIN api_keys k ON k.id = s.api_key_id
		WHERE s.id_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now() AND k.revoked_at IS NULL`,
		sessionHash).Scan(&k.Name, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("AdminSessionGet", err)
	}
	k.Role = domain.Role(strings.ToUpper(role))
	return &k, nil
}

// AdminSessionRevoke ends a session: signing out. Ending one already ended
// (or unknown) changes nothing.
func (s *Store) AdminSessionRevoke(ctx context.Context, sessionHash []byte) error {
	_, err := s.pool.Exec(ctx, `UPDATE admin_sessions SET revoked_at = now() WHERE id_hash = $1 AND revoked_at IS NULL`, sessionHash)
	return wrap("AdminSessionRevoke", err)
}
