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

// TestAliasesShareOneExecution is the attack of subscribers who each ask
// for the same SKU under aliases of their own: keyed by the aliases, 1,000
// such anonymous subscriptions were 1,000 groups, each executed every tick
// (server CPU 0.23 → 0.69 cores, goroutines 3,066 → 7,062). Now every
// spelling of the question joins one group, executed once a value, and
// each subscriber reads the answer under its own keys: the root field's
// alias, its fields' aliases, even names swapped between two fields, from
// the writer pool's frames; and one that joins after the values is sent
// the newest of them renamed, by its own goroutine.
func TestAliasesShareOneExecution(t *testing.T) {
	t.Parallel()
	e := setup(t, fanout.Config{})
	type spelling struct{ root, sku, available string }
	spellings := []spelling{
		{"availabilityChanged", "sku", "available"},
		{"a1", "sku", "available"},
		{"a2", "s", "n"},
		{"a3", "available", "sku"}, // each field under the other's name
		{"availabilityChanged", "x", "available"},
	}
	doc := func(s spelling) string {
		root := "availabilityChanged"
		if s.root != root {
			root = s.root + ": availabilityChanged"
		}
		return fmt.Sprintf(`subscription { %s(skus: ["A"]) { %s: sku %s: available } }`, root, s.sku, s.available)
	}
	read := func(c *wsClient, i int, s spelling) (string, int) {
		t.Helper()
		var v map[string]any
		c.data(fmt.Sprint("s", i), s.root, &v)
		if len(v) != 2 {
			t.Fatalf("spelling %d: %v, want its two keys", i, v)
		}
		sku, _ := v[s.sku].(string)
		n, _ := v[s.available].(float64)
		return sku, int(n)
	}
	var subs []*wsClient
	for i, s := range spellings {
		c := e.dial("", false, false)
		c.subscribe(fmt.Sprint("s", i), doc(s), nil)
		subs = append(subs, c)
	}
	e.waitStats(1, int64(len(spellings)))
	e.feed.publish("A", 3)
	e.feed.publish("A", 4)
	for i, c := range subs {
		// Latest mode: a value may be passed over by a newer one.
		sku, n := read(c, i, spellings[i])
		if n == 3 {
			sku, n = read(c, i, spellings[i])
		}
		if sku != "A" || n != 4 {
			t.Fatalf("spelling %d: %s %d, want A 4 (after A 3 or not)", i, sku, n)
		}
	}
	late := e.dial("", false, false)
	const lateID = "s3"
	late.subscribe(lateID, doc(spellings[3]), nil)
	e.waitStats(1, int64(len(spellings)+1))
	if sku, n := read(late, 3, spellings[3]); sku != "A" || n != 4 {
		t.Fatalf("joined late: %s %d, want the newest, A 4", sku, n)
	}
	if s := e.reg.Stats(); s.Executions != 2 {
		t.Fatalf("executions: %d, want 2 (one per value, for every spelling)", s.Executions)
	}
}

// TestSpellingsLeaveWithTheirMembers: subscribers who join a group under
// ever new aliases and leave again (an anonymous caller's cheapest way to
// make the group render its newest values once more each time) leave
// nothing behind: what the group holds for spellings is that of the members
// it has. Kept, one address grew the heap to 2.4 GB in a minute.
func TestSpellingsLeaveWithTheirMembers(t *testing.T) {
	t.Parallel()
	e := setup(t, fanout.Config{})
	holder := e.dial("", false, false)
	holder.subscribe("h", `subscription { availabilityChanged(skus: ["A"]) { sku available } }`, nil)
	e.waitStats(1, 1)
	e.feed.publish("A", 5)
	var v map[string]any
	holder.data("h", "availabilityChanged", &v)
	for i := range 20 {
		c := e.dial("", false, false)
		id := fmt.Sprint("c", i)
		c.subscribe(id, fmt.Sprintf(`subscription { a%d: availabilityChanged(skus: ["A"]) { s%d: sku n%d: available } }`, i, i, i), nil)
		var got map[string]any
		c.data(id, fmt.Sprint("a", i), &got) // the newest value, rendered under its keys
		if got[fmt.Sprint("n", i)] != float64(5) {
			t.Fatalf("churner %d got %v", i, got)
		}
		if spellings, rendered := fanout.Renditions(e.reg); spellings != 2 || rendered != 1 {
			t.Fatalf("churner %d attached: %d spellings, %d renditions; want 2 and 1", i, spellings, rendered)
		}
		_ = c.conn.CloseNow()
		e.waitStats(1, 1)
	}
	if spellings, rendered := fanout.Renditions(e.reg); spellings != 1 || rendered != 0 {
		t.Fatalf("after 20 churners left: %d spellings, %d renditions held; want 1 and 0 (the holder's own)", spellings, rendered)
	}
	if s := e.reg.Stats(); s.Executions != 1 {
		t.Fatalf("executions: %d, want 1", s.Executions)
	}
}
