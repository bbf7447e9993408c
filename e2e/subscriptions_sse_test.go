package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStockChangedOverSSE subscribes with Server-Sent Events, as curl would:
// a POST with Accept: text/event-stream, events as "event: next" lines.
func TestStockChangedOverSSE(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	ts.seed("CABLE", 2)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := openSSE(t, ctx, ts.url, ts.admin, stockChangedSub, map[string]any{"after": 0})
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var got []wsEvent
	event := ""
	for len(got) < 3 && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "next":
			var p struct {
				Data struct{ StockChanged wsEvent }
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &p); err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Data.StockChanged)
			if len(got) == 2 { // one more, live
				ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "r"}) { userErrors { code } } }`, nil)
			}
		}
	}
	requireDense(t, got, 1)
	if len(got) != 3 || got[2].SKU != "HP" || got[2].OnHand != 6 {
		t.Fatalf("events over SSE: %+v (%v)", got, sc.Err())
	}
}

// openSSE starts a subscription over SSE (POST, Accept: text/event-stream)
// as token (anonymous when empty); the response body is closed when the
// test ends.
func openSSE(t *testing.T, ctx context.Context, url, token, query string, vars map[string]any) *http.Response {
	t.Helper()
	body := mustJSON(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if token != "" { // none: anonymous
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
