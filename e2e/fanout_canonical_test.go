package e2e

import (
	"fmt"
	"testing"
)

// TestAvailabilityChangedGroupsAreCanonical: anonymous availabilityChanged
// subscriptions that ask the same question in other words (the SKUs in
// another order or twice, a location twice, the document spaced otherwise,
// the list inline or in a variable) are one fan-out group, executed once a
// tick between them. Keyed by the raw document and variables, 12 spellings
// were 12 groups, each reading and serializing on its own. A subscription
// with another selection stays a group of its own.
func TestAvailabilityChangedGroupsAreCanonical(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("A", 5)
	ts.seed("B", 5)
	const doc = `subscription($s: [String!]!, $l: [String!]) { availabilityChanged(skus: $s, locations: $l) { sku available } }`
	spellings := []struct {
		query string
		vars  map[string]any
	}{
		{doc, map[string]any{"s": []string{"A", "B"}, "l": []string{"AMS"}}},
		{doc, map[string]any{"s": []string{"B", "A"}, "l": []string{"AMS"}}},
		{doc, map[string]any{"s": []string{"B", "A", "B"}, "l": []string{"AMS", "AMS"}}},
		{doc, map[string]any{"l": []string{"AMS"}, "s": []string{"A", "A", "B"}}},
		{`subscription  ($s:[String!]!,$l:[String!])  {availabilityChanged(locations:$l, skus:$s){ sku available }}`, map[string]any{"s": []string{"B", "A"}, "l": []string{"AMS"}}},
		{`subscription { availabilityChanged(skus: ["A", "B"], locations: ["AMS"]) { sku available } }`, nil},
		{`subscription { availabilityChanged(skus: ["B", "A"], locations: ["AMS", "AMS"]) { sku available } }`, nil},
		{`subscription S { availabilityChanged(skus: ["B", "A"], locations: ["AMS"]) { sku available } }`, nil},
	}
	var subs []*wsClient
	for i, sp := range spellings {
		c := dialWS(t, ts.url, "", false)
		c.ack()
		c.subscribe(fmt.Sprint("s", i), sp.query, sp.vars)
		subs = append(subs, c)
	}
	other := dialWS(t, ts.url, "", false)
	other.ack()
	other.subscribe("other", `subscription { availabilityChanged(skus: ["A", "B"], locations: ["AMS"]) { sku onHand } }`, nil)
	ts.waitMetric("inventory_subscribers", float64(len(spellings)+1))
	ts.waitMetric("inventory_subscription_group_members", float64(len(spellings)+1))
	ts.waitMetric("inventory_subscription_groups", 2)
	for i, c := range subs {
		got := map[string]bool{}
		for range 2 {
			var a struct{ SKU string }
			c.data("availabilityChanged", &a, 10e9)
			got[a.SKU] = true
		}
		if !got["A"] || !got["B"] {
			t.Errorf("spelling %d: first values for %v, want A and B", i, got)
		}
	}
}
