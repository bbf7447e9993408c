package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLowStockThresholdIsAdminOnly: an SKU's own STOCK_LOW threshold is an
// admin's alerting setting, not catalog data: `sku { lowStockThreshold }`
// answers it to admin keys only. Anyone else gets the rest of the SKU, null
// for the field and an error saying why (UNAUTHENTICATED without a token,
// FORBIDDEN for a checkout token or a service key), never the value.
func TestLowStockThresholdIsAdminOnly(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 10)
	var p map[string]any
	ts.mustData(ts.gql(ts.admin, `mutation { setSkuLowStockThreshold(sku: "HP", threshold: 7) { userErrors { code } } }`, nil), "setSkuLowStockThreshold", &p)
	var tok struct {
		Token string `json:"token"`
	}
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-1") { token } }`, nil), "issueCheckoutToken", &tok)

	for _, c := range []struct{ caller, token, want string }{
		{"anonymous", "", "UNAUTHENTICATED"},
		{"checkout", tok.Token, "FORBIDDEN"},
		{"service", ts.service, "FORBIDDEN"},
		{"admin", ts.admin, ""},
	} {
		r := ts.gql(c.token, `{ sku(code: "HP") { code name lowStockThreshold } }`, nil)
		var sku struct {
			Code              string `json:"code"`
			LowStockThreshold *int   `json:"lowStockThreshold"`
		}
		if err := json.Unmarshal(r.Data["sku"], &sku); err != nil {
			t.Fatalf("%s: decode sku: %v (%s)", c.caller, err, r.Data["sku"])
		}
		switch got := r.errorCode(); {
		case got != c.want:
			t.Errorf("%s: error %q, want %q (%+v)", c.caller, got, c.want, r.Errors)
		case sku.Code != "HP":
			t.Errorf("%s: the rest of the SKU is missing: %s", c.caller, r.Data["sku"])
		case c.want == "" && (sku.LowStockThreshold == nil || *sku.LowStockThreshold != 7):
			t.Errorf("%s: lowStockThreshold %v, want 7", c.caller, sku.LowStockThreshold)
		case c.want != "" && sku.LowStockThreshold != nil:
			t.Errorf("%s reads the admin's alerting setting: lowStockThreshold = %d", c.caller, *sku.LowStockThreshold)
		case c.want != "" && strings.Contains(r.Errors[0].Message, "7"):
			t.Errorf("%s: the error names the value: %q", c.caller, r.Errors[0].Message)
		}
		t.Logf("%s: sku %s, errors %+v", c.caller, r.Data["sku"], r.Errors)
	}
}
