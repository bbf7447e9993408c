package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestAvailabilityFastPathAnswersAsGqlgen: an availability query answered
// from memory without gqlgen's executor (api/fast_availability.go) gets,
// byte for byte, the answer gqlgen gives the same query made ineligible for
// it (an @include(if: true) on one field, which changes nothing in the
// answer), over POST and GET, with aliases, __typename, several root
// fields, a location filter, variables, repeated SKUs; and what
// the domain refuses is still refused, in gqlgen's words.
func TestAvailabilityFastPathAnswersAsGqlgen(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	ts.seed("CABLE-ü<&>", 2)
	if _, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("c1", "k1", "HP", 2))); err != nil {
		t.Fatal(err)
	}
	pairs := [][2]string{
		{`{ availability(skus: ["HP", "CABLE-ü<&>"]) { sku available } }`,
			`{ availability(skus: ["HP", "CABLE-ü<&>"]) { sku @include(if: true) available } }`},
		{`{ a: availability(skus: ["HP", "CABLE-ü<&>", "HP"]) { __typename s: sku onHand reserved preorderAvailable available } b: availability(skus: ["CABLE-ü<&>"], locations: ["AMS"]) { available sku } }`,
			`{ a: availability(skus: ["HP", "CABLE-ü<&>", "HP"]) { __typename s: sku onHand reserved preorderAvailable available } b: availability(skus: ["CABLE-ü<&>"], locations: ["AMS"]) { available @include(if: true) sku } }`},
		{`query Q($s: [String!]!, $l: [String!]) { availability(skus: $s, locations: $l) { sku available onHand } }`,
			`query Q($s: [String!]!, $l: [String!]) { availability(skus: $s, locations: $l) { sku available @include(if: true) onHand } }`},
	}
	vars := map[string]any{"s": []string{"CABLE-ü<&>", "HP"}, "l": []string{"AMS"}}
	// Until the copy has both SKUs and the reserve, the database answers
	// (both queries through gqlgen): wait for an answer from memory.
	waitUntil(t, 5*time.Second, "the copy to answer with the reserve", func() bool {
		a := getFrom(t, ts.url, url.Values{"query": {pairs[0][0]}})
		return a.header.Get("X-Answer-Cache") == "hit" && strings.Contains(string(a.body), `"available":3`)
	})
	for _, p := range pairs {
		fast := postFrom(t, ts.url, mustJSON(map[string]any{"query": p[0], "variables": vars}))
		slow := postFrom(t, ts.url, mustJSON(map[string]any{"query": p[1], "variables": vars}))
		if fast.status != 200 || string(fast.body) != string(slow.body) || !strings.Contains(string(fast.body), `"data"`) {
			t.Errorf("POST %s\n fast path: %d %s\n gqlgen:    %d %s", p[0], fast.status, fast.body, slow.status, slow.body)
		}
		get := func(q string) getAnswer {
			return getFrom(t, ts.url, url.Values{"query": {q}, "variables": {varsParam(t, vars)}})
		}
		if fast, slow := get(p[0]), get(p[1]); fast.status != 200 || string(fast.body) != string(slow.body) || fast.header.Get("ETag") != slow.header.Get("ETag") {
			t.Errorf("GET %s\n fast path: %d %s\n gqlgen:    %d %s", p[0], fast.status, fast.body, slow.status, slow.body)
		}
	}
	for _, q := range []string{`{ availability(skus: [""]) { sku } }`, `{ availability(skus: ["HP"], locations: [""]) { sku } }`} {
		fast := postFrom(t, ts.url, mustJSON(map[string]any{"query": q}))
		slow := postFrom(t, ts.url, mustJSON(map[string]any{"query": strings.Replace(q, "{ sku", "{ sku @include(if: true)", 1)}))
		if !strings.Contains(string(fast.body), `"errors"`) || string(fast.body) != string(slow.body) {
			t.Errorf("%s: %d %s, want gqlgen's error %s", q, fast.status, fast.body, slow.body)
		}
	}
}
