package e2e

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// refusedCursor fails unless r is the one refusal of a bad cursor:
// BAD_REQUEST with userErrorCode INVALID_CURSOR, and no data.
func refusedCursor(t *testing.T, what string, r gqlResponse, field string) {
	t.Helper()
	if r.errorCode() != "BAD_REQUEST" || r.Errors[0].Extensions["userErrorCode"] != "INVALID_CURSOR" {
		t.Fatalf("%s: %+v; want BAD_REQUEST with userErrorCode INVALID_CURSOR", what, r)
	}
	if d := string(r.Data[field]); d != "" && d != "null" {
		t.Fatalf("%s: refused, yet answered %s", what, d)
	}
}

// TestConnectionCursorsAreBound: a cursor only continues the list it was
// given out for. Edited by hand (a character changed, the payload swapped
// for another's under the same signature, an unsigned position in the old
// balances cursor's format), moved to another checkout's list, or to
// another kind of list, it is refused with INVALID_CURSOR and reads
// nothing; a checkout token of B cannot read A's reservations with A's
// cursor either way (FORBIDDEN for A's checkoutId, INVALID_CURSOR for B's).
func TestConnectionCursorsAreBound(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	insertReservations(ts, "cart-A", 3)
	insertReservations(ts, "cart-B", 3)
	insertBalances(ts, 2)

	page := func(token, checkout string, after any) gqlResponse {
		return ts.gql(token, reservationsConnection, map[string]any{"c": checkout, "first": 1, "after": after})
	}
	var a connPage
	ts.mustData(page(ts.service, "cart-A", nil), "checkoutReservationsConnection", &a)
	cursorA := *a.PageInfo.EndCursor
	ts.mustData(page(ts.service, "cart-A", cursorA), "checkoutReservationsConnection", &a) // valid: continues
	if len(a.Edges) != 1 || !a.PageInfo.HasNextPage {
		t.Fatalf("cart-A's second page: %+v", a)
	}

	// Edited: each character in turn changed to another of the alphabet.
	for i := range cursorA {
		c := []byte(cursorA)
		c[i] = "AB"[btoi(c[i] == 'A')]
		refusedCursor(t, fmt.Sprintf("character %d changed", i), page(ts.service, "cart-A", string(c)), "checkoutReservationsConnection")
	}
	// Re-signing attempt: B's position under A's signature, and the reverse.
	var b connPage
	ts.mustData(page(ts.service, "cart-B", nil), "checkoutReservationsConnection", &b)
	cursorB := *b.PageInfo.EndCursor
	rawA, _ := base64.RawURLEncoding.DecodeString(cursorA)
	rawB, _ := base64.RawURLEncoding.DecodeString(cursorB)
	spliced := append(rawB[:len(rawB)-32:len(rawB)-32], rawA[len(rawA)-32:]...)
	refusedCursor(t, "B's position with A's MAC", page(ts.service, "cart-A", base64.RawURLEncoding.EncodeToString(spliced)), "checkoutReservationsConnection")
	refusedCursor(t, "B's position with A's MAC, as B", page(ts.service, "cart-B", base64.RawURLEncoding.EncodeToString(spliced)), "checkoutReservationsConnection")
	for _, junk := range []string{"not a cursor", cursorA + "A", cursorA[:len(cursorA)-1], cursorA + "\n", strings.Repeat("A", 5000),
		base64.RawURLEncoding.EncodeToString([]byte("P-000\x00AMS"))} {
		refusedCursor(t, fmt.Sprintf("cursor %.40q", junk), page(ts.service, "cart-A", junk), "checkoutReservationsConnection")
	}

	// Another checkout's list: A's cursor as B's, with the service key and
	// with B's own checkout token.
	refusedCursor(t, "A's cursor on B's list", page(ts.service, "cart-B", cursorA), "checkoutReservationsConnection")
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-B") { token } }`, nil), "issueCheckoutToken", &tok)
	refusedCursor(t, "B's token, A's cursor on B's list", page(tok.Token, "cart-B", cursorA), "checkoutReservationsConnection")
	if r := page(tok.Token, "cart-A", cursorA); r.errorCode() != "FORBIDDEN" || strings.Contains(string(r.Data["checkoutReservationsConnection"]), "node") {
		t.Fatalf("B's token on A's list with A's cursor: %+v; want FORBIDDEN", r)
	}
	ts.mustData(page(tok.Token, "cart-B", cursorB), "checkoutReservationsConnection", &b) // B's own cursor works for B

	// Another kind of list: a reservations cursor on balances and back.
	const balances = `query($after: String) { balancesConnection(first: 1, after: $after) { edges { node { sku } } pageInfo { endCursor } } }`
	refusedCursor(t, "reservations cursor on balances", ts.gql(ts.admin, balances, map[string]any{"after": cursorA}), "balancesConnection")
	var bal connPage
	ts.mustData(ts.gql(ts.admin, balances, nil), "balancesConnection", &bal)
	refusedCursor(t, "balances cursor on reservations", page(ts.service, "cart-A", *bal.PageInfo.EndCursor), "checkoutReservationsConnection")
	for _, q := range []string{
		`query($after: String) { reconciliationConnection(after: $after) { pageInfo { endCursor } } }`,
		`query($after: String) { waitlistLinesConnection(after: $after) { pageInfo { endCursor } } }`,
		`query($after: String) { webhookDeliveriesConnection(endpointId: "00000000-0000-0000-0000-000000000000", after: $after) { pageInfo { endCursor } } }`,
	} {
		r := ts.gql(ts.admin, q, map[string]any{"after": *bal.PageInfo.EndCursor})
		if r.errorCode() != "BAD_REQUEST" || r.Errors[0].Extensions["userErrorCode"] != "INVALID_CURSOR" {
			t.Fatalf("balances cursor on %s: %+v", q, r)
		}
	}

	// Bad page sizes are refused as on the lists.
	for _, first := range []int{0, 101} {
		if r := ts.gql(ts.service, reservationsConnection, map[string]any{"c": "cart-A", "first": first}); r.errorCode() != "BAD_REQUEST" {
			t.Fatalf("first %d: %+v, want BAD_REQUEST", first, r)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestConnectionsCostAsTheirLists: each connection's query complexity is its
// list's for the same rows and node fields (edges and node add nothing of
// their own), read from the refusal under a limit of 20 (every query here asks for more; none has 20 fields).
func TestConnectionsCostAsTheirLists(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_MAX_COMPLEXITY": "20"})
	cost := regexp.MustCompile(`complexity (\d+)`)
	of := func(q string) string {
		t.Helper()
		r := ts.gql(ts.admin, q, nil)
		if len(r.Errors) == 0 {
			t.Fatalf("%s: answered under a complexity limit of 20", q)
		}
		m := cost.FindStringSubmatch(r.Errors[0].Message)
		if m == nil {
			t.Fatalf("%s: %+v; want a complexity refusal", q, r)
		}
		return m[1]
	}
	for _, c := range []struct{ list, conn string }{
		{`{ checkoutReservations(checkoutId: "c", first: 70) { id status } }`,
			`{ checkoutReservationsConnection(checkoutId: "c", first: 70) { edges { node { id status } } } }`},
		{`{ checkoutReservations(checkoutId: "c") { id } }`, `{ checkoutReservationsConnection(checkoutId: "c") { edges { node { id } } } }`},
		{`{ balances(first: 1000) { balances { sku location onHand } } }`, `{ balancesConnection(first: 1000) { edges { node { sku location onHand } } } }`},
		{`{ balances { balances { sku } } }`, `{ balancesConnection { edges { node { sku } } } }`},
		{`{ webhookDeliveries(endpointId: "e", first: 100) { id at } }`, `{ webhookDeliveriesConnection(endpointId: "e", first: 100) { edges { node { id at } } } }`},
		{`{ reconciliation(first: 1000) { sku kind } }`, `{ reconciliationConnection(first: 1000) { edges { node { sku kind } } } }`},
		{`{ reconciliation { sku } }`, `{ reconciliationConnection { edges { node { sku } } } }`},
	} {
		if l, k := of(c.list), of(c.conn); l != k {
			t.Errorf("%s costs %s but %s costs %s", c.list, l, c.conn, k)
		}
	}
	// A waitlist lines field counts every waiting entry whatever its page
	// (api.WaitlistLinesCost): 100 rows of 2 fields, 300 by its rows, cost
	// 2,000 in either shape.
	for _, q := range []string{`{ waitlistLines(first: 100) { sku waiting } }`, `{ waitlistLinesConnection(first: 100) { edges { node { sku waiting } } } }`} {
		if got := of(q); got != "2000" {
			t.Errorf("%s costs %s, want 2000", q, got)
		}
	}
}

// TestConnectionsAuthorize: each connection asks what its list asks:
// anonymous callers are UNAUTHENTICATED everywhere; a service key reads a
// checkout's reservations but none of the admin lists; a checkout token
// reads its own checkout's reservations only.
func TestConnectionsAuthorize(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	insertReservations(ts, "cart-A", 2)
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-A") { token } }`, nil), "issueCheckoutToken", &tok)
	admin := []string{
		`{ balancesConnection { pageInfo { hasNextPage } } }`,
		`{ webhookDeliveriesConnection(endpointId: "00000000-0000-0000-0000-000000000000") { pageInfo { hasNextPage } } }`,
		`{ reconciliationConnection { pageInfo { hasNextPage } } }`,
		`{ waitlistLinesConnection { pageInfo { hasNextPage } } }`,
	}
	own := `{ checkoutReservationsConnection(checkoutId: "cart-A") { edges { node { id } } } }`
	for _, q := range append(admin, own) {
		if r := ts.gql("", q, nil); r.errorCode() != "UNAUTHENTICATED" {
			t.Errorf("anonymous %s: %+v", q, r)
		}
		if r := ts.gql(ts.admin, q, nil); len(r.Errors) != 0 {
			t.Errorf("admin %s: %+v", q, r)
		}
	}
	for _, q := range admin {
		for who, token := range map[string]string{"service": ts.service, "checkout": tok.Token} {
			if r := ts.gql(token, q, nil); r.errorCode() != "FORBIDDEN" {
				t.Errorf("%s %s: %+v, want FORBIDDEN", who, q, r)
			}
		}
	}
	for who, token := range map[string]string{"service": ts.service, "checkout": tok.Token} {
		var p connPage
		ts.mustData(ts.gql(token, own, nil), "checkoutReservationsConnection", &p)
		if len(p.Edges) != 2 {
			t.Errorf("%s: %d of cart-A's 2 reservations", who, len(p.Edges))
		}
	}
	if r := ts.gql(tok.Token, strings.Replace(own, "cart-A", "cart-B", 1), nil); r.errorCode() != "FORBIDDEN" {
		t.Errorf("cart-A's token on cart-B: %+v, want FORBIDDEN", r)
	}
}
