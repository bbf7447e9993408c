package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// availabilityQuery is what a storefront would persist.
const availabilityQuery = `query($s: [String!]!) { availability(skus: $s) { sku available onHand reserved } }`

// getAnswer is one GET /graphql answer, raw.
type getAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a getAnswer) decode(t *testing.T) gqlResponse {
	t.Helper()
	var r gqlResponse
	if err := json.Unmarshal(a.body, &r); err != nil {
		t.Fatalf("answer %d is not JSON: %s", a.status, a.body)
	}
	return r
}

// persisted is the extensions parameter of a persisted query.
func persisted(query string) string {
	sum := sha256.Sum256([]byte(query))
	return `{"persistedQuery":{"version":1,"sha256Hash":"` + hex.EncodeToString(sum[:]) + `"}}`
}

// getGraphQL sends GET /graphql?params with headers (name, value pairs).
func (ts *testServer) getGraphQL(params url.Values, headers ...string) getAnswer {
	ts.t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.url+"/graphql?"+params.Encode(), nil)
	if err != nil {
		ts.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return getAnswer{status: resp.StatusCode, header: resp.Header, body: body}
}

func varsParam(t *testing.T, vars map[string]any) string {
	t.Helper()
	b, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// notShared fails unless the answer may not be kept by a shared cache.
func notShared(t *testing.T, what string, a getAnswer, wantCacheControl string) {
	t.Helper()
	if got := a.header.Get("Cache-Control"); got != wantCacheControl {
		t.Errorf("%s: Cache-Control %q, want %q", what, got, wantCacheControl)
	}
	if a.header.Get("ETag") != "" || a.header.Get("Expires") != "" {
		t.Errorf("%s: cacheable headers %v", what, a.header)
	}
	if !strings.Contains(strings.Join(a.header.Values("Vary"), ","), "Authorization") {
		t.Errorf("%s: Vary %q", what, a.header.Values("Vary"))
	}
}

// TestCacheAvailabilityOverGETWithAPQ: a storefront reads availability by
// GET with a persisted query's hash, as a CDN in front of it would fetch
// it: public for max-age, an ETag, 304 while nothing moved, a new ETag
// once a reserve moved one of the balances.
func TestCacheAvailabilityOverGETWithAPQ(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_CORS_ORIGINS": "https://shop.example"})
	ts.seed("HP", 5)
	ts.seed("CABLE", 2)
	vars := map[string]any{"s": []string{"HP", "CABLE"}}
	hashOnly := url.Values{"extensions": {persisted(availabilityQuery)}, "variables": {varsParam(t, vars)}}

	// The hash alone, before the server knows the text: not found, not cacheable.
	a := ts.getGraphQL(hashOnly)
	if code := a.decode(t).errorCode(); code != "PERSISTED_QUERY_NOT_FOUND" {
		t.Fatalf("hash before the query: %d %s", a.status, a.body)
	}
	notShared(t, "PersistedQueryNotFound", a, "no-store")

	// The text with its hash, once.
	withQuery := url.Values{"query": {availabilityQuery}, "extensions": hashOnly["extensions"], "variables": hashOnly["variables"]}
	a = ts.getGraphQL(withQuery)
	if a.status != http.StatusOK || len(a.decode(t).Errors) > 0 {
		t.Fatalf("query with hash: %d %s", a.status, a.body)
	}

	// From then on the hash alone: the data POST gives, publicly cacheable.
	first := ts.getGraphQL(hashOnly, "Origin", "https://shop.example")
	if first.status != http.StatusOK {
		t.Fatalf("hash only: %d %s", first.status, first.body)
	}
	post := ts.gql("", availabilityQuery, vars)
	if got, want := first.decode(t).Data["availability"], post.Data["availability"]; len(post.Errors) > 0 || !bytes.Equal(got, want) {
		t.Fatalf("GET gave %s, POST %s %+v", got, want, post.Errors)
	}
	if cc := first.header.Get("Cache-Control"); cc != "public, max-age=5" {
		t.Errorf("Cache-Control %q", cc)
	}
	etag := first.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 10 {
		t.Fatalf("ETag %q", etag)
	}
	vary := strings.Join(first.header.Values("Vary"), ", ")
	for _, v := range []string{"Origin", "Authorization", "Cookie"} {
		if !strings.Contains(vary, v) {
			t.Errorf("Vary %q lacks %s", vary, v)
		}
	}
	if first.header.Get("Access-Control-Allow-Origin") != "https://shop.example" {
		t.Errorf("CORS header lost: %v", first.header)
	}
	if first.header.Get("X-RateLimit-Remaining") != "" {
		t.Errorf("a shared answer carries a caller's rate limit: %v", first.header)
	}
	if a = ts.getGraphQL(hashOnly); a.header.Get("ETag") != etag || !bytes.Equal(a.body, first.body) {
		t.Fatalf("nothing moved, yet ETag %q != %q or body %s != %s", a.header.Get("ETag"), etag, a.body, first.body)
	}

	// Revalidation while nothing moved: 304, no body.
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		a = ts.getGraphQL(hashOnly, "If-None-Match", inm)
		if a.status != http.StatusNotModified || len(a.body) != 0 {
			t.Fatalf("If-None-Match %s: %d %q", inm, a.status, a.body)
		}
		if a.header.Get("ETag") != etag || a.header.Get("Cache-Control") != "public, max-age=5" {
			t.Errorf("304 headers: %v", a.header)
		}
	}
	if a = ts.getGraphQL(hashOnly, "If-None-Match", `"other"`); a.status != http.StatusOK {
		t.Fatalf("If-None-Match of another tag: %d", a.status)
	}

	// A reserve on HP moves a balance read: 200 with a new ETag.
	if p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("c1", "k1", "HP", 1))); err != nil || p.Reservation == nil {
		t.Fatalf("reserve: %+v %v", p, err)
	}
	reserved := time.Now() // the reserve committed before
	// availability may be answered from the instance's in-memory copy, at
	// most INVENTORY_AVAILABILITY_MAX_LAG (1s) behind (docs/api.md, "Freshness"):
	// until it has the reserve's event it may answer as before (304, or
	// the same bytes). Past the bound no answer may: the copy leaves
	// answers to the database when it is staler. And the copy must apply
	// the event: an answer it gave (X-Stock-Seq, which only the copy's
	// answers carry) at the reserve's seq or later, with the reserve in it,
	// comes within the bound and a margin for a loaded machine. A copy
	// that never applied an event would have the database answer the new
	// bytes from the bound on, and never carry X-Stock-Seq.
	const margin = 3 * time.Second
	maxLag := time.Second
	if ts.env["DATABASE_REPLICA_URL"] != "" {
		// The database's answer may come from the standby, up to
		// INVENTORY_REPLICA_MAX_LAG (1s) behind.
		maxLag += time.Second
	}
	hpSeq := func() int64 { // the reserve's seq, once the relay published every event of HP
		var seq int64
		if err := ts.db.QueryRow(t.Context(), `SELECT CASE WHEN bool_and(e.seq IS NOT NULL) THEN max(e.seq) ELSE 0 END
			FROM stock_events e JOIN skus s ON s.id = e.sku_id WHERE s.code = 'HP'`).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	var want int64
	for deadline := reserved.Add(maxLag + margin); ; time.Sleep(20 * time.Millisecond) {
		if want == 0 {
			want = hpSeq()
		}
		asked := time.Now()
		a = ts.getGraphQL(hashOnly, "If-None-Match", etag)
		moved := a.status == http.StatusOK && !bytes.Equal(a.body, first.body)
		if !moved && asked.Sub(reserved) > maxLag {
			t.Fatalf("%v after the reserve committed (bound %v) the answer was still the one before it: %d %s",
				asked.Sub(reserved).Round(time.Millisecond), maxLag, a.status, a.body)
		}
		seq, _ := strconv.ParseInt(a.header.Get("X-Stock-Seq"), 10, 64)
		if moved && want > 0 && seq >= want {
			t.Logf("the copy answered with the reserve (X-Stock-Seq %d) %v after it committed", seq, asked.Sub(reserved).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer from the copy (X-Stock-Seq >= %d, the reserve's) within %v of the reserve: the last was %d, X-Stock-Seq %q, %s",
				want, maxLag+margin, a.status, a.header.Get("X-Stock-Seq"), a.body)
		}
	}
	if a.status != http.StatusOK || a.header.Get("ETag") == "" || a.header.Get("ETag") == etag {
		t.Fatalf("after a reserve: %d ETag %q (was %q)", a.status, a.header.Get("ETag"), etag)
	}
	var avail []struct {
		SKU       string `json:"sku"`
		Available int    `json:"available"`
	}
	if err := json.Unmarshal(a.decode(t).Data["availability"], &avail); err != nil || len(avail) != 2 || avail[0].SKU != "HP" || avail[0].Available != 4 {
		t.Fatalf("after a reserve: %s %v", a.body, err)
	}
	if a = ts.getGraphQL(hashOnly, "If-None-Match", a.header.Get("ETag")); a.status != http.StatusNotModified {
		t.Fatalf("the new ETag: %d", a.status)
	}
}

// TestCachePOSTUnchanged: POST answers get no caching headers (none are
// needed: HTTP caches do not reuse them).
func TestCachePOSTUnchanged(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	body := mustJSON(map[string]any{"query": `{ availability(skus: ["HP"]) { sku } }`})
	req, err := http.NewRequest(http.MethodPost, ts.url+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("If-None-Match", "*")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "" || resp.Header.Get("ETag") != "" {
		t.Fatalf("POST: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestCacheAuthenticatedGETIsPrivate: a GET with any credentials, usable or
// not, is never public and never revalidated.
func TestCacheAuthenticatedGETIsPrivate(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	q := url.Values{"query": {`{ availability(skus: ["HP"]) { sku available } }`}}
	anon := ts.getGraphQL(q)
	etag := anon.header.Get("ETag")
	if anon.status != http.StatusOK || etag == "" {
		t.Fatalf("anonymous: %d %v %s", anon.status, anon.header, anon.body)
	}
	for _, c := range []struct{ name, header, value string }{
		{"admin key", "Authorization", "Bearer " + ts.admin},
		{"service key", "Authorization", "Bearer " + ts.service},
		{"bad token", "Authorization", "Bearer nope"},
		{"session cookie", "Cookie", "inventory_admin=forged"},
	} {
		a := ts.getGraphQL(q, c.header, c.value, "If-None-Match", etag)
		if a.status != http.StatusOK || len(a.body) == 0 {
			t.Errorf("%s: %d %s", c.name, a.status, a.body)
		}
		notShared(t, c.name, a, "private, no-store")
	}
}

// TestCacheErrorsAreNotStored: error answers are no-store, whatever the
// caller.
func TestCacheErrorsAreNotStored(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	for name, q := range map[string]string{
		"unknown field": `{ availability(skus: ["HP"]) { nope } }`,
		"not a query":   `{{`,
		"mutation":      `mutation { createLocation(input: {code: "X", name: "X", priority: 2}) { userErrors { code } } }`,
	} {
		a := ts.getGraphQL(url.Values{"query": {q}}, "If-None-Match", "*")
		if a.status == http.StatusOK && len(a.decode(t).Errors) == 0 {
			t.Errorf("%s: no error: %s", name, a.body)
		}
		notShared(t, name, a, "no-store")
	}
	if n := ts.count("SELECT count(*) FROM locations WHERE code = 'X'"); n != 0 {
		t.Fatalf("a GET ran a mutation")
	}
}

// TestCacheAPQNeverPersistsMutations: the rate limiter knows a mutation by
// its text, so a hash alone must never stand for one.
func TestCacheAPQNeverPersistsMutations(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	m := `mutation { createLocation(input: {code: "X", name: "X", priority: 2}) { userErrors { code } } }`
	var ext map[string]any
	if err := json.Unmarshal([]byte(persisted(m)), &ext); err != nil {
		t.Fatal(err)
	}
	r := ts.post("Bearer "+ts.admin, "application/json", mustJSON(map[string]any{"query": m, "extensions": ext}))
	if len(r.Errors) > 0 {
		t.Fatalf("mutation with its hash: %+v", r.Errors)
	}
	r = ts.post("Bearer "+ts.admin, "application/json", mustJSON(map[string]any{"extensions": ext}))
	if r.errorCode() != "PERSISTED_QUERY_NOT_FOUND" {
		t.Fatalf("a mutation's hash alone: %+v %s", r.Errors, r.Data)
	}
}

// TestCacheRateLimitGETIsARead: GET queries spend the read budget; the 429
// is not cacheable.
func TestCacheRateLimitGETIsARead(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "2", "INVENTORY_RATE_LIMIT_ANONYMOUS_WRITES": "100"})
	q := url.Values{"query": {`{ availability(skus: ["HP"]) { sku } }`}}
	for i := 0; i < 2; i++ {
		if a := ts.getGraphQL(q); a.status != http.StatusOK {
			t.Fatalf("GET %d: %d %s", i, a.status, a.body)
		}
	}
	a := ts.getGraphQL(q)
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("third GET: %d %s", a.status, a.body)
	}
	notShared(t, "429", a, "no-store")
}

// TestCacheSubscriptionsUntouched: WebSocket upgrades and SSE streams pass
// the caching layer as they are.
func TestCacheSubscriptionsUntouched(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)

	c := dialWS(t, ts.url, ts.admin, false)
	c.ack()
	c.subscribe("1", stockChangedSub, map[string]any{"after": 0})
	var e wsEvent
	c.data("stockChanged", &e, 10*time.Second)
	if e.SKU != "HP" {
		t.Fatalf("WebSocket event %+v", e)
	}

	resp := openSSE(t, context.Background(), ts.url, ts.admin, stockChangedSub, map[string]any{"after": 0})
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || resp.Header.Get("ETag") != "" {
		t.Fatalf("SSE: %q %v", ct, resp.Header)
	}
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); n == 0 {
		t.Fatalf("SSE: nothing streamed: %v", err)
	}
}
