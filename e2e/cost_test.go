package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestCostCountsRows: at the default INVENTORY_MAX_COMPLEXITY a list field
// costs its children once per row it asks for. The attack, 330
// aliases of availability over one SKU repeated 500 times, costs 330,000
// and is refused (before: 660, answered with 165,000 entries); an honest
// availability of 500 SKUs with every field, and the dashboard's balances
// page, still pass. Duplicate SKUs are answered once per request, in order.
func TestCostCountsRows(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	same := make([]string, 500)
	for i := range same {
		same[i] = "HP"
	}
	var b strings.Builder
	b.WriteString("query($s: [String!]!) {")
	for i := range 330 {
		fmt.Fprintf(&b, " a%d: availability(skus: $s) { available }", i)
	}
	b.WriteString(" }")
	r := ts.gql("", b.String(), map[string]any{"s": same})
	if r.errorCode() != "COMPLEXITY_LIMIT_EXCEEDED" || !strings.Contains(r.Errors[0].Message, "complexity 330000") {
		t.Fatalf("330 aliases × 500 SKUs: %+v, want COMPLEXITY_LIMIT_EXCEEDED at complexity 330000", r)
	}

	full := `query($s: [String!]!) { availability(skus: $s) { sku available onHand reserved preorderAvailable
		locations { sku location onHand reserved available pendingSupply preordered updatedAt } } }`
	var got []struct {
		SKU       string
		Available int
		Locations []struct{ Location string }
	}
	ts.mustData(ts.gql("", full, map[string]any{"s": same}), "availability", &got)
	if len(got) != 500 {
		t.Fatalf("500 copies of one SKU: %d entries", len(got))
	}
	for i, a := range got {
		if a.SKU != "HP" || a.Available != 5 || len(a.Locations) != 1 || a.Locations[0].Location != "AMS" {
			t.Fatalf("entry %d: %+v", i, a)
		}
	}

	// A reconciliation field runs the whole check for any page size: it
	// costs at least 10,000, so an operation runs it at most twice (40
	// aliases of first: 1 were 10 s of database CPU at 50,000 balances).
	// firstOne is n aliases of field(first: 1), each asking one row.
	firstOne := func(field string, n int) string {
		var q strings.Builder
		q.WriteString("{")
		for i := range n {
			fmt.Fprintf(&q, " a%d: %s(first: 1) { __typename }", i, field)
		}
		return q.String() + " }"
	}
	if r := ts.gql(ts.admin, firstOne("reconciliationConnection", 2), nil); len(r.Errors) != 0 {
		t.Fatalf("two reconciliations: %+v", r.Errors)
	}
	if r := ts.gql(ts.admin, firstOne("reconciliationConnection", 3), nil); r.errorCode() != "COMPLEXITY_LIMIT_EXCEEDED" {
		t.Fatalf("three reconciliations: %+v, want COMPLEXITY_LIMIT_EXCEEDED", r)
	}
	if r := ts.gql(ts.admin, `{ a: reconciliation(first: 1) { sku } b: reconciliation(first: 1) { sku } c: reconciliation(first: 1) { sku } }`, nil); r.errorCode() != "COMPLEXITY_LIMIT_EXCEEDED" {
		t.Fatalf("three deprecated reconciliations: %+v, want COMPLEXITY_LIMIT_EXCEEDED", r)
	}

	// A waitlist lines field counts every waiting entry for any page size:
	// it costs at least 2,000, so an operation counts them ten times at
	// most (700 aliases of first: 1 were 8.9 s of database CPU at 200,000
	// waiting entries).
	for _, field := range []string{"waitlistLinesConnection", "waitlistLines"} {
		if r := ts.gql(ts.admin, firstOne(field, 10), nil); len(r.Errors) != 0 {
			t.Fatalf("ten %s: %+v", field, r.Errors)
		}
		if r := ts.gql(ts.admin, firstOne(field, 11), nil); r.errorCode() != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Fatalf("eleven %s: errors %+v, want COMPLEXITY_LIMIT_EXCEEDED", field, r.Errors)
		}
	}

	// The dashboard's own page query, as it sends it.
	js, err := os.ReadFile(repo("admin/assets/dashboard.js"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)const BALANCES = `(.*?)`;").FindSubmatch(js)
	if m == nil {
		t.Fatal("BALANCES not found in dashboard.js")
	}
	var page json.RawMessage
	ts.mustData(ts.gql(ts.admin, string(m[1]), nil), "balancesConnection", &page)
}
