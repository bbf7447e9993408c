package e2e

import (
	"strings"
	"testing"
)

// TestUnknownCredentialIsAnErrorOnEveryPath: availability (and any query)
// with an unknown, revoked or forged bearer token answered 200 as if
// anonymous, while a mutation said "unknown or revoked API key": a
// storefront whose key was revoked never learned it. Now every operation
// with such a credential is UNAUTHENTICATED, saying why, and changes and
// reads nothing. An expired checkout token was genuine: a storefront tab
// left open past it keeps reading the catalog as anonymous.
func TestUnknownCredentialIsAnErrorOnEveryPath(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	revoked := ts.cli("token", "create", "--role", "service", "--name", "to-revoke")
	ts.cli("token", "revoke", "to-revoke")
	for _, c := range []struct{ name, token, want string }{
		{"unknown key", "inv_nosuchkey", "unknown or revoked API key"},
		{"revoked key", revoked, "unknown or revoked API key"},
		{"forged checkout token", "not.a.token", "checkout token"},
	} {
		for _, q := range []string{
			`{ availability(skus: ["HP"]) { sku available } }`,
			`{ locations { code } }`,
			`{ sku(code: "HP") { code } }`,
		} {
			r := ts.gql(c.token, q, nil)
			if r.errorCode() != "UNAUTHENTICATED" || len(r.Data) > 0 || !strings.Contains(r.Errors[0].Message, c.want) {
				t.Errorf("%s, %s: want UNAUTHENTICATED saying %q and no data, got %+v", c.name, q, c.want, r)
			}
		}
	}
	// Anonymous, and a valid key, read as before.
	for _, token := range []string{"", ts.service} {
		if r := ts.gql(token, `{ availability(skus: ["HP"]) { sku available } }`, nil); len(r.Errors) > 0 {
			t.Fatalf("availability with %q: %+v", token, r.Errors)
		}
	}
}
