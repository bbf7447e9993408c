package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestRefusalsStayOutOfTheLog: on the real binary at the default level,
// what a hostile or mistaken caller sends to /graphql — a WebSocket from
// another site's page, an upgrade without a handshake, an SSE request with
// a body that is not JSON — gets its refusal and leaves the server's output
// as it was. gqlgen prints these with the standard library's logger: each
// refused page printed "unable to upgrade … request Origin "https://evil.example"
// is not authorized" at no level (it looked like a failure in every test
// run), and each undecodable SSE body was printed whole, so one caller could
// write as much to the log as it sent.
func TestRefusalsStayOutOfTheLog(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_LOG_LEVEL": "info"})
	// The request log records each answer at INFO; nothing else may appear.
	// The sweeper's first pass (pruning, then reconciliation) logs at INFO
	// once River has elected a leader, which on a loaded machine can be
	// seconds after readiness: counting starts after it.
	waitUntil(t, 30*time.Second, "the sweeper's first pass", func() bool { return strings.Contains(s.logs.String(), `msg="reconciliation pass"`) })
	time.Sleep(200 * time.Millisecond)
	before := len(s.logs.String())

	wsURL := "ws" + strings.TrimPrefix(s.url, "http") + "/graphql"
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range 20 {
		conn, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"},
			HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
		if err == nil {
			conn.CloseNow()
			t.Fatalf("dial %d from another origin was accepted", i)
		}
		if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("dial %d from another origin: %v %v", i, resp, err)
		}
	}
	// The answer says why, to the developer whose page was refused.
	req, _ := http.NewRequest(http.MethodGet, s.url+"/graphql", nil)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `origin "https://evil.example"`) || !strings.Contains(string(body), "INVENTORY_CORS_ORIGINS") {
		t.Fatalf("foreign-origin upgrade: %d %q", resp.StatusCode, body)
	}
	// An upgrade with no handshake at all.
	req, _ = http.NewRequest(http.MethodGet, s.url+"/graphql", nil)
	req.Header.Set("Upgrade", "websocket")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Fatalf("upgrade without a handshake: %d", resp.StatusCode)
	}
	// An SSE request whose body is 100 KB of not-JSON.
	junk := bytes.Repeat([]byte("x"), 100<<10)
	req, _ = http.NewRequest(http.MethodPost, s.url+"/graphql", bytes.NewReader(junk))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("SSE with a body that is not JSON: %d", resp.StatusCode)
	}

	time.Sleep(200 * time.Millisecond)
	logged := s.logs.String()[before:]
	var other []string
	for line := range strings.SplitSeq(strings.TrimSpace(logged), "\n") {
		if line != "" && !strings.Contains(line, "msg=request ") {
			other = append(other, line)
		}
	}
	if len(other) > 0 || len(logged) > 20<<10 {
		t.Fatalf("refusals wrote %d bytes to the log, %d lines besides the request log, such as:\n%.600s", len(logged), len(other), strings.Join(other, "\n"))
	}
}
