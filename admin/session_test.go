package admin_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"inventory/admin"
	"inventory/auth"
	"inventory/testkit"
)

// TestSessionSignInNeedsAnAdminKey: only a live admin key, sent from the
// dashboard's own page, gets a session cookie — HttpOnly, SameSite=Strict,
// for the whole site, living the sessions' TTL, Secure over TLS, never
// holding the key — which then authenticates as that admin; anything else
// is refused with no cookie.
func TestSessionSignInNeedsAnAdminKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct{ what, body string }{
		{"a service key", `{"key":"` + e.serviceKey + `"}`},
		{"an unknown key", `{"key":"inv_not-a-key"}`},
		{"no key", `{"key":""}`},
		{"not a key", `{"key":"not even a key"}`},
	} {
		resp, body := e.do(http.MethodPost, e.url+"/admin/session", nil, c.body, csrf)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Fatalf("sign in with %s: %d %s, cookies %v", c.what, resp.StatusCode, body, resp.Cookies())
		}
	}
	if resp, body := e.do(http.MethodPost, e.url+"/admin/session", nil, `key=`+e.adminKey, csrf); resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
		t.Fatalf("sign in with a form body: %d %s", resp.StatusCode, body)
	}

	c := e.signIn(e.url, e.adminKey)
	if c.Name != auth.SessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Fatalf("cookie attributes: %+v", c)
	}
	if c.MaxAge != int(sessionTTL.Seconds()) || strings.Contains(c.Value, e.adminKey) {
		t.Fatalf("cookie: max-age %d (want %d), value %q", c.MaxAge, int(sessionTTL.Seconds()), c.Value)
	}
	if resp, body := e.do(http.MethodGet, e.url+"/admin/session", c, "", csrf); resp.StatusCode != http.StatusOK || body != "{\"name\":\"ops\"}\n" {
		t.Fatalf("who is signed in: %d %s", resp.StatusCode, body)
	}

	// Over TLS the cookie is Secure.
	req := httptest.NewRequest(http.MethodPost, "https://inventory.example/admin/session", strings.NewReader(`{"key":"`+e.adminKey+`"}`))
	req.TLS = &tls.ConnectionState{}
	req.Header.Set(auth.CSRFHeader, "1")
	w := httptest.NewRecorder()
	admin.SessionHandler(e.sessions, nil).ServeHTTP(w, req)
	if cookies := w.Result().Cookies(); w.Code != http.StatusNoContent || len(cookies) != 1 || !cookies[0].Secure {
		t.Fatalf("sign in over TLS: %d %v", w.Code, cookies)
	}
}

// TestSessionRefusesOtherSitesRequests: signing in or out is answered only
// to the dashboard's own page (its CSRF header, or an Origin naming this
// server): a cross-site form cannot sign the browser in as someone else,
// nor another page sign it out.
func TestSessionRefusesOtherSitesRequests(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.signIn(e.url, e.adminKey)
	for _, headers := range []map[string]string{nil, {"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}} {
		resp, body := e.do(http.MethodPost, e.url+"/admin/session", nil, `{"key":"`+e.adminKey+`"}`, headers)
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 || !strings.Contains(body, auth.CSRFHeader) {
			t.Fatalf("sign in with %v: %d %s %v", headers, resp.StatusCode, body, resp.Cookies())
		}
		if resp, _ := e.do(http.MethodDelete, e.url+"/admin/session", c, "", headers); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Fatalf("sign out with %v: %d %v", headers, resp.StatusCode, resp.Cookies())
		}
	}
	if resp, _ := e.do(http.MethodGet, e.url+"/admin/session", c, "", csrf); resp.StatusCode != http.StatusOK {
		t.Fatalf("the session after refused sign-outs: %d", resp.StatusCode)
	}
	sameOrigin := map[string]string{"Origin": e.url}
	if resp, body := e.do(http.MethodPost, e.url+"/admin/session", nil, `{"key":"`+e.adminKey+`"}`, sameOrigin); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign in from the server's own origin: %d %s", resp.StatusCode, body)
	}
}

// TestSessionSignOutEndsItEverywhere: signing out deletes the cookie from
// the browser and ends the session on the server, so a copy of the cookie
// stops working at once, on this instance and on another sharing the
// database, where it worked a moment before.
func TestSessionSignOutEndsItEverywhere(t *testing.T) {
	t.Parallel()
	e := setup(t)
	other := e.serve()
	c := e.signIn(e.url, e.adminKey)
	for _, url := range []string{e.url, other} {
		if resp, _ := e.do(http.MethodGet, url+"/admin/session", c, "", csrf); resp.StatusCode != http.StatusOK {
			t.Fatalf("the session on %s before sign-out: %d", url, resp.StatusCode)
		}
	}
	resp, _ := e.do(http.MethodDelete, e.url+"/admin/session", c, "", csrf)
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 || resp.Cookies()[0].Value != "" {
		t.Fatalf("sign-out: %d %v", resp.StatusCode, resp.Cookies())
	}
	for _, url := range []string{e.url, other} {
		if resp, _ := e.do(http.MethodGet, url+"/admin/session", c, "", csrf); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the copied cookie on %s after sign-out: %d", url, resp.StatusCode)
		}
		if _, body := e.do(http.MethodGet, url+"/admin", c, "", navigation); strings.Contains(body, "dashboard.js") {
			t.Fatalf("the copied cookie on %s still opens the dashboard", url)
		}
	}
}

// TestSessionAnswersWhoIsSignedIn: GET says the signed-in admin's name (by
// cookie or bearer key) and is 401 for anyone else; other methods are 405
// with the methods allowed. No answer is cached.
func TestSessionAnswersWhoIsSignedIn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		headers map[string]string
		status  int
	}{
		{nil, http.StatusUnauthorized},
		{bearer(e.serviceKey), http.StatusUnauthorized},
		{bearer(e.adminKey), http.StatusOK},
	} {
		resp, body := e.do(http.MethodGet, e.url+"/admin/session", nil, "", c.headers)
		if resp.StatusCode != c.status || resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET with %v: %d %v %s, want %d", c.headers, resp.StatusCode, resp.Header, body, c.status)
		}
		if c.status == http.StatusOK && body != "{\"name\":\"ops\"}\n" {
			t.Fatalf("GET as the admin: %s", body)
		}
	}
	for _, method := range []string{http.MethodPut, http.MethodPatch} {
		resp, _ := e.do(method, e.url+"/admin/session", nil, "", csrf)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST, DELETE" {
			t.Fatalf("%s: %d, Allow %q", method, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}

// TestSessionStoreFailureIsSaid: when the session store cannot be reached,
// sign-in and sign-out answer 503 and log why; a failed sign-out does not
// tell the browser to drop its cookie as if the session had ended.
func TestSessionStoreFailureIsSaid(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.signIn(e.url, e.adminKey)
	logs, logger := testkit.TestLogger(t)
	h := admin.SessionHandler(e.sessions, logger)
	e.pool.Close()
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		req := httptest.NewRequestWithContext(context.Background(), method, "/admin/session", strings.NewReader(`{"key":"`+e.adminKey+`"}`))
		req.Header.Set(auth.CSRFHeader, "1")
		req.AddCookie(c)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusServiceUnavailable || len(w.Result().Cookies()) != 0 {
			t.Fatalf("%s with the store down: %d %s %v", method, w.Code, w.Body, w.Result().Cookies())
		}
	}
	if l := logs.String(); !strings.Contains(l, "admin sign-in") || !strings.Contains(l, "admin sign-out") {
		t.Fatalf("log: %s", l)
	}
}
