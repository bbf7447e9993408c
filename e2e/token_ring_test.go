package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestTokenSecretRing: INVENTORY_TOKEN_SECRET is a key ring. A checkout
// token and an admin session minted under key A verify on an instance
// configured "B,A" (rotation in progress), not on one configured "B" (A
// retired); the "B,A" instance signs new ones with B, which the "B" instance
// accepts. Before the fix "B,A" was one 65-byte secret and refused A's
// token ("checkout token invalid").
func TestTokenSecretRing(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 32)
	ts := setupWith(t, map[string]string{"INVENTORY_TOKEN_SECRET": a})
	ts.seed("TR", 5)
	tokenA := ts.checkoutToken("cart-a")
	cookieA := ts.signIn(ts.admin)
	if kid := jwtKeyID(t, tokenA); kid == "" {
		t.Fatal("a checkout token carries no kid")
	}

	ts.env["INVENTORY_TOKEN_SECRET"] = b + "," + a
	both, _ := ts.startInstance()
	ts.env["INVENTORY_TOKEN_SECRET"] = b
	onlyB, _ := ts.startInstance()

	works := func(u, token string) bool {
		r, err := gqlTo(u, token, `{ checkoutReservations(checkoutId: "cart-a") { id } }`, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Errors) == 0
	}
	session := func(u string, c *http.Cookie) int {
		resp, _ := adminRequest(t, http.MethodGet, u+"/admin/session", c, "", map[string]string{"X-Inventory-CSRF": "1"})
		return resp.StatusCode
	}
	if !works(both, tokenA) || session(both, cookieA) != 200 {
		t.Fatalf("key A's token or session refused on an instance configured B,A")
	}
	if works(onlyB, tokenA) || session(onlyB, cookieA) != http.StatusUnauthorized {
		t.Fatalf("key A's token or session accepted on an instance configured B")
	}
	// The B,A instance signs with B: its token and session work on B alone.
	var tok struct{ Token string }
	r, err := gqlTo(both, ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-a") { token } }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.Data["issueCheckoutToken"], &tok); err != nil {
		t.Fatal(err)
	}
	if jwtKeyID(t, tok.Token) == jwtKeyID(t, tokenA) {
		t.Fatal("the B,A instance signed with A")
	}
	resp, _ := adminRequest(t, http.MethodPost, both+"/admin/session", nil, `{"key":"`+ts.admin+`"}`, map[string]string{"X-Inventory-CSRF": "1"})
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 {
		t.Fatalf("sign-in on B,A: %d", resp.StatusCode)
	}
	if !works(onlyB, tok.Token) || session(onlyB, resp.Cookies()[0]) != 200 {
		t.Fatal("B's token or session refused on an instance configured B")
	}
}

// jwtKeyID reads the kid of a compact JWS header.
func jwtKeyID(t *testing.T, token string) string {
	t.Helper()
	h, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(raw, &hdr); err != nil {
		t.Fatal(err)
	}
	return hdr.Kid
}
