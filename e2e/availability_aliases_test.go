package e2e

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestAvailabilityAliasesShareAGroup: anonymous viewers who ask for one
// SKU's availability under aliases of their own (the root field, scalar
// fields, the nested list of locations and its fields), or with a field
// asked twice, share one fan-out group, executed once a tick, and each
// reads the same values under its own keys, with gqlgen's own nesting
// (a list of objects) renamed. Keyed by the aliases, each spelling was a
// group executed on every tick: 1,000 of them took the server from 0.23 to
// 0.69 cores.
func TestAvailabilityAliasesShareAGroup(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	vars := map[string]any{"skus": []string{"HP"}}
	const aliased = `subscription($skus: [String!]!) { v: availabilityChanged(skus: $skus) { s: sku a: available o: onHand r: reserved p: preorderAvailable l: locations { loc: location oh: onHand rs: reserved } } }`
	const twice = `subscription($skus: [String!]!) { availabilityChanged(skus: $skus) { sku available available onHand reserved preorderAvailable locations { location onHand reserved location } } }`

	plain := dialWS(t, ts.url, "", false)
	plain.ack()
	plain.subscribe("1", availabilityChangedSub, vars)
	al := dialWS(t, ts.url, "", false)
	al.ack()
	al.subscribe("1", aliased, vars)
	tw := dialWS(t, ts.url, "", true)
	tw.ack()
	tw.subscribe("1", twice, vars)
	ts.waitMetric("inventory_subscription_group_members", 3)
	ts.waitMetric("inventory_subscription_groups", 1)

	var p, a, w map[string]any
	plain.data("availabilityChanged", &p, 10*time.Second)
	al.data("v", &a, 10*time.Second)
	tw.data("availabilityChanged", &w, 10*time.Second)
	if !reflect.DeepEqual(p, w) {
		t.Fatalf("with a field asked twice: %v, want %v", w, p)
	}
	// The aliased answer, spelled back with the plain names.
	back := map[string]any{"sku": a["s"], "available": a["a"], "onHand": a["o"], "reserved": a["r"], "preorderAvailable": a["p"]}
	var locs []any
	for _, l := range a["l"].([]any) {
		m := l.(map[string]any)
		locs = append(locs, map[string]any{"location": m["loc"], "onHand": m["oh"], "reserved": m["rs"]})
	}
	back["locations"] = locs
	if len(a) != 6 || !reflect.DeepEqual(p, back) {
		pj, _ := json.Marshal(p)
		aj, _ := json.Marshal(a)
		t.Fatalf("aliased: %s, want the plain %s under its own keys", aj, pj)
	}
	if p["sku"] != "HP" || p["available"] != float64(5) {
		t.Fatalf("the plain answer: %v", p)
	}
	body := ts.waitMetric("inventory_subscription_groups", 1)
	if n := metricValue(body, "inventory_subscription_executions_total"); n != 1 {
		t.Fatalf("%v executions for three spellings of one question's first value, want 1", n)
	}
}
