package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
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

// CSRFHeader must accompany every request authenticated by the session
// cookie, reads included (or the request must otherwise prove it comes from
// the server's own origin, FromDashboard): a cross-site form cannot set a
// custom header, and a cross-origin fetch that sets one needs a CORS
// preflight this server never grants.
const CSRFHeader = "X-Inventory-CSRF"

// SessionStore keeps the server-side record of admin sessions, so signing
// out ends a session at once on every instance sharing the database (a
// copied cookie is worthless after sign-out), and revoking the admin key
// ends its sessions on the next request. store.Store is one.
type SessionStore interface {
	// AdminSessionCreate records a session for the live admin key whose
	// secret hashes to keyHash; nil (and no session) if there is none.
	AdminSessionCreate(ctx context.Context, keyHash, sessionHash []byte, expires time.Time) (*domain.APIKey, error)
	// AdminSessionGet returns the admin key of a live session: not
	// signed out, not expired, its key neither revoked nor demoted; nil
	// otherwise.
	AdminSessionGet(ctx context.Context, sessionHash []byte) (*domain.APIKey, error)
	// AdminSessionRevoke ends a session (signing out).
	AdminSessionRevoke(ctx context.Context, sessionHash []byte) error
}

// Sessions issues and verifies admin session cookies, so a browser holds a
// short-lived, HttpOnly cookie instead of the admin key itself. The cookie
// holds a random session id (the store keeps only its hash), its expiry and
// the id of the token key that signed it:
//
//	<kid>.<session id, base64url>.<unix expiry>.<HMAC-SHA256, base64url>
//
// The signature lets a forged cookie be refused without a database read;
// every genuine one is then looked up in the SessionStore on every request
// (no cache: sign-out must hold at once everywhere). Cookies signed by any
// key of the ring verify, so rotating INVENTORY_TOKEN_SECRET signs nobody
// out while the old secret stays listed.
type Sessions struct {
	Store SessionStore
	TTL   time.Duration
	keys  []sessionKey // keys[0] signs
	now   func() time.Time
}

type sessionKey struct {
	id  string
	mac []byte
}

// NewSessions returns sessions signed with keys derived from the token
// secrets (the first signs, all verify), so a session cookie can never pass
// for a checkout token or back.
func NewSessions(store SessionStore, ttl time.Duration, secrets ...[]byte) (*Sessions, error) {
	ring, err := keyRing(secrets)
	if err != nil {
		return nil, err
	}
	s := &Sessions{Store: store, TTL: ttl, now: time.Now}
	for _, k := range ring {
		m := hmac.New(sha256.New, k.secret)
		m.Write([]byte("inventory admin session v2"))
		s.keys = append(s.keys, sessionKey{id: k.id, mac: m.Sum(nil)})
	}
	return s, nil
}

// ErrNotAdminKey is SignIn's answer to a secret that is not a live admin key.
var ErrNotAdminKey = errors.New("not a live admin key")

// SignIn checks that secret is a live admin key, records a new session and
// returns the cookie to set. secure marks it Secure (the request came over
// TLS).
func (s *Sessions) SignIn(ctx context.Context, secret string, secure bool) (*http.Cookie, error) {
	secret = strings.TrimSpace(secret)
	if !isAPISecret(secret) {
		return nil, ErrNotAdminKey
	}
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	expires := s.now().Add(s.TTL)
	key, err := s.Store.AdminSessionCreate(ctx, HashAPISecret(secret), sessionHash(id), expires)
	if err != nil {
		return nil, fmt.Errorf("auth: record session: %w", err)
	}
	if key == nil {
		return nil, ErrNotAdminKey
	}
	k := s.keys[0]
	payload := k.id + "." + base64.RawURLEncoding.EncodeToString(id) + "." + strconv.FormatInt(expires.Unix(), 10)
	return &http.Cookie{
		Name: SessionCookie, Value: payload + "." + k.sign(payload), Path: "/",
		Expires: expires, MaxAge: int(s.TTL.Seconds()),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}, nil
}

