package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// sameSiteScript is what a browser sends for a script on another origin of
// the same site (shop.example.com calling inventory.example.com): the
// SameSite=Strict cookie goes along, with fetch metadata saying "same-site".
var sameSiteScript = map[string]string{"Origin": "https://shop.example", "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"}

// TestCookieGETNeedsCSRF: a cookie-authenticated GET is refused unless it
// proves it comes from the dashboard (the CSRF header, or fetch metadata
// saying same-origin): a script on a same-site origin sending the admin's
// cookie with a GET reads nothing. Before the fix the GET read admin data
// (inventoryHealth answered, /admin/session named the admin).
func TestCookieGETNeedsCSRF(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	c := ts.signIn(ts.admin)
	q := url.Values{"query": {`{ inventoryHealth { overdueHolds } }`}}
	get := func(path string, headers map[string]string) (*http.Response, string) {
		return adminRequest(t, http.MethodGet, ts.url+path, c, "", headers)
	}
	for _, h := range []map[string]string{nil, sameSiteScript, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "none"}} {
		resp, body := get("/graphql?"+q.Encode(), h)
		if !strings.Contains(body, "UNAUTHENTICATED") || strings.Contains(body, "overdueHolds\":") {
			t.Fatalf("GET /graphql with the cookie and %v: %d %s", h, resp.StatusCode, body)
		}
		if resp, body := get("/admin/session", h); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "test-admin") {
			t.Fatalf("GET /admin/session with the cookie and %v: %d %s", h, resp.StatusCode, body)
		}
	}
	// The dashboard's own requests still work: its fetches send the header,
	// and a browser marks a same-origin fetch (the River UI's) as such.
	for _, h := range []map[string]string{{"X-Inventory-CSRF": "1"}, {"Sec-Fetch-Site": "same-origin"}} {
		if resp, body := get("/graphql?"+q.Encode(), h); resp.StatusCode != 200 || !strings.Contains(body, "overdueHolds") || strings.Contains(body, "errors") {
			t.Fatalf("GET /graphql with the cookie and %v: %d %s", h, resp.StatusCode, body)
		}
		if resp, body := get("/admin/session", h); resp.StatusCode != 200 || !strings.Contains(body, "test-admin") {
			t.Fatalf("GET /admin/session with the cookie and %v: %d %s", h, resp.StatusCode, body)
		}
	}
	// /riverui/ from a same-site script is refused too.
	if resp, _ := get("/riverui/api/jobs?state=available", sameSiteScript); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("River UI API with the cookie from a same-site script: %d", resp.StatusCode)
	}
}

// TestCORSNeverAllowsCredentials: with allowed origins configured, neither a
// preflight nor an answer says Access-Control-Allow-Credentials, so a
// browser never lets another origin's script read an answer to a request
// that carried the admin's cookie. Before the fix both said "true".
func TestCORSNeverAllowsCredentials(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_CORS_ORIGINS": "https://shop.example"})
	resp := preflight(t, ts.url, "https://shop.example", "authorization, content-type")
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://shop.example" || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("preflight: %v", resp.Header)
	}
	resp = corsRequest(t, ts.url, http.MethodPost, "https://shop.example", nil)
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://shop.example" || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("POST: %v", resp.Header)
	}
}

// TestSignInCSRF: a cross-site form (text/plain or urlencoded, no custom
// header) cannot sign the admin's browser in with the attacker's key (login
// CSRF); nor can a same-site script. Before the fix a text/plain form POST
// of {"key": …} got 204 and a session cookie.
func TestSignInCSRF(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	body := `{"key":"` + ts.admin + `"}`
	for _, h := range []map[string]string{
		{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
		{"Content-Type": "application/x-www-form-urlencoded", "Origin": "null"},
		{"Content-Type": "text/plain"},
		sameSiteScript,
		{"Content-Type": "application/json"},
	} {
		resp, out := adminRequest(t, http.MethodPost, ts.url+"/admin/session", nil, body, h)
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Fatalf("sign-in with %v: %d %s %v", h, resp.StatusCode, out, resp.Cookies())
		}
	}
	if n := ts.count("SELECT count(*) FROM admin_sessions"); n != 0 {
		t.Fatalf("%d sessions after refused sign-ins", n)
	}
	// The sign-in page's own request (the header) and a same-origin POST work.
	for _, h := range []map[string]string{{"X-Inventory-CSRF": "1"}, {"Origin": ts.url}, {"Sec-Fetch-Site": "same-origin"}} {
		resp, out := adminRequest(t, http.MethodPost, ts.url+"/admin/session", nil, body, h)
		if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 {
			t.Fatalf("sign-in with %v: %d %s", h, resp.StatusCode, out)
		}
	}
}

// TestSignOutRevokesSession: after sign-out a copy of the cookie stops
// working at once, on this instance and on another one sharing the
// database; other sessions of the same key live on. Before the fix the
// copied cookie kept reading on both instances.
func TestSignOutRevokesSession(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	other, _ := ts.startInstance()
	stolen := ts.signIn(ts.admin)
	kept := ts.signIn(ts.admin)
	csrf := map[string]string{"X-Inventory-CSRF": "1"}
	for _, u := range []string{ts.url, other} {
		if resp, _ := adminRequest(t, http.MethodGet, u+"/admin/session", stolen, "", csrf); resp.StatusCode != 200 {
			t.Fatalf("session before sign-out at %s: %d", u, resp.StatusCode)
		}
	}
	if resp, _ := adminRequest(t, http.MethodDelete, ts.url+"/admin/session", stolen, "", csrf); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	for _, u := range []string{ts.url, other} {
		if resp, body := adminRequest(t, http.MethodGet, u+"/admin/session", stolen, "", csrf); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("signed-out cookie at %s: %d %s", u, resp.StatusCode, body)
		}
		b := `{"query":"{ inventoryHealth { overdueHolds } }"}`
		if _, body := adminRequest(t, http.MethodPost, u+"/graphql", stolen, b, csrf); !strings.Contains(body, "UNAUTHENTICATED") {
			t.Fatalf("signed-out cookie on /graphql at %s: %s", u, body)
		}
		if resp, _ := adminRequest(t, http.MethodGet, u+"/admin/session", kept, "", csrf); resp.StatusCode != 200 {
			t.Fatalf("the other session at %s: %d", u, resp.StatusCode)
		}
	}
	if n := ts.count("SELECT count(*) FROM admin_sessions WHERE revoked_at IS NOT NULL"); n != 1 {
		t.Fatalf("%d revoked sessions, want 1", n)
	}
}
