package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricValue reads one sample from the instance's /metrics as the admin key.
func (ts *testServer) metricValue(re string) float64 {
	ts.t.Helper()
	code, body := httpGetAs(ts.t, ts.url+"/metrics", ts.admin)
	if code != http.StatusOK {
		ts.t.Fatalf("/metrics: %d", code)
	}
	m := regexp.MustCompile(`(?m)^` + re + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		ts.t.Fatalf("no %s on /metrics", re)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		ts.t.Fatal(err)
	}
	return v
}

// request sends one request with a bearer (may be empty), X-Forwarded-For
// (may be empty) and any other headers, and returns the status.
func request(t *testing.T, method, url, bearer, forwardedFor, contentType string, body []byte, headers ...map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		for k, v := range h {
			req.Header.Set(k, v)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if forwardedFor != "" {
		req.Header.Set("X-Forwarded-For", forwardedFor)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestUnknownKeyIsNegativeCached: 200 requests with one unknown inv_ key
// read api_keys once, not 200 times (counted by the key cache's database
// reads on /metrics).
func TestUnknownKeyIsNegativeCached(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_RATE_LIMIT_AUTH_FAILURES": "0"})
	before := ts.metricValue(`inventory_api_key_reads_total\{result="unknown"\}`)
	for range 200 {
		if r, err := gqlTo(ts.url, "inv_nosuchkey", `{ locations { code } }`, nil); err != nil || r.errorCode() != "UNAUTHENTICATED" {
			t.Fatalf("an unknown key reading the catalog: want UNAUTHENTICATED, got %v %+v", err, r)
		}
	}
	reads := ts.metricValue(`inventory_api_key_reads_total\{result="unknown"\}`) - before
	t.Logf("200 requests with one unknown key read api_keys %v times", reads)
	if reads > 1 {
		t.Fatalf("200 requests with one unknown key read api_keys %v times, want 1", reads)
	}
	// A live key is still a live key.
	if r := ts.gql(ts.service, `{ checkoutReservations(checkoutId: "c") { id } }`, nil); len(r.Errors) > 0 {
		t.Fatalf("live key: %+v", r.Errors)
	}
}

// TestFailedAuthLimitedPerIP: one client address that keeps sending bad or
// unknown tokens gets 429 over HTTP and SSE, and its WebSocket is closed with
// 4429, once INVENTORY_RATE_LIMIT_AUTH_FAILURES are spent, without a database
// read per attempt; the same address without a token, and other addresses,
// go on.
func TestFailedAuthLimitedPerIP(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{
		"INVENTORY_RATE_LIMIT_AUTH_FAILURES": "5",
		"INVENTORY_RATE_LIMIT_WINDOW":        "10m",
		"INVENTORY_TRUSTED_PROXIES":          "127.0.0.0/8",
	})
	const attacker = "203.0.113.66"
	before := ts.metricValue(`inventory_api_key_reads_total\{result="unknown"\}`)
	statuses := map[int]int{}
	for i := range 50 {
		body := []byte(`{"query":"{ locations { code } }"}`)
		statuses[request(t, http.MethodPost, ts.url+"/graphql", fmt.Sprintf("inv_guess%d", i), attacker, "application/json", body)]++
	}
	reads := ts.metricValue(`inventory_api_key_reads_total\{result="unknown"\}`) - before
	t.Logf("50 guessed keys from one address: %v, %v key reads", statuses, reads)
	if statuses[http.StatusOK] != 5 || statuses[http.StatusTooManyRequests] != 45 || reads > 5 {
		t.Fatalf("50 guessed keys with 5 failures allowed: statuses %v, %v database reads", statuses, reads)
	}
	// Forged checkout tokens count too; so does any path.
	if s := request(t, http.MethodGet, ts.url+"/metrics", "not.a.jwt", attacker, "", nil); s != http.StatusTooManyRequests {
		t.Fatalf("a forged token on /metrics from the address: %d", s)
	}
	// SSE is a request like any other.
	if s := request(t, http.MethodPost, ts.url+"/graphql", "inv_sse", attacker, "application/json", []byte(`{"query":"subscription { stockChanged { seq } }"}`)); s != http.StatusTooManyRequests {
		t.Fatalf("SSE with a guessed key from the address: %d", s)
	}
	// The address without a token is an anonymous caller as before.
	if s := request(t, http.MethodPost, ts.url+"/graphql", "", attacker, "application/json", []byte(`{"query":"{ locations { code } }"}`)); s != http.StatusOK {
		t.Fatalf("the address without a token: %d", s)
	}
	// Another address with a real key is untouched.
	if s := request(t, http.MethodPost, ts.url+"/graphql", ts.service, "198.51.100.1", "application/json", []byte(`{"query":"{ locations { code } }"}`)); s != http.StatusOK {
		t.Fatalf("another address: %d", s)
	}

	// Over WebSocket (token in connection_init) from the loopback address:
	// 5 failures close with 4401, the next ones with 4429.
	codes := map[int]int{}
	for i := range 8 {
		w := dialWS(t, ts.url, fmt.Sprintf("inv_wsguess%d", i), false)
		code, _ := w.closeCode(5 * time.Second)
		codes[int(code)]++
	}
	if codes[4401] != 5 || codes[4429] != 3 {
		t.Fatalf("8 sockets with guessed keys from one address: close codes %v, want 5×4401 then 4429", codes)
	}
}

// TestEveryPathIsRateLimited: paths outside /graphql spend the caller's
// budget too: a flood of /metrics, /riverui/, /admin, /admin/session,
// the dashboard's assets, GraphiQL, the icon, the probes or a path that does not
// exist from one address gets 429.
func TestEveryPathIsRateLimited(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{
		"INVENTORY_RATE_LIMIT_ANONYMOUS_READS":  "5",
		"INVENTORY_RATE_LIMIT_ANONYMOUS_WRITES": "3",
		"INVENTORY_RATE_LIMIT_WINDOW":           "10m",
		"INVENTORY_TRUSTED_PROXIES":             "127.0.0.0/8",
	})
	for i, p := range []struct{ method, path string }{
		{http.MethodGet, "/metrics"}, {http.MethodGet, "/riverui/"}, {http.MethodGet, "/admin"},
		{http.MethodGet, "/admin/assets/dashboard.js"}, {http.MethodGet, "/"}, {http.MethodGet, "/graphiql/graphiql.min.js"},
		{http.MethodGet, "/favicon.ico"}, {http.MethodGet, "/readyz"}, {http.MethodGet, "/healthz"}, {http.MethodGet, "/no/such/path"}, {http.MethodPost, "/admin/session"},
	} {
		client := fmt.Sprintf("203.0.113.%d", i+1)
		budget := 5
		if p.method == http.MethodPost {
			budget = 3
		}
		statuses := map[int]int{}
		for range budget + 10 {
			statuses[request(t, p.method, ts.url+p.path, "", client, "application/x-www-form-urlencoded", []byte("key=inv_wrong"))]++
		}
		if statuses[http.StatusTooManyRequests] != 10 {
			t.Errorf("%s %s %d times with a budget of %d: %v", p.method, p.path, budget+10, budget, statuses)
		}
	}
}

// TestSSEEndsWhenCredentialsEnd: a stockChanged stream over SSE opened with
// a key that is then revoked, or a checkout token that then expires, ends
// within a second, with an UNAUTHENTICATED error as its last event.
func TestSSEEndsWhenCredentialsEnd(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	key := ts.cli("token", "create", "--role", "admin", "--name", "sse-watcher")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp := openSSE(t, ctx, ts.url, key, stockChangedSub, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("SSE: %d", resp.StatusCode)
	}
	ended := make(chan string, 1)
	go func() { ended <- readSSEBody(resp) }()
	// Another stream of another key stays open throughout.
	other := openSSE(t, ctx, ts.url, ts.admin, stockChangedSub, nil)
	otherEnded := make(chan string, 1)
	go func() { otherEnded <- readSSEBody(other) }()

	time.Sleep(300 * time.Millisecond)
	ts.cli("token", "revoke", "sse-watcher")
	revoked := time.Now()
	select {
	case body := <-ended:
		took := time.Since(revoked)
		t.Logf("revoked key's SSE stream ended %v after the revocation", took.Round(10*time.Millisecond))
		if took > time.Second || !strings.Contains(body, "UNAUTHENTICATED") {
			t.Fatalf("revoked key's stream ended after %v with %.300q", took, body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the SSE stream of a revoked key is still open 5 s after the revocation")
	}

	var tok struct {
		Token     string
		ExpiresAt time.Time
	}
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-sse", ttlSeconds: 2) { token expiresAt } }`, nil), "issueCheckoutToken", &tok)
	c := openSSE(t, ctx, ts.url, tok.Token, `subscription { reservationChanged(checkoutId: "cart-sse") { id status } }`, nil)
	if c.StatusCode != http.StatusOK {
		t.Fatalf("checkout SSE: %d", c.StatusCode)
	}
	cEnded := make(chan string, 1)
	go func() { cEnded <- readSSEBody(c) }()
	select {
	case body := <-cEnded:
		late := time.Since(tok.ExpiresAt)
		t.Logf("checkout token's SSE stream ended %v after the token expired", late.Round(10*time.Millisecond))
		if late > time.Second || !strings.Contains(body, "expired") {
			t.Fatalf("checkout stream ended %v after expiry with %.300q", late, body)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the SSE stream of an expired checkout token is still open")
	}
	select {
	case body := <-otherEnded:
		t.Fatalf("another key's stream ended: %.300q", body)
	default:
	}
}

// readSSEBody reads an SSE stream to its end (no testing.T: goroutines).
func readSSEBody(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestSSEEndsWhenSessionEnds: a stream the dashboard opened with its
// session cookie ends within a second of the session's end.
func TestSSEEndsWhenSessionEnds(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_ADMIN_SESSION_TTL": "2s"})
	signedIn := time.Now()
	cookie := ts.signIn(ts.admin)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/graphql", bytes.NewReader(mustJSON(map[string]any{"query": stockChangedSub})))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Inventory-CSRF", "1")
	req.Header.Set("Origin", ts.url)
	req.AddCookie(cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("SSE with the session cookie: %d", resp.StatusCode)
	}
	body := readSSEBody(resp)
	took := time.Since(signedIn)
	t.Logf("the session's SSE stream ended %v after sign-in (session TTL 2s)", took.Round(10*time.Millisecond))
	if took < time.Second || took > 3*time.Second || !strings.Contains(body, "UNAUTHENTICATED") || !strings.Contains(body, "session expired") {
		t.Fatalf("stream of a 2 s session ended %v after sign-in with %.300q", took, body)
	}
}
