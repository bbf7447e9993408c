package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTrickledBodyIsCutOff: a client that sends its headers and then stalls
// in the middle of the body gets 408 once INVENTORY_HTTP_READ_TIMEOUT has
// passed and the connection is closed, while a subscription on another
// connection outlives that deadline.
func TestTrickledBodyIsCutOff(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_HTTP_READ_TIMEOUT": "1s", "INVENTORY_HTTP_WRITE_TIMEOUT": "1s"})
	c := dialWS(t, ts.url, ts.admin, false)
	c.ack()
	c.subscribe("1", stockChangedSub, nil)

	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\":"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout || took < time.Second || took > 5*time.Second {
		t.Fatalf("stalled body: %d after %v, want 408 after about 1 s", resp.StatusCode, took)
	}

	// The subscription is still served after the deadline has passed.
	time.Sleep(1500 * time.Millisecond)
	ts.seed("HP", 1)
	var e wsEvent
	c.data("stockChanged", &e, 5*time.Second)
	if e.SKU != "HP" {
		t.Fatalf("event after the deadline: %+v", e)
	}
}

// TestRequestTimeoutAbandonsWaits: a request waiting on a row lock gives up
// after INVENTORY_REQUEST_TIMEOUT with an error that says nothing changed,
// instead of holding its connection until the lock timeout.
func TestRequestTimeoutAbandonsWaits(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_REQUEST_TIMEOUT": "1s"})
	ts.seed("HP", 5)
	tx, err := ts.db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	if _, err := tx.Exec(t.Context(), `SELECT FROM balances FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "PO-9"}) { balance { onHand } } }`, nil)
	took := time.Since(start)
	if r.errorCode() != "INTERNAL" || !strings.Contains(r.Errors[0].Message, "took too long") || took > 5*time.Second {
		t.Fatalf("after %v: %+v, want the request abandoned after about 1 s", took, r)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := ts.count(`SELECT on_hand FROM balances`); n != 5 {
		t.Fatalf("on_hand %d after an abandoned receive, want 5", n)
	}
}
