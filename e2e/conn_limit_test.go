package e2e

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConnectionsPerAddressAreBounded: an address that opens connections
// and never sends (or never reads) held one goroutine and its buffers per
// connection, without end, and each could pin one answer until the write
// timeout. Now INVENTORY_MAX_CONNS_PER_IP (here 10) bounds the open
// connections of one address at the listener: the 11th from 127.0.0.1 is
// answered 429 and closed; another address (127.0.0.2) is served; closing
// one of the ten gives its place back.
func TestConnectionsPerAddressAreBounded(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_MAX_CONNS_PER_IP": "10"})
	addr := strings.TrimPrefix(s.url, "http://")
	dialFrom := func(local string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	status := func(c net.Conn) int {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return -1
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var held []net.Conn
	for range 10 {
		held = append(held, dialFrom("127.0.0.1"))
	}
	if st := status(held[0]); st != http.StatusOK {
		t.Fatalf("one of 10 connections from 127.0.0.1: %d", st)
	}
	if st := status(dialFrom("127.0.0.1")); st != http.StatusTooManyRequests {
		t.Fatalf("the 11th connection from 127.0.0.1: %d, want 429", st)
	}
	if st := status(dialFrom("127.0.0.2")); st != http.StatusOK {
		t.Fatalf("a connection from 127.0.0.2: %d", st)
	}
	_ = held[9].Close()
	waitUntil(t, 10*time.Second, "a closed connection's place given back", func() bool {
		return status(dialFrom("127.0.0.1")) == http.StatusOK
	})
}
