package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// longAliasDocument is the 890 KB document: 20 root aliases of
// availability over $s, each selecting `available` under a 45,000-character
// alias. With $s one SKU 500 times its cost is 20 × 500 × 2 = 20,000 (the
// default limit: an alias is one token however long), and its answer
// 20 × 500 × 45,000 bytes: 450 MB.
func longAliasDocument() string {
	var b strings.Builder
	b.WriteString("query($s:[String!]!){")
	alias := strings.Repeat("a", 45_000)
	for i := range 20 {
		fmt.Fprintf(&b, " x%d: availability(skus:$s){ %s%d: available }", i, alias, i)
	}
	b.WriteString("}")
	return b.String()
}

// answerOf POSTs body to url/graphql and reads the whole answer; it does not
// touch testing.T, so goroutines can call it.
func answerOf(url, authorization string, body []byte) (status int, size int, code string, err error) {
	req, err := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return 0, 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, len(raw), "", err
	}
	var out gqlResponse
	if len(raw) < 1<<20 {
		_ = json.Unmarshal(raw, &out)
	}
	return resp.StatusCode, len(raw), out.errorCode(), nil
}

// TestLongAliasAnswerIsBounded is the first attack against the real
// binary: one anonymous 890 KB request whose answer would be 450 MB (long
// aliases repeated over 500 rows), then four at once, and the same document
// with an admin key. Before, it was answered (HTTP 200, 450 MB, 29 s) and
// took the server from 32 MB to 2.4 GB. Now the cost check counts the bytes
// the document can produce (each name's length times the rows it repeats
// over) and names are at most domain.MaxNameBytes, so it is refused before
// it runs: the server's peak resident set may grow by less than 256 MB.
func TestLongAliasAnswerIsBounded(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0"})
	s.seed("HP", 5)
	skus := make([]string, 500)
	for i := range skus {
		skus[i] = "HP"
	}
	body, err := json.Marshal(map[string]any{"query": longAliasDocument(), "variables": map[string]any{"s": skus}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("request: %d KB", len(body)>>10)
	base := s.peakRSS()
	check := func(who, authorization string, senders int) {
		t.Helper()
		var wg sync.WaitGroup
		results := make([]string, senders)
		for i := range senders {
			wg.Go(func() {
				status, size, code, err := answerOf(s.url, authorization, body)
				if err != nil {
					results[i] = err.Error()
					return
				}
				if size > 8<<20 || code != "COMPLEXITY_LIMIT_EXCEEDED" {
					results[i] = fmt.Sprintf("HTTP %d, %d bytes, code %q", status, size, code)
				}
			})
		}
		wg.Wait()
		grew := s.peakRSS() - base
		t.Logf("%s, %d at once: peak RSS %+d MB", who, senders, grew>>20)
		for _, r := range results {
			if r != "" {
				t.Errorf("%s: want a COMPLEXITY_LIMIT_EXCEEDED refusal under 8 MB, got %s", who, r)
			}
		}
		if grew > 256<<20 {
			t.Fatalf("%s: peak RSS grew by %d MB (bound 256 MB)", who, grew>>20)
		}
	}
	check("anonymous", "", 1)
	check("anonymous", "", 4)
	check("admin", "Bearer "+s.admin, 1)

	// An honest availability of the same 500 rows is still answered.
	r := s.gql("", `query($s:[String!]!){ availability(skus:$s){ sku available onHand reserved locations { location available } } }`, map[string]any{"s": skus})
	if len(r.Errors) > 0 {
		t.Fatalf("honest availability of 500 SKUs: %+v", r.Errors)
	}
}

// TestAnswerCapsRefuseBeforeWriting: both halves of the answer cap, with
// small caps so that documents within the name limit reach them. The
// estimate refuses 10 aliases of 100 bytes over 500 rows (about 550 KB)
// before it runs; the answer's own size refuses what the estimate counts
// as typical but is not (a SKU name of 200 characters, asked for 40 times),
// and the refusal is the whole answer: no data, nothing half-written. An
// admin key's cap is its own.
func TestAnswerCapsRefuseBeforeWriting(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{
		"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0",
		"INVENTORY_MAX_ANSWER_BYTES_ANONYMOUS": "4000",
	})
	s.seed("HP", 5)
	long := strings.Repeat("n", 200)
	if r := s.gql(s.admin, `mutation($n:String!){ createSku(input:{code:"LONG", name:$n, kind:QUANTITY}){ userErrors { message } } }`, map[string]any{"n": long}); len(r.Errors) > 0 {
		t.Fatalf("createSku: %+v", r.Errors)
	}

	skus := make([]string, 500)
	for i := range skus {
		skus[i] = "HP"
	}
	var doc strings.Builder
	doc.WriteString("query($s:[String!]!){ availability(skus:$s){")
	for i := range 10 {
		fmt.Fprintf(&doc, " %s%d: available", strings.Repeat("a", 100), i)
	}
	doc.WriteString(" } }")
	r := s.gql("", doc.String(), map[string]any{"s": skus})
	if r.errorCode() != "COMPLEXITY_LIMIT_EXCEEDED" || len(r.Data) > 0 || !strings.Contains(r.Errors[0].Message, "INVENTORY_MAX_ANSWER_BYTES_ANONYMOUS") {
		t.Fatalf("10 aliases of 100 bytes over 500 rows, anonymous cap 4000: want a refusal naming the setting, got %+v", r)
	}
	t.Logf("estimate: %s", r.Errors[0].Message)

	doc.Reset()
	doc.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&doc, " n%d: sku(code:\"LONG\"){ name }", i)
	}
	doc.WriteString(" }")
	r = s.gql("", doc.String(), nil)
	if r.errorCode() != "COMPLEXITY_LIMIT_EXCEEDED" || len(r.Data) > 0 || !strings.Contains(r.Errors[0].Message, "bytes, which exceeds") {
		t.Fatalf("40 names of 200 characters, anonymous cap 4000: want the answer refused whole, got %+v", r)
	}
	t.Logf("answer: %s", r.Errors[0].Message)

	// The admin's cap (64 MiB by default) lets both through.
	if r := s.gql(s.admin, doc.String(), nil); len(r.Errors) > 0 || len(r.Data) != 40 {
		t.Fatalf("admin: %+v", r)
	}
	// A small anonymous answer is still served.
	if r := s.gql("", `{ availability(skus:["HP"]){ sku available } }`, nil); len(r.Errors) > 0 {
		t.Fatalf("small anonymous answer: %+v", r.Errors)
	}
}

