package fanout_test

import (
	"fmt"
	"testing"

	"inventory/fanout"
)

// TestAvailabilityChangedGroupsAreCanonical: availabilityChanged
// subscriptions that ask the same question in other words (the SKUs in
// another order or twice, a location twice, the document spaced otherwise,
// the list inline or in a variable, an operation name) are one fan-out
// group, executed once a tick between them. Keyed by the raw document and
// variables, 8 spellings were 8 groups, each reading and serializing on its
// own. A subscription with another selection stays a group of its own.
func TestAvailabilityChangedGroupsAreCanonical(t *testing.T) {
	t.Parallel()
	e := setup(t, fanout.Config{})
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
		c := e.dial("", false, false)
		c.subscribe(fmt.Sprint("s", i), sp.query, sp.vars)
		subs = append(subs, c)
	}
	other := e.dial("", false, false)
	other.subscribe("other", `subscription { availabilityChanged(skus: ["A", "B"], locations: ["AMS"]) { sku onHand } }`, nil)
	e.waitStats(2, int64(len(spellings)+1))
	if n := e.feed.started.Load(); n != 2 {
		t.Fatalf("%d executions for two questions, want 2", n)
	}

	e.feed.publish("A", 3)
	e.feed.publish("B", 4)
	e.feed.publish("C", 5) // asked by no one
	for i, c := range subs {
		got := map[string]int{}
		for range 2 {
			var a struct {
				SKU       string
				Available int
			}
			c.data(fmt.Sprint("s", i), "availabilityChanged", &a)
			got[a.SKU] = a.Available
		}
		if got["A"] != 3 || got["B"] != 4 {
			t.Errorf("spelling %d: values %v, want A 3 and B 4", i, got)
		}
	}
	var o struct {
		SKU       string
		OnHand    *int
		Available *int
	}
	other.data("other", "availabilityChanged", &o)
	if o.SKU != "A" || o.OnHand == nil || *o.OnHand != 3 || o.Available != nil {
		t.Fatalf("the other selection: %+v, want A's onHand alone", o)
	}
	if s := e.reg.Stats(); s.Executions != 2*2 {
		t.Fatalf("executions: %d, want 4 (two values for each of two groups)", s.Executions)
	}
}
