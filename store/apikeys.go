package store

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// APIKeyCreate stores a new key under name; ALREADY_EXISTS while a live key has
// that name (revoke it first).
func (s *Store) APIKeyCreate(ctx context.Context, name string, role domain.Role, secretHash []byte) error {
	if err := domain.CheckIdentifier([]string{"name"}, name); err != nil {
		return err
	}
	if role != domain.RoleAdmin && role != domain.RoleService {
		return domain.InvalidInput([]string{"role"}, "role must be admin or service")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO api_keys (name, role, secret_hash) VALUES ($1, $2, $3)`,
		name, strings.ToLower(string(role)), secretHash)
	if pgCode(err) == pgUniqueViolation {
		return &domain.Error{Code: domain.CodeAlreadyExists, Message: "a live key named " + name + " already exists; revoke it first", Field: []string{"name"}}
	}
	return wrap("APIKeyCreate", err)
}

// APIKeyRevoke revokes the live key called name; NOT_FOUND if there is none.
// The row is kept (revoked_at set) so an audit can still name the key.
func (s *Store) APIKeyRevoke(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL`, name)
	if err != nil {
		return wrap("APIKeyRevoke", err)
	}
	if tag.RowsAffected() == 0 {
		return &domain.Error{Code: domain.CodeNotFound, Message: "no live key named " + name, Field: []string{"name"}}
	}
	return nil
}

// APIKeySecretHashesLive lists the secret hashes of every live key: the
// few keys an instance serves, so that it can tell a valid key from a
// guessed one without a read per guess (auth.KeyCache.KeyKnown).
func (s *Store) APIKeySecretHashesLive(ctx context.Context) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT secret_hash FROM api_keys WHERE revoked_at IS NULL`)
	if err != nil {
		return nil, wrap("APIKeySecretHashesLive", err)
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, wrap("APIKeySecretHashesLive", err)
	}
	return hashes, nil
}

// APIKeyGetBySecretHash finds the live key with this secret hash, or nil. It is
// read on every authenticated request, so revocation takes effect at once on
// every instance.
func (s *Store) APIKeyGetBySecretHash(ctx context.Context, secretHash []byte) (*domain.APIKey, error) {
	var k domain.APIKey
	var role string
	err := s.pool.QueryRow(ctx, `SELECT name, role FROM api_keys WHERE secret_hash = $1 AND revoked_at IS NULL`, secretHash).
		Scan(&k.Name, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("APIKeyGetBySecretHash", err)
	}
	k.Role = domain.Role(strings.ToUpper(role))
	return &k, nil
}
