package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestCeilingAnswersLikeTheServer: the ceiling must answer the same bytes
// our server does for the same request (so the comparison is like for
// like), over POST and persisted-query GET, and refuse an unknown hash.
func TestCeilingAnswersLikeTheServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(ceilingHandler(map[string]int{"S00001": 7, "S00002": 0}))
	defer srv.Close()
	want := `{"data":{"availability":[{"sku":"S00002","available":0},{"sku":"S00001","available":7},null]}}` + "\n"
	body := `{"query":"` + availabilityQuery + `","variables":{"s":["S00002","S00001","NOPE"]}}`
	resp, err := http.Post(srv.URL+"/graphql", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != want {
		t.Fatalf("POST answered %q, want %q", got, want)
	}
	ext := `{"persistedQuery":{"version":1,"sha256Hash":"` + availabilityHash + `"}}`
	get := func(ext string) string {
		resp, err := http.Get(srv.URL + "/graphql?variables=" + url.QueryEscape(`{"s":["S00002","S00001","NOPE"]}`) + "&extensions=" + url.QueryEscape(ext))
		if err != nil {
			t.Fatal(err)
		}
		return readAll(t, resp)
	}
	if got := get(ext); got != want {
		t.Fatalf("GET answered %q, want %q", got, want)
	}
	if got := get(strings.Replace(ext, availabilityHash[:8], "00000000", 1)); !strings.Contains(got, "PersistedQueryNotFound") {
		t.Fatalf("GET with an unknown hash answered %q", got)
	}
	if err := availabilityOK([]byte(want)); err != nil {
		t.Fatalf("the load generator would not accept the ceiling's answer: %v", err)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
