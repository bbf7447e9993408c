package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestServerEndToEnd boots the real wiring on a free port and walks the
// foundation's surface over HTTP: health, GraphiQL, catalog, receiving,
// adjustments, availability, reconciliation, key revocation and shutdown.
func TestServerEndToEnd(t *testing.T) {
	t.Parallel()
	ts := setup(t)

	if code, body := httpGet(t, ts.url+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz: %d %q", code, body)
	}
	if code, body := httpGet(t, ts.url+"/readyz"); code != 200 {
		t.Fatalf("readyz: %d %q", code, body)
	}
	code, page := httpGet(t, ts.url+"/")
	if code != 200 || !strings.Contains(page, `src="/graphiql/graphiql.min.js"`) || strings.Contains(page, "cdn.jsdelivr") {
		t.Fatalf("GraphiQL page must load embedded assets: %d %.300s", code, page)
	}
	for _, asset := range []string{"graphiql.min.js", "graphiql.min.css", "react.production.min.js", "react-dom.production.min.js"} {
		if code, body := httpGet(t, ts.url+"/graphiql/"+asset); code != 200 || len(body) < 1000 {
			t.Fatalf("asset %s: %d, %d bytes", asset, code, len(body))
		}
	}

	ts.seed("HP-1", 10)
	var adj struct {
		Balance struct {
			OnHand    int `json:"onHand"`
			Reserved  int `json:"reserved"`
			Available int `json:"available"`
		} `json:"balance"`
		UserErrors []any `json:"userErrors"`
	}
	ts.mustData(ts.gql(ts.admin, `mutation { adjustStock(input: {sku: "HP-1", location: "AMS", delta: -3, reason: "damaged", reference: "RMA-7", expectedOnHand: 10}) {
		balance { onHand reserved available } userErrors { code } } }`, nil), "adjustStock", &adj)
	if adj.Balance.OnHand != 7 || adj.Balance.Available != 7 || len(adj.UserErrors) != 0 {
		t.Fatalf("adjustStock: %+v", adj)
	}

	// The storefront reads anonymously.
	var avail []*struct {
		SKU       string `json:"sku"`
		Available int    `json:"available"`
		Locations []struct {
			Location string `json:"location"`
			OnHand   int    `json:"onHand"`
		} `json:"locations"`
	}
	// availability is for display: it may be up to
	// INVENTORY_AVAILABILITY_MAX_LAG (1 s) behind the write (docs/api.md,
	// "Freshness"), so the adjustment must show within that bound.
	readAvailability := func() bool {
		avail = nil
		ts.mustData(ts.gql("", `{ availability(skus: ["HP-1", "NOPE"]) { sku available locations { location onHand } } }`, nil), "availability", &avail)
		return len(avail) == 2 && avail[0] != nil && avail[0].Available == 7
	}
	waitUntil(t, 1500*time.Millisecond, "availability to show the adjustment within the copy's bound", readAvailability)
	if len(avail) != 2 || avail[0] == nil || avail[0].Available != 7 || avail[1] != nil || avail[0].Locations[0].Location != "AMS" {
		t.Fatalf("availability: %+v", avail)
	}
	var sku struct {
		Code     string `json:"code"`
		Kind     string `json:"kind"`
		Balances []struct {
			OnHand int `json:"onHand"`
		} `json:"balances"`
	}
	ts.mustData(ts.gql("", `{ sku(code: "HP-1") { code kind balances { onHand } } }`, nil), "sku", &sku)
	if sku.Kind != "QUANTITY" || len(sku.Balances) != 1 || sku.Balances[0].OnHand != 7 {
		t.Fatalf("sku: %+v", sku)
	}

	// The ledger explains the balance.
	if n := ts.count("SELECT sum(on_hand_delta) FROM stock_movements"); n != 7 {
		t.Fatalf("ledger sums to %d", n)
	}
	var issues []any
	ts.mustData(ts.gql(ts.admin, `{ reconciliation { kind sku location detail } }`, nil), "reconciliation", &issues)
	if len(issues) != 0 {
		t.Fatalf("reconciliation: %+v", issues)
	}
	if out := ts.cli("reconcile"); !strings.HasPrefix(out, "consistent") {
		t.Fatalf("inventory reconcile: %q", out)
	}

	// A revoked key stops working within the key cache's age.
	ts.cli("token", "revoke", "test-admin")
	ts.waitRefused(ts.url, ts.admin, time.Second)

	if err := ts.shutdown(); err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
}

// TestInternalErrorsLeakNothing breaks the database under the server and checks
// the client sees INTERNAL with a request id and no SQL.
func TestInternalErrorsLeakNothing(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP-1", 1)
	if _, err := ts.db.Exec(t.Context(), "ALTER TABLE balances RENAME TO balances_gone"); err != nil {
		t.Fatal(err)
	}
	r := ts.gql("", `{ availability(skus: ["HP-1"]) { sku } }`, nil)
	if r.errorCode() != "INTERNAL" {
		t.Fatalf("want INTERNAL, got %+v", r)
	}
	msg := r.Errors[0].Message
	if id, _ := r.Errors[0].Extensions["requestId"].(string); id == "" || !strings.Contains(msg, id) {
		t.Fatalf("no request id: %+v", r.Errors[0])
	}
	for _, leak := range []string{"balances", "relation", "SQLSTATE", "store.", "select", "SELECT"} {
		if strings.Contains(msg, leak) {
			t.Fatalf("error message leaks %q: %s", leak, msg)
		}
	}
	if code, _ := httpGet(t, ts.url+"/readyz"); code != 200 {
		t.Fatalf("readyz should only look at connectivity and migrations, got %d", code)
	}
}
