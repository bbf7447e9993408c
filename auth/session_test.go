package auth

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"inventory/domain"
)

// keysByHash is a KeyLookup over a fixed set of keys.
type keysByHash map[string]domain.APIKey

func (k keysByHash) APIKeyGetBySecretHash(_ context.Context, hash []byte) (*domain.APIKey, error) {
	for secret, key := range k {
		if bytes.Equal(HashAPISecret(secret), hash) {
			return &key, nil
		}
	}
	return nil, nil
}

// memSessions is a SessionStore in memory over keys, for the cookie logic;
// the root package's tests run the real one over PostgreSQL.
type memSessions struct {
	keys     keysByHash
	sessions map[string][]byte // session hash -> key hash
}

func (m *memSessions) AdminSessionCreate(ctx context.Context, keyHash, sessionHash []byte, _ time.Time) (*domain.APIKey, error) {
	k, _ := m.keys.APIKeyGetBySecretHash(ctx, keyHash)
	if k == nil || k.Role != domain.RoleAdmin {
		return nil, nil
	}
	m.sessions[string(sessionHash)] = keyHash
	return k, nil
}

func (m *memSessions) AdminSessionGet(ctx context.Context, sessionHash []byte) (*domain.APIKey, error) {
	keyHash, ok := m.sessions[string(sessionHash)]
	if !ok {
		return nil, nil
	}
	return m.keys.APIKeyGetBySecretHash(ctx, keyHash)
}

func (m *memSessions) AdminSessionRevoke(_ context.Context, sessionHash []byte) error {
	delete(m.sessions, string(sessionHash))
	return nil
}

// TestSessions: only an admin key signs in; the cookie authenticates until it
// expires, its key is gone, or a byte of it is changed; it never contains the
// key; and a cookie signed with another secret is refused.
func TestSessions(t *testing.T) {
	t.Parallel()
	keys := keysByHash{"inv_admin": {Name: "ops", Role: domain.RoleAdmin}, "inv_svc": {Name: "svc", Role: domain.RoleService}}
	store := &memSessions{keys: keys, sessions: map[string][]byte{}}
	a, b := []byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 32))
	s, err := NewSessions(store, time.Hour, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"inv_svc", "inv_unknown", "eyJ.jwt.token", ""} {
		if _, err := s.SignIn(context.Background(), bad, false); err != ErrNotAdminKey {
			t.Fatalf("sign in with %q: %v", bad, err)
		}
	}
	c, err := s.SignIn(context.Background(), "inv_admin", true)
	if err != nil || !c.Secure || !c.HttpOnly || strings.Contains(c.Value, "inv_admin") {
		t.Fatalf("cookie %+v, %v", c, err)
	}
	actor := func(s *Sessions, v string) domain.Actor {
		a, err := s.Actor(context.Background(), v)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := actor(s, c.Value); a.Role != domain.RoleAdmin || a.Name != "ops" {
		t.Fatalf("actor %+v", a)
	}
	tampered := []byte(c.Value)
	tampered[3] ^= 1
	if a := actor(s, string(tampered)); a.Role != domain.RoleAnonymous {
		t.Fatalf("tampered cookie: %+v", a)
	}
	other, _ := NewSessions(store, time.Hour, b)
	if a := actor(other, c.Value); a.Role != domain.RoleAnonymous {
		t.Fatalf("cookie from another secret: %+v", a)
	}
	rotating, _ := NewSessions(store, time.Hour, b, a)
	if a := actor(rotating, c.Value); a.Role != domain.RoleAdmin {
		t.Fatalf("cookie from a secret still in the ring: %+v", a)
	}
	later := *s
	later.now = func() time.Time { return time.Now().Add(time.Hour + time.Second) }
	if a := actor(&later, c.Value); a.Role != domain.RoleAnonymous || !strings.Contains(a.TokenProblem, "expired") {
		t.Fatalf("expired cookie: %+v", a)
	}
	copied := c.Value
	if _, err := s.SignOut(context.Background(), c.Value, false); err != nil {
		t.Fatal(err)
	}
	if a := actor(s, copied); a.Role != domain.RoleAnonymous || !strings.Contains(a.TokenProblem, "ended") {
		t.Fatalf("signed-out cookie: %+v", a)
	}
	c, _ = s.SignIn(context.Background(), "inv_admin", true)
	delete(keys, "inv_admin")
	if a := actor(s, c.Value); a.Role != domain.RoleAnonymous || !strings.Contains(a.TokenProblem, "ended") {
		t.Fatalf("revoked key: %+v", a)
	}
}