// SignOut ends the session of cookie value (if it is a genuine one) on the
// server and returns the cookie that deletes it from the browser. Only a
// store failure is an error: the session then still lives, and the caller
// must say so rather than pretend the sign-out worked.
func (s *Sessions) SignOut(ctx context.Context, value string, secure bool) (*http.Cookie, error) {
	if id, problem := s.parse(value); problem == "" {
		if err := s.Store.AdminSessionRevoke(ctx, sessionHash(id)); err != nil {
			return nil, fmt.Errorf("auth: end session: %w", err)
		}
	}
	return &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}, nil
}

// Actor resolves a session cookie value to its admin actor; anonymous (with
// TokenProblem) if it is forged, expired, signed out, or its key is revoked
// or no longer an admin's. Only a store failure is an error.
func (s *Sessions) Actor(ctx context.Context, value string) (domain.Actor, error) {
	id, problem := s.parse(value)
	if problem != "" {
		return rejected(problem), nil
	}
	key, err := s.Store.AdminSessionGet(ctx, sessionHash(id))
	if err != nil {
		return domain.Actor{}, fmt.Errorf("auth: look up session: %w", err)
	}
	if key == nil || key.Role != domain.RoleAdmin {
		return rejected("admin session ended (signed out, or its key was revoked): sign in again"), nil
	}
	return domain.Actor{Role: key.Role, Name: key.Name}, nil
}

// parse checks a cookie's signature (by the key its kid names) and expiry
// and returns its session id, or why it is refused.
func (s *Sessions) parse(value string) (id []byte, problem string) {
	const invalid = "invalid admin session: sign in again"
	payload, sig, ok := cutLast(value, ".")
	parts := strings.Split(payload, ".")
	if !ok || len(parts) != 3 {
		return nil, invalid
	}
	var key *sessionKey
	for i := range s.keys {
		if s.keys[i].id == parts[0] {
			key = &s.keys[i]
		}
	}
	if key == nil || subtle.ConstantTimeCompare([]byte(sig), []byte(key.sign(payload))) != 1 {
		return nil, invalid
	}
	expires, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || s.now().Unix() >= expires {
		return nil, "admin session expired: sign in again"
	}
	id, err = base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, invalid
	}
	return id, ""
}

// sessionHash is what the store keeps of a session id: a database reader
// learns no cookie from it (and could not sign one anyway).
func sessionHash(id []byte) []byte {
	sum := sha256.Sum256(id)
	return sum[:]
}

func (k sessionKey) sign(payload string) string {
	m := hmac.New(sha256.New, k.mac)
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
// host that a page of the same site makes (SameSite=Strict stops only
// cross-site ones), including a script on another origin of the site
// (shop.example.com calling inventory.example.com), so the cookie acts only
// for the dashboard's own requests, GET included:
//   - a WebSocket upgrade needs an Origin equal to its Host: browsers send
//     Origin on every upgrade and let no script set headers on one, and a
//     cross-site page could otherwise open a socket carrying the admin's
//     cookie (cross-site WebSocket hijacking);
//   - anything else needs FromDashboard.
func cookieMayAct(r *http.Request) bool {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return sameOrigin(r)
	}
	return FromDashboard(r)
}

// FromDashboard reports whether a request was sent by a page of this
// server's own origin, by any of:
//   - the CSRF header (every fetch of the dashboard and sign-in page sends
//     it): another origin cannot send it, for a custom header needs a CORS
//     preflight that this server never grants for it;
//   - fetch metadata "Sec-Fetch-Site: same-origin" (River UI's own
//     requests), which scripts cannot set;
//   - an Origin naming this host (browsers set it on POSTs);
//   - a top-level GET navigation the user started (Sec-Fetch-Site "none":
//     typed or bookmarked /admin): its answer goes to the user's tab, never
//     to a script.
//
// A request carrying none of them (an old browser, curl) is refused: the
// test is for proof, never the absence of a warning sign.
func FromDashboard(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	switch {
	case r.Header.Get(CSRFHeader) != "", site == "same-origin", sameOrigin(r):
		return true
	case site == "none" && r.Header.Get("Sec-Fetch-Mode") == "navigate" &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead):
		return true
	}
	return false
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
