package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"inventory/config"
)

// rateProbe sends one GraphQL request with the given bearer (may be empty) and
// X-Forwarded-For (may be empty) and returns the status, the Retry-After
// header and extensions.code of the first error.
func rateProbe(t *testing.T, url, bearer, forwardedFor, query string) (int, string, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
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
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r gqlResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("not JSON (%d): %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), r.errorCode()
}

const (
	probeRead  = `{ availability(skus: ["TEE"]) { available } }`
	probeWrite = `mutation { reserve(input: {checkoutId: "bot", requestKey: "k", lines: [{sku: "TEE", location: "AMS", quantity: 1}]}) { userErrors { code } } }`
)

// TestRateLimitsSeparateReadsAndWrites: an anonymous caller's mutations spend
// a budget of their own, so a bot's mutations from a storefront's address do
// not starve its reads; a spent budget is 429 with Retry-After and
// RATE_LIMITED; another address, a checkout token and the service key have
// budgets of their own; X-Forwarded-For is ignored unless the peer is a
// trusted proxy.
func TestRateLimitsSeparateReadsAndWrites(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{
		"INVENTORY_RATE_LIMIT_ANONYMOUS_READS":  "6",
		"INVENTORY_RATE_LIMIT_ANONYMOUS_WRITES": "3",
		"INVENTORY_RATE_LIMIT_CHECKOUT_WRITES":  "4",
		"INVENTORY_RATE_LIMIT_WINDOW":           "10m",
	})
	ts.seed("TEE", 10)

	// A bot's mutations from the address, spoofing X-Forwarded-For: that
	// header is not believed from an untrusted peer.
	for i := range 3 {
		if status, _, code := rateProbe(t, ts.url, "", "198.51.100.7", probeWrite); status != 200 || code != "UNAUTHENTICATED" {
			t.Fatalf("anonymous mutation %d within the budget: %d %s", i, status, code)
		}
	}
	status, retry, code := rateProbe(t, ts.url, "", "198.51.100.8", probeWrite)
	if status != http.StatusTooManyRequests || code != "RATE_LIMITED" || retry != "600" {
		t.Fatalf("fourth anonymous mutation: %d Retry-After %q %s", status, retry, code)
	}
	// The storefront's reads from the same address still go through.
	for i := range 6 {
		if status, _, code := rateProbe(t, ts.url, "", "", probeRead); status != 200 || code != "" {
			t.Fatalf("anonymous read %d after the writes were spent: %d %s", i, status, code)
		}
	}
	if status, _, code := rateProbe(t, ts.url, "", "", probeRead); status != http.StatusTooManyRequests || code != "RATE_LIMITED" {
		t.Fatalf("seventh anonymous read: %d %s", status, code)
	}

	// A checkout token has budgets of its own, per checkout.
	tokA, tokB := ts.checkoutToken("cart-a"), ts.checkoutToken("cart-b")
	for i := range 4 {
		if p := reserveAs(t, ts.url, tokA, "cart-a", "k"+string(rune('0'+i)), "TEE", 1, 0); p.Reservation == nil {
			t.Fatalf("checkout write %d: %+v", i, p)
		}
	}
	if status, _, code := rateProbe(t, ts.url, tokA, "", `mutation { reserve(input: {checkoutId: "cart-a", requestKey: "k9", lines: [{sku: "TEE", location: "AMS", quantity: 1}]}) { userErrors { code } } }`); status != http.StatusTooManyRequests || code != "RATE_LIMITED" {
		t.Fatalf("fifth write of one checkout: %d %s", status, code)
	}
	if n := ts.count("SELECT count(*) FROM reservations WHERE checkout_id = 'cart-a'"); n != 4 {
		t.Fatalf("%d reservations for cart-a; the refused request must change nothing", n)
	}
	if p := reserveAs(t, ts.url, tokB, "cart-b", "k", "TEE", 1, 0); p.Reservation == nil {
		t.Fatalf("another checkout is not limited by the first one's writes: %+v", p)
	}
	if status, _, code := rateProbe(t, ts.url, tokA, "", probeRead); status != 200 || code != "" {
		t.Fatalf("the checkout's reads after its writes were spent: %d %s", status, code)
	}
	// Keys are the shop's own backends: no budget by default.
	for i := range 20 {
		if status, _, code := rateProbe(t, ts.url, ts.service, "", probeRead); status != 200 || code != "" {
			t.Fatalf("service read %d: %d %s", i, status, code)
		}
	}
}

// TestRateLimitsBehindTrustedProxy: behind a configured proxy each client
// address in X-Forwarded-For has its own budget; the proxy's own address is
// never the client.
func TestRateLimitsBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{
		"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "2",
		"INVENTORY_RATE_LIMIT_WINDOW":          "10m",
		"INVENTORY_TRUSTED_PROXIES":            "127.0.0.0/8, ::1/128",
	})
	for _, client := range []string{"203.0.113.1", "203.0.113.2", "2001:db8:1:2::1"} {
		for i := range 2 {
			if status, _, code := rateProbe(t, ts.url, "", client, probeRead); status != 200 || code != "" {
				t.Fatalf("%s read %d: %d %s", client, i, status, code)
			}
		}
		if status, _, _ := rateProbe(t, ts.url, "", client, probeRead); status != http.StatusTooManyRequests {
			t.Fatalf("%s third read: %d, want 429", client, status)
		}
	}
	// IPv6 clients are one client per /64: another address in it shares the budget.
	if status, _, _ := rateProbe(t, ts.url, "", "2001:db8:1:2::99", probeRead); status != http.StatusTooManyRequests {
		t.Fatalf("same /64: %d, want 429", status)
	}
	// A client's own X-Forwarded-For entries left of the proxy's are not believed:
	// the rightmost untrusted address is the client.
	if status, _, _ := rateProbe(t, ts.url, "", "192.0.2.50, 203.0.113.1", probeRead); status != http.StatusTooManyRequests {
		t.Fatalf("spoofed left entry: %d, want 429 (the client is 203.0.113.1)", status)
	}
	if _, err := config.Load(func(k string) string {
		return map[string]string{"DATABASE_URL": "x", "INVENTORY_TRUSTED_PROXIES": "10.0.0.0/8,nonsense"}[k]
	}); err == nil {
		t.Fatal("an invalid INVENTORY_TRUSTED_PROXIES entry was accepted")
	}
}
