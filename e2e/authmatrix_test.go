package e2e

import (
	"fmt"
	"testing"
)

// TestAuthMatrix sends every operation as every kind of caller over HTTP and
// checks who gets through, who gets UNAUTHENTICATED and who FORBIDDEN, and
// that refused mutations change nothing. Its bad tokens all come from one
// address: the failed-authentication limit (TestFailedAuthLimitedPerIP) is
// off here.
func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_RATE_LIMIT_AUTH_FAILURES": "0"})
	ts.seed("HP-1", 100)

	var tok struct {
		Token string `json:"token"`
	}
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-A", ttlSeconds: 600) { token expiresAt } }`, nil), "issueCheckoutToken", &tok)
	callers := []struct{ name, token string }{
		{"anonymous", ""},
		{"invalid", "inv_not-a-real-key"},
		{"garbage-jwt", "a.b.c"},
		{"checkout", tok.Token},
		{"service", ts.service},
		{"admin", ts.admin},
	}
	const ok, unauth, forbid = "", "UNAUTHENTICATED", "FORBIDDEN"
	n := 0
	ops := []struct {
		name     string
		query    func() string // a fresh document each call, so successful creates do not collide
		mutation bool
		want     map[string]string // by caller; a rejected token (invalid, garbage-jwt) is always UNAUTHENTICATED
	}{
		{"availability", func() string { return `{ availability(skus: ["HP-1"]) { sku } }` }, false,
			map[string]string{"anonymous": ok, "checkout": ok, "service": ok, "admin": ok}},
		{"sku", func() string { return `{ sku(code: "HP-1") { code } }` }, false,
			map[string]string{"anonymous": ok, "checkout": ok, "service": ok, "admin": ok}},
		{"Sku.lowStockThreshold", func() string { return `{ sku(code: "HP-1") { code lowStockThreshold } }` }, false,
			map[string]string{"anonymous": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{"locations", func() string { return `{ locations { code } }` }, false,
			map[string]string{"anonymous": ok, "checkout": ok, "service": ok, "admin": ok}},
		{"reconciliation", func() string { return `{ reconciliation { kind } }` }, false,
			map[string]string{"anonymous": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{"issueCheckoutToken", func() string { return `mutation { issueCheckoutToken(checkoutId: "cart-B") { token } }` }, true,
			map[string]string{"anonymous": unauth, "checkout": forbid, "service": ok, "admin": ok}},
		{"createLocation", func() string {
			n++
			return fmt.Sprintf(`mutation { createLocation(input: {code: "L%d", name: "x"}) { userErrors { code } } }`, n)
		}, true, map[string]string{"anonymous": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{"createSku", func() string {
			n++
			return fmt.Sprintf(`mutation { createSku(input: {code: "S%d", name: "x", kind: CODES}) { userErrors { code } } }`, n)
		}, true, map[string]string{"anonymous": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{"setSkuLowStockThreshold", func() string {
			n++
			return fmt.Sprintf(`mutation { setSkuLowStockThreshold(sku: "HP-1", threshold: %d) { userErrors { code } } }`, n)
		}, true, map[string]string{"anonymous": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{"receiveStock", func() string {
			n++ // each call its own receipt: a repeated reference is a replay
			return fmt.Sprintf(`mutation { receiveStock(input: {sku: "HP-1", location: "AMS", quantity: 1, reference: "r%d"}) { userErrors { code } } }`, n)
		}, true, map[string]string{"anonymous": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{"adjustStock", func() string {
			n++
			return fmt.Sprintf(`mutation { adjustStock(input: {sku: "HP-1", location: "AMS", delta: -1, reason: "other", reference: "a%d"}) { userErrors { code } } }`, n)
		}, true, map[string]string{"anonymous": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{"setStockLevels", func() string {
			n++
			return fmt.Sprintf(`mutation { setStockLevels(input: {reference: "sync-%d", levels: [{sku: "HP-1", location: "AMS", onHand: %d}]}) { userErrors { code } } }`, n, 100+n)
		}, true, map[string]string{"anonymous": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
	}
	// writes grows by one with each successful mutation but the token's.
	const writes = `SELECT (SELECT count(*) FROM stock_movements) + (SELECT count(*) FROM locations) + (SELECT count(*) FROM skus)
		+ (SELECT count(*) FROM skus WHERE low_stock_threshold IS NOT NULL)`
	for _, op := range ops {
		for _, c := range callers {
			want, found := op.want[c.name]
			if !found {
				want = unauth // a rejected token is an error on every path, never anonymous
			}
			before := ts.count(writes)
			r := ts.gql(c.token, op.query(), nil)
			if got := r.errorCode(); got != want {
				t.Errorf("%s as %s: got %q, want %q (%+v)", op.name, c.name, got, want, r.Errors)
				continue
			}
			after := ts.count(writes)
			if want != ok && after != before {
				t.Errorf("%s as %s was refused but changed the database (%d -> %d rows)", op.name, c.name, before, after)
			}
			if want == ok && op.mutation && op.name != "issueCheckoutToken" && after != before+1 {
				t.Errorf("%s as %s succeeded but wrote %d rows", op.name, c.name, after-before)
			}
		}
	}

	// A rejected token is told why when it tries something that needs one.
	r := ts.gql("inv_not-a-real-key", `{ reconciliation { kind } }`, nil)
	if len(r.Errors) == 0 || r.Errors[0].Message != "authentication required: unknown or revoked API key" {
		t.Fatalf("got %+v", r.Errors)
	}
	// A checkout token cannot mint a token for another checkout (nor its own).
	r = ts.gql(tok.Token, `mutation { issueCheckoutToken(checkoutId: "cart-A") { token } }`, nil)
	if r.errorCode() != forbid {
		t.Fatalf("checkout minting its own token: %+v", r)
	}
	// A header that is not "Bearer <token>" is not accepted.
	r = ts.gqlAuth("Basic "+ts.admin, `{ reconciliation { kind } }`, nil)
	if r.errorCode() != unauth || r.Errors[0].Message != `authentication required: the Authorization header must be "Bearer <token>"` {
		t.Fatalf("got %+v", r)
	}
}
