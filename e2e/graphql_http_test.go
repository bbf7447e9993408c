package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

const graphqlResponseJSON = "application/graphql-response+json"

// TestGraphQLOverHTTPStatusAndMediaType holds /graphql to the GraphQL over
// HTTP spec's rules, which graphql-http's audit checks only in part: the
// response's media type is the one the Accept header prefers (q-values
// included; none, */* or application/* is application/json, the spec's
// legacy rule, which the audit checks); under application/json a request
// error (parse, validation, variable coercion) is 200, under
// application/graphql-response+json it is 400; neither has a data entry,
// nor has any request refused before execution (the GraphQL spec); a request
// with no query at all is 400 under both; a mutation over GET is 405 with
// Allow: POST; an Accept that lists neither media type is 406. Other refusals
// keep their status: PersistedQueryNotFound and COMPLEXITY_LIMIT_EXCEEDED
// 200, a body that is not JSON 400.
func TestGraphQLOverHTTPStatusAndMediaType(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	const (
		parseFailure    = `{"query": "{"}`
		validation      = `{"query": "{ nope }"}`
		coercion        = `{"query": "query($n: Int!) { __typename }", "variables": {"n": "x"}}`
		noQuery         = `{"qeury": "{ __typename }"}`
		ok              = `{"query": "{ __typename }"}`
		bothGR          = graphqlResponseJSON + ", application/json"
		bothJSON        = "application/json, " + graphqlResponseJSON
		preferGRByQ     = "application/json;q=0.5, " + graphqlResponseJSON
		preferJSONByQ   = graphqlResponseJSON + ";q=0.4, application/json;q=0.8"
		wildcardButGR   = "*/*;q=0.1, " + graphqlResponseJSON
		jsonRefused     = "application/json;q=0, */*"
		recommended     = graphqlResponseJSON + "; charset=utf-8, application/json; charset=utf-8"
		unsupported     = "text/html"
		missingNotFound = `{"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "0000000000000000000000000000000000000000000000000000000000000000"}}}`
	)
	for _, c := range []struct {
		name, accept, body string
		status             int
		mediaType          string
		data               bool // a "data" entry (null or not) is present
		code               string
	}{
		{"ok, no Accept", "", ok, 200, "application/json", true, ""},
		{"ok, */*", "*/*", ok, 200, "application/json", true, ""},
		{"ok, application/*", "application/*", ok, 200, "application/json", true, ""},
		{"ok, graphql-response+json", graphqlResponseJSON, ok, 200, graphqlResponseJSON, true, ""},
		{"ok, both, graphql-response+json first", bothGR, ok, 200, graphqlResponseJSON, true, ""},
		{"ok, both, json first", bothJSON, ok, 200, "application/json", true, ""},
		{"ok, graphql-response+json preferred by q", preferGRByQ, ok, 200, graphqlResponseJSON, true, ""},
		{"ok, json preferred by q", preferJSONByQ, ok, 200, "application/json", true, ""},
		{"ok, a wildcard below graphql-response+json", wildcardButGR, ok, 200, graphqlResponseJSON, true, ""},
		{"ok, json refused with q=0", jsonRefused, ok, 200, graphqlResponseJSON, true, ""},
		{"ok, the spec's recommended Accept", recommended, ok, 200, graphqlResponseJSON, true, ""},

		{"parse failure, no Accept", "", parseFailure, 200, "application/json", false, "GRAPHQL_PARSE_FAILED"},
		{"parse failure, json", "application/json", parseFailure, 200, "application/json", false, "GRAPHQL_PARSE_FAILED"},
		{"parse failure, graphql-response+json", graphqlResponseJSON, parseFailure, 400, graphqlResponseJSON, false, "GRAPHQL_PARSE_FAILED"},
		{"validation failure, json", "application/json", validation, 200, "application/json", false, "GRAPHQL_VALIDATION_FAILED"},
		{"validation failure, graphql-response+json", graphqlResponseJSON, validation, 400, graphqlResponseJSON, false, "GRAPHQL_VALIDATION_FAILED"},
		{"validation failure, graphql-response+json by q", preferGRByQ, validation, 400, graphqlResponseJSON, false, "GRAPHQL_VALIDATION_FAILED"},
		{"coercion failure, json", "application/json", coercion, 200, "application/json", false, "GRAPHQL_VALIDATION_FAILED"},
		{"coercion failure, graphql-response+json", graphqlResponseJSON, coercion, 400, graphqlResponseJSON, false, "GRAPHQL_VALIDATION_FAILED"},

		{"no query, json", "application/json", noQuery, 400, "application/json", false, "BAD_REQUEST"},
		{"no query, graphql-response+json", graphqlResponseJSON, noQuery, 400, graphqlResponseJSON, false, "BAD_REQUEST"},
		{"persisted query not found, json", "application/json", missingNotFound, 200, "application/json", false, "PERSISTED_QUERY_NOT_FOUND"},
		{"persisted query not found, graphql-response+json", graphqlResponseJSON, missingNotFound, 200, graphqlResponseJSON, false, "PERSISTED_QUERY_NOT_FOUND"},
		{"over-complex, json", "application/json", overComplexQuery(), 200, "application/json", false, "COMPLEXITY_LIMIT_EXCEEDED"},
		// Executed: a field error (anonymous, admin only) is a 200 with data.
		{"field error, graphql-response+json", graphqlResponseJSON, `{"query": "{ webhooks { id } }"}`, 200, graphqlResponseJSON, true, "UNAUTHENTICATED"},
		{"field error, json", "application/json", `{"query": "{ webhooks { id } }"}`, 200, "application/json", true, "UNAUTHENTICATED"},
		{"not JSON", graphqlResponseJSON, `{"query": `, 400, "", false, "BAD_REQUEST"},

		{"neither media type", unsupported, ok, 406, "application/json", false, "BAD_REQUEST"},
		{"neither media type, parse failure", unsupported, parseFailure, 406, "application/json", false, "BAD_REQUEST"},
	} {
		headers := []string{}
		if c.accept != "" {
			headers = append(headers, "Accept", c.accept)
		}
		a := postFrom(t, ts.url, []byte(c.body), headers...)
		checkGraphQLAnswer(t, "POST "+c.name, a, c.status, c.mediaType, c.data, c.code)
	}

	// The same over GET, and a mutation, which GET must refuse with 405.
	get := func(query, accept string) getAnswer {
		if accept == "" {
			return ts.getGraphQL(url.Values{"query": {query}})
		}
		return ts.getGraphQL(url.Values{"query": {query}}, "Accept", accept)
	}
	checkGraphQLAnswer(t, "GET parse failure, json", get("{", "application/json"), 200, "application/json", false, "GRAPHQL_PARSE_FAILED")
	checkGraphQLAnswer(t, "GET parse failure, graphql-response+json", get("{", graphqlResponseJSON), 400, graphqlResponseJSON, false, "GRAPHQL_PARSE_FAILED")
	checkGraphQLAnswer(t, "GET validation failure, no Accept", get("{ nope }", ""), 200, "application/json", false, "GRAPHQL_VALIDATION_FAILED")
	checkGraphQLAnswer(t, "GET ok, graphql-response+json by q", get("{ __typename }", preferGRByQ), 200, graphqlResponseJSON, true, "")
	checkGraphQLAnswer(t, "GET neither media type", get("{ __typename }", unsupported), 406, "application/json", false, "BAD_REQUEST")
	checkGraphQLAnswer(t, "GET no query", ts.getGraphQL(url.Values{"operationName": {"X"}}, "Accept", graphqlResponseJSON), 400, graphqlResponseJSON, false, "BAD_REQUEST")
	for _, accept := range []string{"", graphqlResponseJSON} {
		m := get(`mutation { createLocation(input: {code: "GETX", name: "x"}) { userErrors { code } } }`, accept)
		want := "application/json"
		if accept != "" {
			want = graphqlResponseJSON
		}
		checkGraphQLAnswer(t, "GET mutation, Accept "+accept, m, http.StatusMethodNotAllowed, want, false, "")
		if m.header.Get("Allow") != "POST" {
			t.Errorf("GET mutation: Allow %q, want POST", m.header.Get("Allow"))
		}
	}
	if n := ts.count(`SELECT count(*) FROM locations WHERE code = 'GETX'`); n != 0 {
		t.Errorf("a GET mutation created %d locations", n)
	}
}

