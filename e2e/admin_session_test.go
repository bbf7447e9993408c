package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// adminRequest sends one request to the test server with the given cookie
// (nil for none) and extra headers, and returns the response and its body.
func adminRequest(t *testing.T, method, url string, cookie *http.Cookie, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
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
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// csrfHeader is what the dashboard's own fetches send; navigation is what a
// browser sends when the user opens /admin.
var (
	csrfHeader = map[string]string{"X-Inventory-CSRF": "1"}
	navigation = map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
)

// signIn exchanges key for the session cookie at /admin/session.
func (ts *testServer) signIn(key string) *http.Cookie {
	ts.t.Helper()
	resp, body := adminRequest(ts.t, http.MethodPost, ts.url+"/admin/session", nil, `{"key":"`+key+`"}`, csrfHeader)
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 {
		ts.t.Fatalf("sign in: %d %s %v", resp.StatusCode, body, resp.Cookies())
	}
	return resp.Cookies()[0]
}

// gqlCookie POSTs one operation to /graphql authenticated by the session
// cookie, with extra headers.
func (ts *testServer) gqlCookie(cookie *http.Cookie, headers map[string]string, query string) gqlResponse {
	ts.t.Helper()
	b, _ := json.Marshal(map[string]any{"query": query})
	resp, body := adminRequest(ts.t, http.MethodPost, ts.url+"/graphql", cookie, string(b), headers)
	out := gqlResponse{Status: resp.StatusCode}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		ts.t.Fatalf("not JSON (%d): %s", resp.StatusCode, body)
	}
	return out
}

// TestAdminSession: only a live admin key gets a session cookie, with the
// attributes that keep it from scripts and other sites; the cookie
// authenticates the dashboard, GraphQL and the River UI as that admin, but
// does nothing (reads included, see TestCookieGETNeedsCSRF) without the
// CSRF header or other proof of a same-origin request; sign-out clears it.
func TestAdminSession(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 2)

	for _, key := range []string{"inv_not-a-key", ts.service, "", "not even a key"} {
		resp, body := adminRequest(t, http.MethodPost, ts.url+"/admin/session", nil, `{"key":"`+key+`"}`, csrfHeader)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Fatalf("sign in with %.8q: %d %s, cookies %v", key, resp.StatusCode, body, resp.Cookies())
		}
	}
	c := ts.signIn(ts.admin)
	if c.Name != "inventory_admin" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Fatalf("cookie attributes: %+v", c)
	}
	if c.MaxAge != 12*3600 || time.Until(c.Expires) < 11*time.Hour || time.Until(c.Expires) > 13*time.Hour {
		t.Fatalf("cookie lifetime: max-age %d, expires %v", c.MaxAge, c.Expires)
	}
	if strings.Contains(c.Value, ts.admin) {
		t.Fatal("the cookie holds the admin key")
	}

	// The page: sign-in form without a session, dashboard with one.
	if resp, body := adminRequest(t, http.MethodGet, ts.url+"/admin", nil, "", nil); resp.StatusCode != 200 || !strings.Contains(body, `id="signin"`) || strings.Contains(body, "dashboard.js") {
		t.Fatalf("anonymous /admin: %d %.200s", resp.StatusCode, body)
	}
	resp, body := adminRequest(t, http.MethodGet, ts.url+"/admin", c, "", navigation)
	if resp.StatusCode != 200 || !strings.Contains(body, "dashboard.js") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'self'") {
		t.Fatalf("signed-in /admin: %d %v %.200s", resp.StatusCode, resp.Header, body)
	}
	if resp, _ := adminRequest(t, http.MethodGet, ts.url+"/riverui/", c, "", navigation); resp.StatusCode != http.StatusOK {
		t.Fatalf("/riverui/ with the session: %d", resp.StatusCode)
	}

	// Reading with the cookie and the CSRF header (or same-origin Origin) works.
	if r := ts.gqlCookie(c, map[string]string{"X-Inventory-CSRF": "1"}, `{ inventoryHealth { overdueHolds } }`); len(r.Errors) != 0 {
		t.Fatalf("query with cookie: %+v", r.Errors)
	}
	// Mutating: without the header or with another Origin the cookie is
	// ignored, and nothing changes.
	// Each accepted receipt is its own (receipts are idempotent per reference).
	receive := func(ref string) string {
		return `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "` + ref + `"}) { balance { onHand } userErrors { code } } }`
	}
	for i, h := range []map[string]string{nil, {"Origin": "http://evil.example"}} {
		if r := ts.gqlCookie(c, h, receive(fmt.Sprint("refused-", i))); r.errorCode() != "UNAUTHENTICATED" {
			t.Fatalf("mutation with cookie and headers %v: %+v", h, r)
		}
	}
	if n := ts.count("SELECT on_hand FROM balances"); n != 2 {
		t.Fatalf("on hand %d after refused mutations", n)
	}
	for i, h := range []map[string]string{{"X-Inventory-CSRF": "1"}, {"Origin": ts.url}} {
		if r := ts.gqlCookie(c, h, receive(fmt.Sprint("accepted-", i))); len(r.Errors) != 0 {
			t.Fatalf("mutation with cookie and headers %v: %+v", h, r.Errors)
		}
	}
	if n := ts.count("SELECT on_hand FROM balances"); n != 4 {
		t.Fatalf("on hand %d after two receipts", n)
	}

	// Sign-out needs the header too, then clears the cookie.
	if resp, _ := adminRequest(t, http.MethodDelete, ts.url+"/admin/session", c, "", nil); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("sign-out without header: %d %v", resp.StatusCode, resp.Cookies())
	}
	resp, _ = adminRequest(t, http.MethodDelete, ts.url+"/admin/session", c, "", map[string]string{"X-Inventory-CSRF": "1"})
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 || resp.Cookies()[0].Value != "" {
		t.Fatalf("sign-out: %d %v", resp.StatusCode, resp.Cookies())
	}

	// A forged cookie is anonymous.
	forged := &http.Cookie{Name: c.Name, Value: c.Value[:len(c.Value)-2] + "xx"}
	if resp, _ := adminRequest(t, http.MethodGet, ts.url+"/admin/session", forged, "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged cookie: %d", resp.StatusCode)
	}
}

