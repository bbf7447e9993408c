package store_test

import (
	"crypto/rand"
	"crypto/sha256"
	"strings"
	"testing"

	"inventory/domain"
)

func newSecretHash(t *testing.T) []byte {
	t.Helper()
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(secret)
	return h[:]
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)

	requireKey := func(hash []byte, want *domain.APIKey) {
		t.Helper()
		got, err := b.Store.APIKeyGetBySecretHash(b.Ctx, hash)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want == nil && got != nil:
			t.Fatalf("want no live key, got %+v", got)
		case want != nil && (got == nil || *got != *want):
			t.Fatalf("got key %+v, want %+v", got, want)
		}
	}

	adminHash, serviceHash := newSecretHash(t), newSecretHash(t)
	if err := b.Store.APIKeyCreate(b.Ctx, "ops", domain.RoleAdmin, adminHash); err != nil {
		t.Fatal(err)
	}
	if err := b.Store.APIKeyCreate(b.Ctx, "checkout-backend", domain.RoleService, serviceHash); err != nil {
		t.Fatal(err)
	}
	requireKey(adminHash, &domain.APIKey{Name: "ops", Role: domain.RoleAdmin})
	requireKey(serviceHash, &domain.APIKey{Name: "checkout-backend", Role: domain.RoleService})
	requireKey(newSecretHash(t), nil)

	// One live key per name.
	requireCode(t, b.Store.APIKeyCreate(b.Ctx, "ops", domain.RoleService, newSecretHash(t)), domain.CodeAlreadyExists)

	requireKeyRows := func(want int) {
		t.Helper()
		var n int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM api_keys`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("%d api_keys rows, want %d", n, want)
		}
	}
	for _, bad := range []struct {
		name string
		role domain.Role
	}{
		{"x", "ROOT"}, {"x", ""}, {"x", domain.RoleCheckout}, {"x", domain.RoleAnonymous}, {"x", "admin"},
		{"", domain.RoleAdmin}, {strings.Repeat("k", 129), domain.RoleAdmin},
	} {
		requireCode(t, b.Store.APIKeyCreate(b.Ctx, bad.name, bad.role, newSecretHash(t)), domain.CodeInvalidInput)
	}
	requireKeyRows(2)

	// Revocation takes effect at once, and only for that key.
	if err := b.Store.APIKeyRevoke(b.Ctx, "ops"); err != nil {
		t.Fatal(err)
	}
	requireKey(adminHash, nil)
	requireKey(serviceHash, &domain.APIKey{Name: "checkout-backend", Role: domain.RoleService})
	requireCode(t, b.Store.APIKeyRevoke(b.Ctx, "ops"), domain.CodeNotFound)
	requireCode(t, b.Store.APIKeyRevoke(b.Ctx, "never-existed"), domain.CodeNotFound)

	// The name is free again; the revoked row stays for audit.
	newHash := newSecretHash(t)
	if err := b.Store.APIKeyCreate(b.Ctx, "ops", domain.RoleService, newHash); err != nil {
		t.Fatalf("re-creating a revoked name: %v", err)
	}
	requireKey(newHash, &domain.APIKey{Name: "ops", Role: domain.RoleService})
	requireKey(adminHash, nil)
	requireKeyRows(3)
	var revoked int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM api_keys WHERE name = 'ops' AND revoked_at IS NOT NULL`).Scan(&revoked); err != nil {
		t.Fatal(err)
	}
	if revoked != 1 {
		t.Fatalf("%d revoked rows named ops, want 1", revoked)
	}
	// And the new key can be revoked in turn.
	if err := b.Store.APIKeyRevoke(b.Ctx, "ops"); err != nil {
		t.Fatal(err)
	}
	requireKey(newHash, nil)
}
