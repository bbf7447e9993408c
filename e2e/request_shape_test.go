package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUnsupportedRequestsSayWhatToSend: the first mistakes a newcomer's
// curl makes are answered with what to send instead, before any body is
// read and without touching stock: a POST without Content-Type (curl -d's
// default is form-encoded) or with another media type is 415 naming
// application/json; a method /graphql does not answer is 405 with Allow.
// A JSON POST, a GET query and a multipart upload's header still reach
// their transports.
func TestUnsupportedRequestsSayWhatToSend(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("SHAPE-1", 5)
	reserve := `{"query":"mutation { reserve(input: {checkoutId: \"c\", requestKey: \"k\", ttlSeconds: 60, lines: [{sku: \"SHAPE-1\", location: \"AMS\", quantity: 1}]}) { reservation { id } } }"}`
	for _, c := range []struct {
		name, method, contentType string
		status                    int
		says                      []string
	}{
		{"POST without Content-Type", http.MethodPost, "", http.StatusUnsupportedMediaType, []string{"Content-Type: application/json", "no Content-Type"}},
		{"POST form-encoded", http.MethodPost, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, []string{"Content-Type: application/json", `"application/x-www-form-urlencoded"`}},
		{"POST text/plain", http.MethodPost, "text/plain", http.StatusUnsupportedMediaType, []string{"application/json", `"text/plain"`}},
		{"PUT", http.MethodPut, "application/json", http.StatusMethodNotAllowed, []string{"GET, POST, OPTIONS", `"PUT"`}},
		{"DELETE", http.MethodDelete, "", http.StatusMethodNotAllowed, []string{"GET, POST, OPTIONS"}},
	} {
		req, err := http.NewRequest(c.method, ts.url+"/graphql", strings.NewReader(reserve))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+ts.service)
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answer struct {
			Errors []struct {
				Message    string
				Extensions struct{ Code string }
			}
		}
		if resp.StatusCode != c.status || json.Unmarshal(body, &answer) != nil || len(answer.Errors) != 1 || answer.Errors[0].Extensions.Code != "BAD_REQUEST" {
			t.Errorf("%s: %d %s, want %d and one BAD_REQUEST error", c.name, resp.StatusCode, body, c.status)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(answer.Errors[0].Message, s) {
				t.Errorf("%s: %q does not say %s", c.name, answer.Errors[0].Message, s)
			}
		}
		if c.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, POST, OPTIONS" {
			t.Errorf("%s: Allow %q", c.name, resp.Header.Get("Allow"))
		}
	}
	if n := ts.count("SELECT count(*) FROM reservations"); n != 0 {
		t.Fatalf("refused requests made %d reservations", n)
	}
	if r := ts.post("Bearer "+ts.service, "application/json", []byte(reserve)); len(r.Errors) > 0 {
		t.Fatalf("the same mutation as JSON: %v", r.Errors)
	}
	if n := ts.count("SELECT count(*) FROM reservations"); n != 1 {
		t.Fatalf("the JSON mutation made %d reservations, want 1", n)
	}
}
