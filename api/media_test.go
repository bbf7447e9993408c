package api

import (
	"strings"
	"testing"
)

func TestResponseMediaType(t *testing.T) {
	t.Parallel()
	const gr, js = mediaGraphQLResponse, mediaJSON
	for _, c := range []struct {
		accept string
		want   string // "" is 406
	}{
		{"", js},
		{"*/*", js},
		{"application/*", js},
		{js, js},
		{gr, gr},
		{"Application/GraphQL-Response+JSON", gr},
		{gr + ", " + js, gr},
		{js + ", " + gr, js},
		{gr + "; charset=utf-8, " + js + "; charset=utf-8", gr},
		{js + ";q=0.5, " + gr, gr},
		{gr + ";q=0.4, " + js + ";q=0.8", js},
		{"*/*;q=0.1, " + gr, gr},
		// json's own range (q 0.1) is more specific than application/*, which
		// gives graphql-response+json its 0.2.
		{"application/*;q=0.2, " + js + ";q=0.1", gr},
		{js + ";q=0, */*", gr},
		{gr + ";q=0, */*", js},
		{gr + ";q=0, " + js + ";q=0", ""},
		{"*/*;q=0", ""},
		{"text/html", ""},
		{"text/html, application/xhtml+xml, application/xml;q=0.9, */*;q=0.8", js},
		{"application/json, multipart/mixed", js},
		{"text/event-stream", ""},
		{js + ";q=abc, " + gr, gr}, // an unreadable q: that range is ignored
		{js + ";q=NaN", js},        // nothing readable: as if absent
		{"garbage", js},
		{",,,", js},
		{"*/json", js},
		{gr + ";q=1.5", js},
		// Only the first maxAcceptRanges ranges are read.
		{strings.Repeat("text/html, ", maxAcceptRanges-1) + gr, gr},
		{strings.Repeat("text/html, ", maxAcceptRanges) + gr, ""},
		{"application/" + strings.Repeat("x", maxMediaRangeBytes) + ", " + gr, gr},
	} {
		want := c.want
		got, ok := responseMediaType(c.accept)
		if !ok {
			got = ""
		}
		if got != want {
			t.Errorf("responseMediaType(%q) = %q, want %q", c.accept, got, want)
		}
	}
}

// FuzzResponseMediaType: any Accept header gives one of the two media
// types or a 406, never a panic; and whatever follows it, a first element
// naming application/graphql-response+json (q 1) wins.
func FuzzResponseMediaType(f *testing.F) {
	for _, s := range []string{"", "*/*", mediaJSON, mediaGraphQLResponse + ";q=0.9, application/json;q=1", "text/html;q=0", "a/b;q=;q=1,", "*/*;q=0.1,application/*;q=0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		got, ok := responseMediaType(accept)
		if ok != (got != "") || (ok && got != mediaJSON && got != mediaGraphQLResponse) {
			t.Fatalf("responseMediaType(%q) = %q, %v", accept, got, ok)
		}
		if got, _ := responseMediaType(mediaGraphQLResponse + "," + accept); got != mediaGraphQLResponse {
			t.Fatalf("responseMediaType(%q) = %q", mediaGraphQLResponse+","+accept, got)
		}
	})
}
