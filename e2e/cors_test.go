package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"inventory/config"

	"github.com/coder/websocket"
)

// corsRequest sends method to /graphql with Origin and extra headers and
// returns the response (body closed).
func corsRequest(t *testing.T, url, method, origin string, headers map[string]string) *http.Response {
	t.Helper()
	var body *bytes.Reader
	if method == http.MethodPost {
		body = bytes.NewReader([]byte(`{"query":"{ availability(skus: [\"X\"]) { available } }"}`))
	} else {
		body = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url+"/graphql", body)
	if err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func preflight(t *testing.T, url, origin, headers string) *http.Response {
	t.Helper()
	return corsRequest(t, url, http.MethodOptions, origin, map[string]string{
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": headers})
}

// TestCORSNothingAllowedByDefault: without INVENTORY_CORS_ORIGINS no answer
// carries a CORS header, so no other site's page can read one.
func TestCORSNothingAllowedByDefault(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	resp := preflight(t, ts.url, "https://shop.example", "authorization, content-type")
	if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Fatalf("preflight answered with Access-Control-Allow-Origin %q", v)
	}
	resp = corsRequest(t, ts.url, http.MethodPost, "https://shop.example", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("POST from another origin: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestCORSAllowlist: the configured origin's preflight is answered (methods,
// the Authorization header; never credentials) before authentication and rate
// limits; its requests carry Allow-Origin and Vary: Origin; any other origin
// gets nothing; the admin CSRF header is never allowed cross-origin; WebSocket
// upgrades follow the same list; invalid or wildcard origins are refused at
// start-up.
func TestCORSAllowlist(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{
		"INVENTORY_CORS_ORIGINS":               "https://shop.example, http://localhost:5173",
		"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "5", // 3 POSTs and 2 WebSocket upgrades below
	})
	for _, origin := range []string{"https://shop.example", "http://localhost:5173"} {
		resp := preflight(t, ts.url, origin, "authorization, content-type")
		if resp.StatusCode/100 != 2 || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
			resp.Header.Get("Access-Control-Allow-Credentials") != "" ||
			!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") ||
			!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
			t.Fatalf("preflight from %s: %d %v", origin, resp.StatusCode, resp.Header)
		}
	}
	// Preflights spend no budget: all five reads are still there after them.
	for i := range 3 {
		resp := corsRequest(t, ts.url, http.MethodPost, "https://shop.example", nil)
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://shop.example" ||
			!strings.Contains(resp.Header.Get("Vary"), "Origin") || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Retry-After") {
			t.Fatalf("POST %d from the allowed origin: %d %v", i, resp.StatusCode, resp.Header)
		}
	}
	for _, origin := range []string{"https://evil.example", "https://shop.example.evil.example", "http://shop.example"} {
		if resp := preflight(t, ts.url, origin, "authorization"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("preflight from %s allowed", origin)
		}
	}
	if resp := preflight(t, ts.url, "https://shop.example", "x-inventory-csrf"); resp.Header.Get("Access-Control-Allow-Origin") != "" &&
		strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "x-inventory-csrf") {
		t.Fatalf("the admin CSRF header was allowed cross-origin: %v", resp.Header)
	}

	wsURL := "ws" + strings.TrimPrefix(ts.url, "http") + "/graphql"
	dial := func(origin string) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"},
			HTTPHeader: http.Header{"Origin": {origin}}})
		if err == nil {
			conn.CloseNow()
		}
		return resp, err
	}
	if _, err := dial("https://shop.example"); err != nil {
		t.Fatalf("WebSocket from the allowed origin: %v", err)
	}
	if resp, err := dial("https://evil.example"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("WebSocket from another origin: %v %v", resp, err)
	}

	for _, bad := range []string{"*", "https://*.shop.example", "shop.example", "https://shop.example/checkout", "ftp://shop.example"} {
		_, err := config.Load(func(k string) string {
			return map[string]string{"DATABASE_URL": "x", "INVENTORY_CORS_ORIGINS": bad}[k]
		})
		if err == nil || !strings.Contains(err.Error(), "INVENTORY_CORS_ORIGINS") {
			t.Errorf("INVENTORY_CORS_ORIGINS=%s: %v", bad, err)
		}
	}
}
