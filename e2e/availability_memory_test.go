package e2e

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// getFrom sends an anonymous GET /graphql?params to base with headers
// (name, value pairs).
func getFrom(t *testing.T, base string, params url.Values, headers ...string) getAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/graphql?"+params.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return getAnswer{status: resp.StatusCode, header: resp.Header, body: body}
}

// stockSeq is an answer's X-Stock-Seq, -1 without one.
func stockSeq(a getAnswer) int64 {
	n, err := strconv.ParseInt(a.header.Get("X-Stock-Seq"), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// TestAvailabilitySeqAndETagOnEveryInstance: availability answered from
// each instance's in-memory copy carries X-Stock-Seq, the highest seq of
// the balances it answers, and the same ETag on two instances; a change to
// another balance leaves both (and 304) alone, a change to one it answers
// moves both, on both instances, within the copy's bound.
func TestAvailabilitySeqAndETagOnEveryInstance(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	ts.seed("CABLE", 2)
	ts.seed("OTHER", 3)
	second, _ := ts.startInstance()
	waitUntil(t, 15*time.Second, "the second instance to be ready", func() bool { return probeReady(t, second) })
	q := url.Values{"query": {`{ availability(skus: ["HP", "CABLE"]) { sku available } }`}}
	seqOf := func(sku string) int64 {
		var s int64
		if err := ts.db.QueryRow(t.Context(), `SELECT coalesce(max(e.seq), 0) FROM stock_events e JOIN skus s ON s.id = e.sku_id WHERE s.code = ANY($1)`,
			strings.Split(sku, ",")).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// tagsAt waits until the newest published seq of skus is past after and
	// both instances answer with it, and returns their (equal) tag.
	tagsAt := func(what string, skus string, after int64) string {
		t.Helper()
		var tags [2]string
		var seqs [2]int64
		var want int64
		defer func() {
			if t.Failed() {
				t.Logf("last tags %q, seqs %v, want seq %d", tags, seqs, want)
			}
		}()
		waitUntil(t, 5*time.Second, what, func() bool {
			want = seqOf(skus) // once the relay published the change
			for i, base := range []string{ts.url, second} {
				a := getFrom(t, base, q)
				if a.status != http.StatusOK {
					t.Fatalf("%s: %d %s", base, a.status, a.body)
				}
				tags[i], seqs[i] = a.header.Get("ETag"), stockSeq(a)
			}
			return want > after && seqs[0] == want && seqs[1] == want && tags[0] == tags[1]
		})
		return tags[0]
	}
	etag := tagsAt("both instances to answer from memory at the seq of HP and CABLE", "HP,CABLE", 0)
	seq := seqOf("HP,CABLE")

	// Another balance moves: the tag stays, 304 on either instance.
	if p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("c1", "k1", "OTHER", 1))); err != nil || p.Reservation == nil {
		t.Fatalf("reserve: %+v %v", p, err)
	}
	time.Sleep(300 * time.Millisecond) // past the relay's tick: the copies have the event
	for _, base := range []string{ts.url, second} {
		if a := getFrom(t, base, q, "If-None-Match", etag); a.status != http.StatusNotModified || a.header.Get("ETag") != etag || stockSeq(a) != seq {
			t.Fatalf("%s after a reserve of another SKU: %d, ETag %q (was %q), X-Stock-Seq %d (was %d)", base, a.status, a.header.Get("ETag"), etag, stockSeq(a), seq)
		}
	}

	// HP moves: a new tag, its seq HP's new event, on both instances.
	if p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("c2", "k1", "HP", 1))); err != nil || p.Reservation == nil {
		t.Fatalf("reserve: %+v %v", p, err)
	}
	moved := tagsAt("both instances to move the tag to HP's new event", "HP,CABLE", seq)
	if moved == etag {
		t.Fatalf("the tag did not change: %q", moved)
	}
	for _, base := range []string{ts.url, second} {
		if a := getFrom(t, base, q, "If-None-Match", etag); a.status != http.StatusOK || !strings.Contains(string(a.body), `"available":4`) {
			t.Fatalf("%s with the old tag after HP moved: %d %s", base, a.status, a.body)
		}
		if a := getFrom(t, base, q, "If-None-Match", moved); a.status != http.StatusNotModified {
			t.Fatalf("%s with the new tag: %d", base, a.status)
		}
	}
}

// TestCachedAnswerReusedUntilATouchedBalanceMoves: an anonymous GET of
// availability answered from memory is reused, byte for byte and without
// gqlgen (X-Answer-Cache: hit), while only other balances move; once one it
// read moves the next answer is the new one, and never the old again.
func TestCachedAnswerReusedUntilATouchedBalanceMoves(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	ts.seed("CABLE", 2)
	ts.seed("OTHER", 3)
	q := url.Values{"query": {`{ availability(skus: ["HP", "CABLE"]) { sku available } }`}}
	var first getAnswer
	waitUntil(t, 5*time.Second, "a cached answer", func() bool {
		first = getFrom(t, ts.url, q)
		return first.header.Get("X-Answer-Cache") == "hit"
	})
	if !strings.Contains(string(first.body), `{"sku":"HP","available":5}`) {
		t.Fatalf("cached answer %s", first.body)
	}
	if p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("c1", "k1", "OTHER", 1))); err != nil || p.Reservation == nil {
		t.Fatalf("reserve: %+v %v", p, err)
	}
	time.Sleep(300 * time.Millisecond) // past the relay's tick: the copy has the event
	for range 5 {
		if a := getFrom(t, ts.url, q); a.header.Get("X-Answer-Cache") != "hit" || string(a.body) != string(first.body) || a.header.Get("ETag") != first.header.Get("ETag") {
			t.Fatalf("after another SKU moved: cache %q, %s (was %s)", a.header.Get("X-Answer-Cache"), a.body, first.body)
		}
	}
	if p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("c2", "k1", "HP", 1))); err != nil || p.Reservation == nil {
		t.Fatalf("reserve: %+v %v", p, err)
	}
	waitUntil(t, 2*time.Second, "the answer to show the reserve", func() bool {
		return strings.Contains(string(getFrom(t, ts.url, q).body), `{"sku":"HP","available":4}`)
	})
	hits := 0
	for range 20 {
		a := getFrom(t, ts.url, q)
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
