package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"inventory/config"
)

// checkoutToken issues a checkout token for checkout through the service key.
func (ts *testServer) checkoutToken(checkout string) string {
	ts.t.Helper()
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation($c: String!) { issueCheckoutToken(checkoutId: $c) { token } }`,
		map[string]any{"c": checkout}), "issueCheckoutToken", &tok)
	return tok.Token
}

// reserveAs reserves q units of sku at AMS for checkout with the given
// bearer and ttl (0: the default), and returns the payload.
func reserveAs(t *testing.T, url, bearer, checkout, key, sku string, q, ttl int) reservePayload {
	t.Helper()
	vars := reserveVars(checkout, key, sku, q)
	if ttl > 0 {
		vars["in"].(map[string]any)["ttlSeconds"] = ttl
	}
	r, err := gqlTo(url, bearer, reserveMutation, vars)
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodeReserve(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func codeOf(p reservePayload) string {
	if len(p.UserErrors) == 0 {
		return ""
	}
	return p.UserErrors[0].Code
}

// TestFairUseHoldTTL: a checkout token may hold for at most
// INVENTORY_CHECKOUT_MAX_HOLD_TTL and extend to at most
// INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME from creation; the service key is not
// bound by either; refusals change nothing.
func TestFairUseHoldTTL(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_CHECKOUT_MAX_HOLD_TTL": "60s", "INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME": "60s"})
	ts.seed("TEE", 100)
	tok := ts.checkoutToken("cart-1")

	r := ts.gql(tok, `mutation($in: ReserveInput!) { reserve(input: $in) { reservation { id } userErrors { code message field } } }`, map[string]any{"in": map[string]any{"checkoutId": "cart-1", "requestKey": "long", "ttlSeconds": 61,
		"lines": []map[string]any{{"sku": "TEE", "location": "AMS", "quantity": 1}}}})
	var p struct {
		Reservation *struct{ ID string }
		UserErrors  []struct {
			Code, Message string
			Field         []string
		}
	}
	ts.mustData(r, "reserve", &p)
	if p.Reservation != nil || len(p.UserErrors) != 1 || p.UserErrors[0].Code != "LIMIT_EXCEEDED" ||
		!strings.Contains(p.UserErrors[0].Message, "INVENTORY_CHECKOUT_MAX_HOLD_TTL") || strings.Join(p.UserErrors[0].Field, ".") != "input.ttlSeconds" {
		t.Fatalf("ttl 61 with a 60 s limit: %+v", p)
	}
	if n := ts.count("SELECT count(*) FROM reservations"); n != 0 {
		t.Fatalf("a refused reserve left %d reservations", n)
	}
	if got := reserveAs(t, ts.url, ts.service, "cart-1", "svc-long", "TEE", 1, 86400); got.Reservation == nil {
		t.Fatalf("the service key is not bound by the checkout limit: %+v", got)
	}

	held := reserveAs(t, ts.url, tok, "cart-1", "k", "TEE", 1, 30)
	if held.Reservation == nil {
		t.Fatalf("ttl 30: %+v", held)
	}
	extend := func(bearer string, ttl int) (string, string) {
		var e struct {
			Reservation *struct{ ExpiresAt string }
			UserErrors  []struct{ Code, Message string }
		}
		ts.mustData(ts.gql(bearer, `mutation($id: ID!, $ttl: Int!) { extendReservation(input: {id: $id, ttlSeconds: $ttl}) {
			reservation { expiresAt } userErrors { code message } } }`, map[string]any{"id": held.Reservation.ID, "ttl": ttl}), "extendReservation", &e)
		if len(e.UserErrors) > 0 {
			return e.UserErrors[0].Code, e.UserErrors[0].Message
		}
		return "", e.Reservation.ExpiresAt
	}
	before := ts.count(fmt.Sprintf("SELECT extract(epoch FROM expires_at)::int FROM reservations WHERE id = '%s'", held.Reservation.ID))
	if code, msg := extend(tok, 61); code != "LIMIT_EXCEEDED" || !strings.Contains(msg, "INVENTORY_CHECKOUT_MAX_HOLD_TTL") {
		t.Fatalf("extend by 61 s: %s %s", code, msg)
	}
	if code, msg := extend(tok, 50); code != "" {
		t.Fatalf("extend by 50 s (a lifetime of about 50 s of 60): %s %s", code, msg)
	}
	// 60 s from now is 60 s plus the time since creation: past the lifetime.
	if code, msg := extend(tok, 60); code != "LIMIT_EXCEEDED" || !strings.Contains(msg, "INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME") {
		t.Fatalf("extend by 60 s with a lifetime of 60 s: %s %s", code, msg)
	}
	after := ts.count(fmt.Sprintf("SELECT extract(epoch FROM expires_at)::int FROM reservations WHERE id = '%s'", held.Reservation.ID))
	if after-before < 15 || after-before > 25 {
		t.Fatalf("deadline moved %d s; only the 50 s extension (from a 30 s hold, so about 20 s) may move it", after-before)
	}
	if code, msg := extend(ts.service, 3600); code != "" {
		t.Fatalf("the service key extends past the checkout lifetime: %s %s", code, msg)
	}
}

// TestFairUseUnitsAndHoldsConcurrently: one checkout token's concurrent
// reserves, on two instances, single lines (which are coalesced) and
// baskets alike, never hold more than INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU
// units of a SKU or INVENTORY_CHECKOUT_MAX_LIVE_HOLDS holds; the rest are
// LIMIT_EXCEEDED, not OUT_OF_STOCK, and no allocation failure is counted for
// them. Counted in SQL afterwards.
func TestFairUseUnitsAndHoldsConcurrently(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU": "5", "INVENTORY_CHECKOUT_MAX_LIVE_HOLDS": "8"})
	second, _ := ts.startInstance()
	ts.seed("HOT", 1000)
	for i := range 12 {
		ts.seed(fmt.Sprintf("S%d", i), 100)
	}
	urls := []string{ts.url, second}

	// Round 1: 30 reserves of one HOT unit each (and some baskets of two),
	// from one checkout: exactly 5 units held.
	tok := ts.checkoutToken("flash")
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := range 30 {
		wg.Go(func() {
			vars := reserveVars("flash", fmt.Sprintf("k%d", i), "HOT", 1)
			if i%5 == 0 { // a basket: HOT plus one of another SKU
				vars["in"].(map[string]any)["lines"] = []map[string]any{{"sku": "HOT", "location": "AMS", "quantity": 1}, {"sku": "S0", "location": "AMS", "quantity": 1}}
			}
			r, err := gqlTo(urls[i%2], tok, reserveMutation, vars)
			if err != nil {
				t.Error(err)
				return
			}
			p, err := decodeReserve(r)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			codes[codeOf(p)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[""] != 5 || codes["LIMIT_EXCEEDED"] != 25 {
		t.Fatalf("30 one-unit reserves with a limit of 5 units: outcomes %v", codes)
	}
	if n := ts.count(`SELECT coalesce(sum(l.quantity), 0) FROM reservation_lines l JOIN reservations r ON r.id = l.reservation_id
		JOIN skus s ON s.id = l.sku_id WHERE r.checkout_id = 'flash' AND r.status = 'held' AND s.code = 'HOT'`); n != 5 {
		t.Fatalf("checkout holds %d HOT units; the limit is 5", n)
	}
	if n := ts.count(`SELECT reserved FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = 'HOT'`); n != 5 {
		t.Fatalf("HOT reserved = %d, want 5", n)
	}
	if n := ts.count("SELECT count(*) FROM allocation_failures"); n != 0 {
		t.Fatalf("%d allocation failures counted for fair-use refusals", n)
	}

	// Round 2: 20 reserves of distinct SKUs from a fresh checkout: exactly 8
	// live holds.
	tok2 := ts.checkoutToken("hoarder")
	codes = map[string]int{}
	for i := range 24 {
		wg.Go(func() {
			p := reserveAs(t, urls[i%2], tok2, "hoarder", fmt.Sprintf("k%d", i), fmt.Sprintf("S%d", i%12), 1, 0)
			mu.Lock()
			codes[codeOf(p)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[""] != 8 || codes["LIMIT_EXCEEDED"] != 16 {
		t.Fatalf("24 reserves with a limit of 8 live holds: outcomes %v", codes)
	}
	if n := ts.count("SELECT count(*) FROM reservations WHERE checkout_id = 'hoarder'"); n != 8 {
		t.Fatalf("%d reservation rows for the hoarder; refused ones must leave none", n)
	}

	// A retry of an accepted request is a replay, not a refusal; releasing a
	// hold frees its place; the service key is not bound.
	var accepted string
	if err := ts.db.QueryRow(t.Context(), "SELECT request_key FROM reservations WHERE checkout_id = 'hoarder' ORDER BY created_at LIMIT 1").Scan(&accepted); err != nil {
		t.Fatal(err)
	}
	var idx int
	if _, err := fmt.Sscanf(accepted, "k%d", &idx); err != nil {
		t.Fatal(err)
	}
	sku := fmt.Sprintf("S%d", idx%12)
	if p := reserveAs(t, ts.url, tok2, "hoarder", accepted, sku, 1, 0); !p.Replayed || p.Reservation == nil {
		t.Fatalf("a retry of an accepted key at the limit: %+v", p)
	}
	if p := reserveAs(t, ts.url, tok2, "hoarder", "one-more", "S0", 1, 0); codeOf(p) != "LIMIT_EXCEEDED" {
		t.Fatalf("ninth hold: %+v", p)
	}
	var id string
	if err := ts.db.QueryRow(t.Context(), "SELECT id FROM reservations WHERE checkout_id = 'hoarder' AND request_key = $1", accepted).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var rel map[string]any
	ts.mustData(ts.gql(tok2, `mutation($id: ID!) { releaseReservation(input: {id: $id}) { userErrors { code } } }`, map[string]any{"id": id}), "releaseReservation", &rel)
	if p := reserveAs(t, ts.url, tok2, "hoarder", "one-more", "S0", 1, 0); p.Reservation == nil {
		t.Fatalf("after a release the checkout may hold again: %+v", p)
	}
	for i := range 3 {
		if p := reserveAs(t, ts.url, ts.service, "hoarder", fmt.Sprintf("svc-%d", i), "HOT", 10, 0); p.Reservation == nil {
			t.Fatalf("the service key reserving for the checkout is not bound: %+v", p)
		}
	}
}

// TestCheckoutTokenMaxTTL: issueCheckoutToken refuses a lifetime above
// INVENTORY_CHECKOUT_TOKEN_MAX_TTL, naming the setting.
func TestCheckoutTokenMaxTTL(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_CHECKOUT_TOKEN_MAX_TTL": "10m"})
	r := ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "c", ttlSeconds: 601) { token } }`, nil)
	if r.errorCode() != "BAD_REQUEST" || len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, "INVENTORY_CHECKOUT_TOKEN_MAX_TTL") {
		t.Fatalf("601 s with a 10 min limit: %+v", r)
	}
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "c", ttlSeconds: 600) { token } }`, nil), "issueCheckoutToken", &tok)
	if tok.Token == "" {
		t.Fatal("no token for 600 s")
	}
}

// TestFairUseSettingsValidated: limits outside what the server can honour
// are refused at start-up, naming the variable.
func TestFairUseSettingsValidated(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"INVENTORY_CHECKOUT_MAX_HOLD_TTL=25h":                                              "INVENTORY_CHECKOUT_MAX_HOLD_TTL must be between 1s and 24h",
		"INVENTORY_CHECKOUT_TOKEN_MAX_TTL=48h":                                             "INVENTORY_CHECKOUT_TOKEN_MAX_TTL must be between 1s and 24h",
		"INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU=0":                                           "INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU must be a positive integer",
		"INVENTORY_CHECKOUT_MAX_HOLD_TTL=2h INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME=1h":       "must not be longer than INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME",
		"INVENTORY_CHECKOUT_MAX_LIVE_HOLDS=many":                                           "INVENTORY_CHECKOUT_MAX_LIVE_HOLDS must be a positive integer",
		"INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME=500ms INVENTORY_CHECKOUT_MAX_HOLD_TTL=500ms": "INVENTORY_CHECKOUT_MAX_HOLD_TTL must be between 1s and 24h",
	} {
		vars := map[string]string{"DATABASE_URL": "postgres://x"}
		for _, kv := range strings.Fields(env) {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
		_, err := config.Load(func(k string) string { return vars[k] })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", env, err, want)
		}
	}
}