// checkGraphQLAnswer checks one answer's status, media type (none: not
// checked), whether it has a data entry, and its first error's code (none:
// no errors).
func checkGraphQLAnswer(t *testing.T, what string, a getAnswer, status int, mediaType string, data bool, code string) {
	t.Helper()
	var body map[string]json.RawMessage
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Errorf("%s: %d, not JSON: %s", what, a.status, a.body)
		return
	}
	var errs []struct {
		Extensions struct{ Code string } `json:"extensions"`
	}
	_ = json.Unmarshal(body["errors"], &errs)
	gotCode := ""
	if len(errs) > 0 {
		gotCode = errs[0].Extensions.Code
	}
	ct := a.header.Get("Content-Type")
	_, hasData := body["data"]
	if a.status != status || (mediaType != "" && !strings.HasPrefix(ct, mediaType)) || hasData != data || gotCode != code {
		t.Errorf("%s: %d %q data=%v code=%q, want %d %q data=%v code=%q\n%s", what, a.status, ct, hasData, gotCode, status, mediaType, data, code, a.body)
	}
}

// TestAnswerCacheKeepsMediaTypesApart: an anonymous GET or POST answered from
// the serialized-answer cache (no gqlgen) is in the media type its own
// Accept header prefers, not in the one of the request that filled the
// cache; its ETag differs per media type, GET answers carry Vary: Accept,
// and an Accept that allows neither is 406, never a cached answer.
func TestAnswerCacheKeepsMediaTypesApart(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	params := url.Values{"query": {availabilityQuery}, "variables": {varsParam(t, map[string]any{"s": []string{"HP"}})}}
	body := mustJSON(map[string]any{"query": availabilityQuery, "variables": map[string]any{"s": []string{"HP"}}})
	var jsonGET getAnswer
	waitUntil(t, 5*time.Second, "a cached GET answer", func() bool {
		jsonGET = ts.getGraphQL(params, "Accept", "application/json")
		return jsonGET.header.Get("X-Answer-Cache") == "hit"
	})
	waitUntil(t, 5*time.Second, "a cached POST answer", func() bool {
		return postFrom(t, ts.url, body, "Accept", "application/json").header.Get("X-Answer-Cache") == "hit"
	})
	if ct := jsonGET.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET, Accept application/json: Content-Type %q", ct)
	}
	for _, accept := range []string{graphqlResponseJSON, "application/json;q=0.5, " + graphqlResponseJSON} {
		a := ts.getGraphQL(params, "Accept", accept)
		if a.status != http.StatusOK || a.header.Get("Content-Type") != graphqlResponseJSON {
			t.Errorf("GET, Accept %q after an application/json answer was cached: %d %q (cache %q)", accept, a.status, a.header.Get("Content-Type"), a.header.Get("X-Answer-Cache"))
		}
		if a.header.Get("ETag") == jsonGET.header.Get("ETag") {
			t.Errorf("GET, Accept %q: the application/json answer's ETag %s", accept, a.header.Get("ETag"))
		}
		p := postFrom(t, ts.url, body, "Accept", accept)
		if p.status != http.StatusOK || p.header.Get("Content-Type") != graphqlResponseJSON {
			t.Errorf("POST, Accept %q after an application/json answer was cached: %d %q (cache %q)", accept, p.status, p.header.Get("Content-Type"), p.header.Get("X-Answer-Cache"))
		}
	}
	if !strings.Contains(strings.Join(jsonGET.header.Values("Vary"), ","), "Accept") {
		t.Errorf("a cacheable GET answer's Vary %q lacks Accept", jsonGET.header.Values("Vary"))
	}
	if a := ts.getGraphQL(params, "Accept", "text/html"); a.status != http.StatusNotAcceptable || a.header.Get("X-Answer-Cache") == "hit" {
		t.Errorf("GET, Accept text/html: %d (cache %q) %s", a.status, a.header.Get("X-Answer-Cache"), a.body)
	}
	if a := postFrom(t, ts.url, body, "Accept", "text/html"); a.status != http.StatusNotAcceptable || a.header.Get("X-Answer-Cache") == "hit" {
		t.Errorf("POST, Accept text/html: %d (cache %q) %s", a.status, a.header.Get("X-Answer-Cache"), a.body)
	}
}