// fragmentDAG is a document of k fragments, each spreading the next twice:
// about 10 tokens a fragment, and 2^k fields once expanded.
func fragmentDAG(k int) string {
	var b strings.Builder
	b.WriteString("query Q { ...F0 }")
	for i := range k {
		fmt.Fprintf(&b, " fragment F%d on Query { ...F%d ...F%d }", i, i+1, i+1)
	}
	fmt.Fprintf(&b, " fragment F%d on Query { __typename }", k)
	return b.String()
}

// introspectionAliases is n aliases of the full introspection of __schema.
func introspectionAliases(n int) string {
	var b strings.Builder
	b.WriteString("query Q {")
	for i := range n {
		fmt.Fprintf(&b, " a%d: __schema { ...I }", i)
	}
	b.WriteString(` } fragment I on __Schema { types { name kind description fields(includeDeprecated: true) { name description args { name description type { name kind ofType { name kind ofType { name kind } } } defaultValue } type { name kind ofType { name kind ofType { name kind } } } isDeprecated deprecationReason } inputFields { name type { name kind } } enumValues(includeDeprecated: true) { name description } interfaces { name } possibleTypes { name } } directives { name locations args { name } } }`)
	return b.String()
}

// TestDocumentExpansionIsBounded is the attacker's review of the answer
// caps, against the real binary. (1) A document of 30 fragments, each
// spreading the next twice, is 330 tokens and expands to 2^30 fields: the
// cost walkers (gqlgen's complexity, the answer estimate) walked every
// expansion, so k = 26 took 8.7 s of CPU and k = 30 about 140 s, after the
// client had gone and past the request timeout. (2) 1,400 aliases of a
// full introspection passed the cost check (gqlgen costs __schema 0, the
// estimate counted each list as one row) and built a 139 MB answer before
// its size refused it: RSS 34 MB → 1.8 GB. Now the fields a document
// expands to are counted once per fragment and bounded by the complexity
// limit, and introspection lists count the schema's rows: both are refused
// in milliseconds, and one introspection (GraphiQL's) is still answered.
func TestDocumentExpansionIsBounded(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0"})
	base := s.peakRSS()
	for _, c := range []struct {
		name, doc string
	}{
		{"30 fragments spreading the next twice", fragmentDAG(30)},
		{"1,400 aliases of the full introspection", introspectionAliases(1400)},
		{"60 aliases of the full introspection", introspectionAliases(60)},
	} {
		body, _ := json.Marshal(map[string]any{"query": c.doc})
		start := time.Now()
		status, size, code, err := answerOf(s.url, "", body)
		took := time.Since(start)
		t.Logf("%s (%d KB): HTTP %d, %d bytes, %q in %s", c.name, len(body)>>10, status, size, code, took.Round(time.Millisecond))
		if err != nil || code != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Errorf("%s: want COMPLEXITY_LIMIT_EXCEEDED, got HTTP %d %q %v", c.name, status, code, err)
		}
		if took > 5*time.Second {
			t.Errorf("%s: refused after %s; its cost is checked without expanding it", c.name, took)
		}
	}
	if grew := s.peakRSS() - base; grew > 128<<20 {
		t.Errorf("peak RSS grew by %d MB", grew>>20)
	}
	if r := s.gql("", introspectionAliases(1), nil); len(r.Errors) > 0 {
		t.Fatalf("one full introspection: %+v", r.Errors)
	}
}
