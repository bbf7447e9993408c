package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// postFrom sends a POST /graphql with a JSON body to base, with headers
// (name, value pairs).
func postFrom(t *testing.T, base string, body []byte, headers ...string) getAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return getAnswer{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestCachedPOSTAnswerReusedUntilATouchedBalanceMoves: an anonymous POST of
// availability answered from memory is answered again from its serialized
// bytes, without gqlgen (X-Answer-Cache: hit), while only other balances
// move, and still gets no HTTP caching headers; once a balance it read moves
// the next answer is the new one, and never the old again. The same body
// with other variables is another answer, and a caller with a key never
// gets a cached one.
func TestCachedPOSTAnswerReusedUntilATouchedBalanceMoves(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	ts.seed("CABLE", 2)
	ts.seed("OTHER", 3)
	query := `query A($skus: [String!]!) { availability(skus: $skus) { sku available } }`
	body := mustJSON(map[string]any{"query": query, "variables": map[string]any{"skus": []string{"HP", "CABLE"}}})
	var first getAnswer
	waitUntil(t, 5*time.Second, "a cached POST answer", func() bool {
		first = postFrom(t, ts.url, body)
		return first.header.Get("X-Answer-Cache") == "hit"
	})
	if first.status != http.StatusOK || !strings.Contains(string(first.body), `{"sku":"HP","available":5}`) {
		t.Fatalf("cached answer %d %s", first.status, first.body)
	}
	if first.header.Get("Cache-Control") != "" || first.header.Get("ETag") != "" || first.header.Get("Content-Type") != "application/json" {
		t.Fatalf("a cached POST answer's headers: %v", first.header)
	}
	other := postFrom(t, ts.url, mustJSON(map[string]any{"query": query, "variables": map[string]any{"skus": []string{"OTHER"}}}))
	if other.header.Get("X-Answer-Cache") == "hit" || !strings.Contains(string(other.body), `{"sku":"OTHER","available":3}`) {
		t.Fatalf("other variables: cache %q, %s", other.header.Get("X-Answer-Cache"), other.body)
	}
	if a := postFrom(t, ts.url, body, "Authorization", "Bearer "+ts.service); a.header.Get("X-Answer-Cache") == "hit" {
		t.Fatalf("a service key's POST was answered from the anonymous cache: %s", a.body)
	}
	if p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("c1", "k1", "OTHER", 1))); err != nil || p.Reservation == nil {
		t.Fatalf("reserve: %+v %v", p, err)
	}
	time.Sleep(300 * time.Millisecond) // past the relay's tick: the copy has the event
	for range 5 {
		if a := postFrom(t, ts.url, body); a.header.Get("X-Answer-Cache") != "hit" || string(a.body) != string(first.body) {
			t.Fatalf("after another SKU moved: cache %q, %s (was %s)", a.header.Get("X-Answer-Cache"), a.body, first.body)
		}
	}
	if p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("c2", "k1", "HP", 1))); err != nil || p.Reservation == nil {
		t.Fatalf("reserve: %+v %v", p, err)
	}
	waitUntil(t, 2*time.Second, "the answer to show the reserve", func() bool {
		return strings.Contains(string(postFrom(t, ts.url, body).body), `{"sku":"HP","available":4}`)
	})
	hits := 0
	for range 20 {
		a := postFrom(t, ts.url, body)
		if !strings.Contains(string(a.body), `{"sku":"HP","available":4}`) {
			t.Fatalf("an old answer after the new one: %s (cache %q)", a.body, a.header.Get("X-Answer-Cache"))
		}
		if a.header.Get("X-Answer-Cache") == "hit" {
			hits++
		}
	}
	if hits < 19 {
		t.Fatalf("%d of 20 answers after the change were cached, want at least 19", hits)
	}
}
