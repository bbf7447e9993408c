package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"inventory/domain"
)

// SessionCookie is the /admin dashboard's session cookie.
const SessionCookie = "inventory_admin"

// CSRFHeader must accompany a state-changing request authenticated by the
// session cookie (unless its Origin is the server's own): a cross-site form
// cannot set a custom header, and a cross-site fetch that sets one needs a
// CORS preflight this server never grants.
const CSRFHeader = "X-Inventory-CSRF"

// Sessions issues and verifies admin session cookies, so a browser holds a
// short-lived, HttpOnly cookie instead of the admin key itself. The cookie
// names the key by the hash of its secret (what the key store already holds)
// and is signed with the token secret; every request re-checks that hash
// through the key lookup (the KeyCache), so revoking the key ends its
// sessions within the cache's MaxAge.
type Sessions struct {
	Keys KeyLookup
	TTL  time.Duration
	mac  []byte
	now  func() time.Time
}

// NewSessions returns sessions signed with a key derived from the token
// secret, so a session cookie can never pass for a checkout token or back.
func NewSessions(secret []byte, keys KeyLookup, ttl time.Duration) (*Sessions, error) {
	if len(secret) < MinSecretLength {
		return nil, fmt.Errorf("auth: token secret must be at least %d bytes, got %d", MinSecretLength, len(secret))
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("inventory admin session v1"))
	return &Sessions{Keys: keys, TTL: ttl, mac: m.Sum(nil), now: time.Now}, nil
}

// ErrNotAdminKey is SignIn's answer to a secret that is not a live admin key.
var ErrNotAdminKey = errors.New("not a live admin key")

// SignIn checks that secret is a live admin key and returns the cookie to set.
// secure marks it Secure (the request came over TLS).
func (s *Sessions) SignIn(ctx context.Context, secret string, secure bool) (*http.Cookie, error) {
	secret = strings.TrimSpace(secret)
	if !isAPISecret(secret) {
		return nil, ErrNotAdminKey
	}
	hash := HashAPISecret(secret)
	key, err := s.Keys.APIKeyGetBySecretHash(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("auth: look up key: %w", err)
	}
	if key == nil || key.Role != domain.RoleAdmin {
		return nil, ErrNotAdminKey
	}
	expires := s.now().Add(s.TTL)
	payload := base64.RawURLEncoding.EncodeToString(hash) + "." + strconv.FormatInt(expires.Unix(), 10)
	return &http.Cookie{
		Name: SessionCookie, Value: payload + "." + s.sign(payload), Path: "/",
		Expires: expires, MaxAge: int(s.TTL.Seconds()),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}, nil
}

// SignOut returns a cookie that deletes the session cookie.
func SignOut(secure bool) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}

// Actor resolves a session cookie value to its admin actor; anonymous (with
// TokenProblem) if it is forged, expired, or its key is revoked or no longer
// an admin's. Only a key store failure is an error.
func (s *Sessions) Actor(ctx context.Context, value string) (domain.Actor, error) {
	payload, sig, ok := cutLast(value, ".")
	if !ok || subtle.ConstantTimeCompare([]byte(sig), []byte(s.sign(payload))) != 1 {
		return rejected("invalid admin session: sign in again"), nil
	}
	hash64, exp, _ := strings.Cut(payload, ".")
	expires, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || s.now().Unix() >= expires {
		return rejected("admin session expired: sign in again"), nil
	}
	hash, err := base64.RawURLEncoding.DecodeString(hash64)
	if err != nil {
		return rejected("invalid admin session: sign in again"), nil
	}
	key, err := s.Keys.APIKeyGetBySecretHash(ctx, hash)
	if err != nil {
		return domain.Actor{}, fmt.Errorf("auth: look up key: %w", err)
	}
	if key == nil || key.Role != domain.RoleAdmin {
		return rejected("the admin key of this session was revoked: sign in again"), nil
	}
	return domain.Actor{Role: key.Role, Name: key.Name}, nil
}

func (s *Sessions) sign(payload string) string {
	m := hmac.New(sha256.New, s.mac)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

// cookieMayAct reports whether a request may be authenticated by the
// session cookie alone. A browser sends the cookie with any request to this
// host (SameSite=Strict narrows that to same-site pages), so:
//   - a WebSocket upgrade needs an Origin equal to its Host: browsers send
//     Origin on every upgrade, and a cross-site page could otherwise open a
//     socket carrying the admin's cookie (cross-site WebSocket hijacking);
//   - a safe request (GET, HEAD) changes nothing (gqlgen refuses mutations
//     over GET) and is allowed;
//   - anything else needs the CSRF header or a same-origin Origin.
func cookieMayAct(r *http.Request) bool {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return sameOrigin(r)
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	return r.Header.Get(CSRFHeader) != "" || sameOrigin(r)
}

// SameOriginOrCSRF reports whether a cookie-carrying request was sent by this
// server's own page: the CSRF header, or an Origin naming this host.
func SameOriginOrCSRF(r *http.Request) bool {
	return r.Header.Get(CSRFHeader) != "" || sameOrigin(r)
}

// sameOrigin: the Origin header names the host the request was sent to.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return origin == scheme+r.Host
}
