package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestAnswerCacheKeepsNoCallerSizedKeys: on the real binary, anonymous GETs
// of availability whose query strings carry ~900 KB of padding each (a
// parameter gqlgen ignores; net/http takes request lines up to 1 MB) make
// the serialized-answer cache keep nothing of that size. The cache bounded
// its answers' bytes but not its keys (a GET's whole query string): 300 such
// GETs kept ~270 MB, and 10,000 (the entry cap) would keep 9 GB. A plain
// GET is still cached.
func TestAnswerCacheKeepsNoCallerSizedKeys(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0"})
	s.seed("HP", 5)
	query := url.Values{"query": {`{ availability(skus: ["HP"]) { sku available } }`}}.Encode()
	get := func(rawQuery string) (int, string) {
		t.Helper()
		resp, err := http.Get(s.url + "/graphql?" + rawQuery)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"available":5`) {
			t.Fatalf("GET: %d %.200s", resp.StatusCode, b)
		}
		return resp.StatusCode, resp.Header.Get("X-Answer-Cache")
	}
	waitUntil(t, 10*time.Second, "a plain GET answered from the cache", func() bool {
		_, hit := get(query)
		return hit == "hit"
	})

	before := s.rss()
	pad := strings.Repeat("p", 900<<10)
	const n = 300
	for i := range n {
		get(fmt.Sprintf("%s&pad=%d%s", query, i, pad))
	}
	// Each padded request, asked again, is answered by gqlgen: nothing of
	// it was kept.
	if _, hit := get(query + "&pad=7" + pad); hit == "hit" {
		t.Errorf("a GET with a 900 KB query string was cached")
	}
	grew := s.rss() - before
	t.Logf("%d GETs with 900 KB query strings: RSS %+d MB", n, grew>>20)
	if grew > 100<<20 {
		t.Fatalf("%d GETs with 900 KB query strings grew the server by %d MB (the answers themselves are bytes)", n, grew>>20)
	}
}

// TestAnswerCacheEvictsLeastRecentlyUsed: the serialized-answer cache
// emptied completely when full (10,000 answers), so a few thousand distinct
// anonymous GETs kept everyone's answers cold. Now it drops the least
// recently used: a storefront's hot GET, asked between every 100 of 12,000
// distinct GETs, is a hit every time after the first.
func TestAnswerCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	s := setupWith(t, map[string]string{"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0"})
	s.seed("HP", 5)
	query := url.Values{"query": {`{ availability(skus: ["HP"]) { sku available } }`}}.Encode()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	get := func(rawQuery string) string {
		t.Helper()
		resp, err := client.Get(s.url + "/graphql?" + rawQuery)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET: %d", resp.StatusCode)
		}
		return resp.Header.Get("X-Answer-Cache")
	}
	waitUntil(t, 10*time.Second, "the hot GET answered from the cache", func() bool { return get(query) == "hit" })
	misses := 0
	for i := range 12_000 {
		get(fmt.Sprintf("%s&cold=%d", query, i))
		if i%100 == 99 && get(query) != "hit" {
			misses++
		}
	}
	t.Logf("the hot GET between every 100 of 12,000 distinct GETs: %d misses of 120", misses)
	if misses > 0 {
		t.Fatalf("the hot GET missed %d times of 120 while distinct GETs filled the cache", misses)
	}
}
