package admin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/admin"
	"inventory/auth"
	"inventory/domain"
	"inventory/pgtest"
	"inventory/store"
	"inventory/testkit"
)

// sessionTTL is the sessions' lifetime in these tests.
const sessionTTL = 2 * time.Hour

// secret signs the session cookies (one ring for every instance).
var secret = []byte(strings.Repeat("s", auth.MinSecretLength))

// env is the dashboard's handlers mounted as the server mounts them,
// behind the authenticator, on a database of their own that holds an
// admin key and a service key.
type env struct {
	t        *testing.T
	url      string
	pool     *pgxpool.Pool
	store    *store.Store
	sessions *auth.Sessions
	logs     *testkit.LogBuffer

	adminKey, serviceKey string
}

func setup(t *testing.T) *env {
	t.Helper()
	pool := pgtest.NewPool(t)
	e := &env{t: t, pool: pool, store: store.New(pool)}
	e.adminKey, e.serviceKey = e.key("ops", domain.RoleAdmin), e.key("shop", domain.RoleService)
	e.url = e.serve()
	return e
}

// key creates an API key and returns its secret.
func (e *env) key(name string, role domain.Role) string {
	e.t.Helper()
	secret, hash := auth.NewAPISecret()
	if err := e.store.APIKeyCreate(context.Background(), name, role, hash); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// serve starts an instance on e's database (the first one's sessions are
// e.sessions) and returns its URL.
func (e *env) serve() string {
	e.t.Helper()
	sessions, err := auth.NewSessions(e.store, sessionTTL, secret)
	if err != nil {
		e.t.Fatal(err)
	}
	logs, logger := testkit.TestLogger(e.t)
	if e.sessions == nil {
		e.sessions, e.logs = sessions, logs
	}
	authn := &auth.Authenticator{Keys: e.store, Sessions: sessions}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin", admin.Page)
	mux.Handle("/admin/assets/", http.StripPrefix("/admin/assets/", admin.Assets()))
	mux.Handle("/admin/session", admin.SessionHandler(sessions, logger))
	ts := httptest.NewServer(authn.Middleware(mux))
	e.t.Cleanup(ts.Close)
	return ts.URL
}

// Headers the dashboard's own requests send (auth.FromDashboard), and what
// a browser sends when the user opens /admin.
var (
	csrf       = map[string]string{auth.CSRFHeader: "1"}
	navigation = map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
)

// do sends one request with the cookie (none when nil) and headers, and
// returns the response and its body.
func (e *env) do(method, url string, cookie *http.Cookie, body string, headers map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, string(b)
}

// signIn exchanges key for the session cookie at url's /admin/session.
func (e *env) signIn(url, key string) *http.Cookie {
	e.t.Helper()
	resp, body := e.do(http.MethodPost, url+"/admin/session", nil, `{"key":"`+key+`"}`, csrf)
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 {
		e.t.Fatalf("sign in: %d %s %v", resp.StatusCode, body, resp.Cookies())
	}
	return resp.Cookies()[0]
}

// bearer is the Authorization header of key.
func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

// requireSecurityHeaders fails unless resp keeps the page to its own
// origin and out of frames.
func requireSecurityHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	h := resp.Header
	csp := h.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, d) {
			t.Fatalf("%s: Content-Security-Policy %q lacks %q", what, csp, d)
		}
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("%s: headers %v", what, h)
	}
}
