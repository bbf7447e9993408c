package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// trickle sends a POST /graphql whose 200 KB JSON body comes 10 bytes at a
// time, with extra header lines, and says how long the server took to cut it
// off (an answer or a closed connection), or within if it had not by then.
func trickle(t *testing.T, url, headers string, within time.Duration) (time.Duration, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"query": "{ locations { code } }", "variables": {"pad": "` + strings.Repeat("x", 200<<10) + `"}}`
	start := time.Now()
	head := fmt.Sprintf("POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n", len(body), headers)
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(body); i += 10 {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := io.WriteString(conn, body[i:min(i+10, len(body))]); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	took := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return took, "still being read"
	}
	if err != nil {
		return took, "closed: " + err.Error()
	}
	resp.Body.Close()
	return took, resp.Status
}

// TestHeadersCannotLiftDeadlines is the trickled-body attack against the real
// binary, with a 1 s read timeout: a POST whose 200 KB body comes 10 bytes
// at a time is cut off at the read timeout whatever its headers say.
// Before, one with `Upgrade: x`, `Upgrade: websocket` or
// `Accept: text/event-stream` had no deadline at all and was still being read
// when the test gave up (10 s); only the plain one got 408. A WebSocket and
// an SSE subscription opened before still deliver events after every
// deadline (read 1 s, write 2 s, request 1 s) has passed.
func TestHeadersCannotLiftDeadlines(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_HTTP_READ_TIMEOUT": "1s", "INVENTORY_HTTP_WRITE_TIMEOUT": "2s",
		"INVENTORY_REQUEST_TIMEOUT": "1s"})
	s.seed("HP", 1)
	ws := dialWS(t, s.url, s.admin, false)
	ws.ack()
	ws.subscribe("1", stockChangedSub, map[string]any{"skus": []string{"HP"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sse := bufio.NewScanner(openSSE(t, ctx, s.url, s.admin, stockChangedSub, map[string]any{"skus": []string{"HP"}}).Body)

	for _, headers := range []string{"", "Upgrade: x\r\n", "Upgrade: websocket\r\nConnection: Upgrade\r\n", "Accept: text/event-stream\r\n"} {
		took, outcome := trickle(t, s.url, headers, 10*time.Second)
		t.Logf("%q: cut off after %v (%s)", headers, took.Round(time.Millisecond), outcome)
		if took > 4*time.Second {
			t.Errorf("%q: cut off after %v, want about the 1 s read timeout", headers, took)
		}
	}

	// Both subscriptions are older than every deadline by now.
	s.gql(s.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "PO-2"}) { userErrors { code } } }`, nil)
	var e wsEvent
	for range 3 { // the seed's event may come first
		if ws.data("stockChanged", &e, 5*time.Second); e.OnHand == 2 {
			break
		}
	}
	if e.SKU != "HP" || e.OnHand != 2 {
		t.Fatalf("WebSocket event after the deadlines: %+v", e)
	}
	got := make(chan string, 1)
	go func() {
		for sse.Scan() {
			if line := sse.Text(); strings.HasPrefix(line, "data: ") && strings.Contains(line, `"onHand":2`) {
				got <- line
				return
			}
		}
		got <- "stream ended: " + fmt.Sprint(sse.Err())
	}()
	select {
	case line := <-got:
		if !strings.Contains(line, `"onHand":2`) {
			t.Fatalf("SSE subscription after the deadlines: %s", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no SSE event after the deadlines")
	}
}

// TestSSEQueriesGetTheRequestTimeout: a mutation sent over SSE (POST,
// Accept: text/event-stream) waits on a row lock at most
// INVENTORY_REQUEST_TIMEOUT, like one over plain HTTP, and changes nothing.
// Before, SSE requests had no request timeout: it waited for the 10 s lock
// timeout.
func TestSSEQueriesGetTheRequestTimeout(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_REQUEST_TIMEOUT": "1s"})
	s.seed("HP", 5)
	tx, err := s.db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	if _, err := tx.Exec(t.Context(), `SELECT FROM balances FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	resp := openSSE(t, ctx, s.url, s.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "PO-9"}) { balance { onHand } } }`, nil)
	sc := bufio.NewScanner(resp.Body)
	answer := ""
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			answer = line
			break
		}
	}
	took := time.Since(start)
	var r gqlResponse
	_ = json.Unmarshal([]byte(answer), &r)
	t.Logf("mutation over SSE answered after %v: %s", took.Round(time.Millisecond), answer)
	if r.errorCode() != "INTERNAL" || !strings.Contains(r.Errors[0].Message, "took too long") || took > 5*time.Second {
		t.Fatalf("after %v: %s, want the request abandoned after about 1 s", took, answer)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := s.count(`SELECT on_hand FROM balances`); n != 5 {
		t.Fatalf("on_hand %d after an abandoned receive over SSE, want 5", n)
	}
}
