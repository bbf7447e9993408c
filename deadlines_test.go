package main

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
