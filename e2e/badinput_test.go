package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestBadInput sends malformed and out-of-limit requests over HTTP: each gets
// a clear error and the database is unchanged afterwards.
func TestBadInput(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP-1", 10)
	snapshot := func() string {
		var s string
		if err := ts.db.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM stock_movements)::text || '/' ||
			(SELECT string_agg(on_hand::text || ':' || reserved::text, ',') FROM balances) || '/' ||
			(SELECT count(*) FROM skus)::text || '/' || (SELECT count(*) FROM locations)::text`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()

	long := strings.Repeat("X", 129)
	userErrorCases := []struct {
		name, query string
		field       string
	}{
		{"zero quantity", `mutation { receiveStock(input: {sku: "HP-1", location: "AMS", quantity: 0, reference: "r"}) { balance { onHand } userErrors { code message field } } }`, "quantity"},
		{"negative quantity", `mutation { receiveStock(input: {sku: "HP-1", location: "AMS", quantity: -5, reference: "r"}) { balance { onHand } userErrors { code message field } } }`, "quantity"},
		{"huge quantity", `mutation { receiveStock(input: {sku: "HP-1", location: "AMS", quantity: 1000001, reference: "r"}) { balance { onHand } userErrors { code message field } } }`, "quantity"},
		{"zero delta", `mutation { adjustStock(input: {sku: "HP-1", location: "AMS", delta: 0, reason: "other", reference: "r"}) { balance { onHand } userErrors { code message field } } }`, "delta"},
		{"129-character SKU code", `mutation { createSku(input: {code: "` + long + `", name: "x", kind: QUANTITY}) { sku { code } userErrors { code message field } } }`, "code"},
		{"129-character location code", `mutation { createLocation(input: {code: "` + long + `", name: "x"}) { location { code } userErrors { code message field } } }`, "code"},
		{"129-character SKU in receive", `mutation { receiveStock(input: {sku: "` + long + `", location: "AMS", quantity: 1, reference: "r"}) { balance { onHand } userErrors { code message field } } }`, "sku"},
		{"blank reason", `mutation { adjustStock(input: {sku: "HP-1", location: "AMS", delta: 1, reason: " ", reference: "r"}) { balance { onHand } userErrors { code message field } } }`, "reason"},
	}
	for _, c := range userErrorCases {
		r := ts.gql(ts.admin, c.query, nil)
		if len(r.Errors) > 0 {
			t.Errorf("%s: want userErrors, got errors %+v", c.name, r.Errors)
			continue
		}
		var payload map[string]json.RawMessage
		for _, v := range r.Data {
			if err := json.Unmarshal(v, &payload); err != nil {
				t.Fatal(err)
			}
		}
		var ues []struct {
			Code    string   `json:"code"`
			Message string   `json:"message"`
			Field   []string `json:"field"`
		}
		if err := json.Unmarshal(payload["userErrors"], &ues); err != nil {
			t.Fatal(err)
		}
		for k, v := range payload {
			if k != "userErrors" && string(v) != "null" {
				t.Errorf("%s: refused mutation returned %s = %s", c.name, k, v)
			}
		}
		if len(ues) != 1 || ues[0].Code != "INVALID_INPUT" || ues[0].Message == "" || ues[0].Field[len(ues[0].Field)-1] != c.field {
			t.Errorf("%s: got %+v", c.name, ues)
		}
	}

	// 500 SKUs is the limit; 501 is refused as BAD_REQUEST.
	skus := make([]string, 501)
	for i := range skus {
		skus[i] = fmt.Sprintf("S%d", i)
	}
	q := `query($s: [String!]!) { availability(skus: $s) { sku } }`
	if r := ts.gql("", q, map[string]any{"s": skus[:500]}); len(r.Errors) > 0 {
		t.Fatalf("500 SKUs refused: %+v", r.Errors)
	}
	r := ts.gql("", q, map[string]any{"s": skus})
	if r.errorCode() != "BAD_REQUEST" || !strings.Contains(r.Errors[0].Message, "at most 500") {
		t.Fatalf("501 SKUs: %+v", r)
	}
	r = ts.gql("", `{ availability(skus: ["HP-1"], locations: ["NOWHERE"]) { sku } }`, nil)
	if r.errorCode() != "BAD_REQUEST" || !strings.Contains(r.Errors[0].Message, "NOWHERE") {
		t.Fatalf("unknown location filter: %+v", r)
	}
	r = ts.gql(ts.admin, `mutation { issueCheckoutToken(checkoutId: "c", ttlSeconds: 0) { token } }`, nil)
	if r.errorCode() != "BAD_REQUEST" || !strings.Contains(r.Errors[0].Message, "ttlSeconds") {
		t.Fatalf("ttlSeconds 0: %+v", r)
	}

	// Malformed documents and transport-level limits. A document that does
	// not parse or validate, or variables that do not coerce, is a GraphQL
	// request error: 200 under application/json (these requests send no
	// Accept), as GraphQL over HTTP says (TestGraphQLOverHTTPAudit).
	transport := []struct {
		name, contentType, body string
		status                  int
		code                    string
	}{
		{"malformed JSON", "application/json", `{"query": "{ locations { code } }"`, 400, "BAD_REQUEST"},
		{"not GraphQL", "application/json", `{"query": "{ locations { code "}`, 200, "GRAPHQL_PARSE_FAILED"},
		{"unknown field", "application/json", `{"query": "{ nope }"}`, 200, "GRAPHQL_VALIDATION_FAILED"},
		{"wrong variable type", "application/json", `{"query": "query($q: Int!) { locations { code } }", "variables": {"q": "x"}}`, 200, "GRAPHQL_VALIDATION_FAILED"},
		{"enum value", "application/json", `{"query": "mutation { createSku(input: {code: \"Z\", name: \"z\", kind: BOXES}) { sku { code } } }"}`, 200, "GRAPHQL_VALIDATION_FAILED"},
		{"over-complex query", "application/json", overComplexQuery(), 200, "COMPLEXITY_LIMIT_EXCEEDED"},
		{"body over the limit", "application/json", `{"query": "{ locations { code } }", "pad": "` + strings.Repeat("x", 1<<20) + `"}`, 413, "BAD_REQUEST"},
		{"batched array", "application/json", `[{"query": "{ locations { code } }", "extensions": {"SEKRIT": 1}}]`, 400, "BAD_REQUEST"},
		{"variables as a string", "application/json", `{"query": "query($s: [String!]!) { availability(skus: $s) { sku } }", "variables": "SEKRIT"}`, 400, "BAD_REQUEST"},
		{"query as a number", "application/json", `{"query": 5, "variables": {"SEKRIT": 1}}`, 400, "BAD_REQUEST"},
		// GraphQL's String coercion refuses numbers: not read as SKU "5".
		{"number for a String variable", "application/json", `{"query": "query($s: [String!]!) { availability(skus: $s) { sku } }", "variables": {"s": 5}}`, 200, "BAD_REQUEST"},
		{"numbers in a [String!]! variable", "application/json", `{"query": "query($s: [String!]!) { availability(skus: $s) { sku } }", "variables": {"s": ["HP-1", 5]}}`, 200, "BAD_REQUEST"},
		{"number in an input object", "application/json", `{"query": "mutation($in: ReceiveStockInput!) { receiveStock(input: $in) { balance { onHand } } }", "variables": {"in": {"sku": 7, "location": "AMS", "quantity": 1, "reference": "r"}}}`, 200, "BAD_REQUEST"},
		{"boolean for a String", "application/json", `{"query": "mutation($in: ReceiveStockInput!) { receiveStock(input: $in) { balance { onHand } } }", "variables": {"in": {"sku": true, "location": "AMS", "quantity": 1, "reference": "r"}}}`, 200, "GRAPHQL_VALIDATION_FAILED"},
	}
	for _, c := range transport {
		r := ts.post("Bearer "+ts.admin, c.contentType, []byte(c.body))
		if r.Status != c.status || r.errorCode() != c.code || r.Errors[0].Message == "" {
			t.Errorf("%s: got %d %q %+v, want %d %s", c.name, r.Status, r.errorCode(), r.Errors, c.status, c.code)
		}
		// An error never quotes the request back (it may hold secrets).
		for _, e := range r.Errors {
			if strings.Contains(e.Message, "SEKRIT") || len(e.Message) > 500 {
				t.Errorf("%s: the error echoes the request: %.200q", c.name, e.Message)
			}
		}
		if len(r.Data) > 0 && string(r.Data["availability"]) != "" && string(r.Data["availability"]) != "null" {
			t.Errorf("%s: answered with data %s", c.name, r.Data["availability"])
		}
	}

	if after := snapshot(); after != before {
		t.Fatalf("bad input changed the database: %s -> %s", before, after)
	}
}

// overComplexQuery asks for availability of 20 SKUs under many aliases,
// well past the default complexity limit of 20,000 (150 × 20 rows × 10).
func overComplexQuery() string {
	skus := strings.TrimSuffix(strings.Repeat(`\"HP-1\", `, 20), ", ")
	var b strings.Builder
	b.WriteString("{ ")
	for i := range 150 {
		fmt.Fprintf(&b, `a%d: availability(skus: [%s]) { sku available onHand reserved locations { sku location onHand } } `, i, skus)
	}
	b.WriteString("}")
	return `{"query": "` + b.String() + `"}`
}