// TestAdminSessionEndsWithKey: revoking the admin key ends its sessions
// (at once: a session is read with its key from the database on every
// request; the test allows the bearer key cache's 500ms), on every request.
func TestAdminSessionEndsWithKey(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	c := ts.signIn(ts.admin)
	if resp, body := adminRequest(t, http.MethodGet, ts.url+"/admin/session", c, "", csrfHeader); resp.StatusCode != 200 || !strings.Contains(body, "test-admin") {
		t.Fatalf("session: %d %s", resp.StatusCode, body)
	}
	ts.cli("token", "revoke", "test-admin")
	deadline := time.Now().Add(time.Second)
	for {
		resp, _ := adminRequest(t, http.MethodGet, ts.url+"/admin/session", c, "", csrfHeader)
		if resp.StatusCode == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session still authenticates 1s after its key was revoked")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := ts.gqlCookie(c, map[string]string{"X-Inventory-CSRF": "1"}, `{ inventoryHealth { overdueHolds } }`); r.errorCode() != "UNAUTHENTICATED" {
		t.Fatalf("query after revocation: %+v", r)
	}
}

// TestAdminSessionWebSocketOrigin: a WebSocket authenticated by the session
// cookie works from the server's own origin, and a cross-origin upgrade
// carrying the cookie (cross-site WebSocket hijacking) is refused.
func TestAdminSessionWebSocketOrigin(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	c := ts.signIn(ts.admin)
	wsURL := "ws" + strings.TrimPrefix(ts.url, "http") + "/graphql"
	dial := func(origin string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h := http.Header{"Cookie": {c.String()}}
		if origin != "" {
			h.Set("Origin", origin)
		}
		return websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: h})
	}
	if conn, resp, err := dial("http://evil.example"); err == nil {
		conn.CloseNow()
		t.Fatal("cross-origin upgrade with the session cookie was accepted")
	} else if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin upgrade: %v %v", resp, err)
	}
	// Same origin: the cookie authenticates connection_init with an empty payload.
	conn, _, err := dial(ts.url)
	if err != nil {
		t.Fatal(err)
	}
	ws := &wsClient{t: t, conn: conn}
	t.Cleanup(func() { _ = conn.CloseNow() })
	ws.send(wsMessage{Type: "connection_init", Payload: mustJSON(map[string]any{})})
	ws.ack()
	// Without an Origin (not a browser) the cookie is not enough.
	conn, _, err = dial("")
	if err != nil {
		t.Fatal(err)
	}
	ws = &wsClient{t: t, conn: conn}
	t.Cleanup(func() { _ = conn.CloseNow() })
	ws.send(wsMessage{Type: "connection_init", Payload: mustJSON(map[string]any{})})
	if code, reason := ws.closeCode(5 * time.Second); code != 4401 {
		t.Fatalf("cookie without Origin: close %d %q, want 4401", code, reason)
	}
}
