package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestBytesInFlightPerAddressAreBounded is the attacker's held-body attack
// against the real binary: connections from one address each declaring a
// 1 MiB JSON body and sending all but its last 100 bytes. The body is read
// whole before anything else (the rate limit needs it), so 1,000 of them
// held 2.2 GB until the read timeout. Now the bytes of bodies being read
// and answers being written are bounded per address
// (INVENTORY_MAX_BYTES_IN_FLIGHT_PER_IP, 16 MiB): 200 such connections
// grow the server by less than 64 MB, those past the bound get 429 at
// once, and another address is served meanwhile.
func TestBytesInFlightPerAddressAreBounded(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0"})
	addr := strings.TrimPrefix(s.url, "http://")
	const conns, size = 200, 1 << 20
	head := fmt.Sprintf("POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	body := `{"query":"{__typename}","extensions":{"pad":"` + strings.Repeat("p", size-60) + `"}}`
	base := s.peakRSS()
	refused := 0
	for range conns {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write([]byte(head + body[:size-100])); err != nil {
			refused++ // closed on us mid-write: refused before the body was read
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		buf := make([]byte, 64)
		if n, _ := c.Read(buf); n > 0 && strings.Contains(string(buf[:n]), " 429 ") {
			refused++
		}
	}
	time.Sleep(time.Second) // the server reads what was sent
	grew := s.peakRSS() - base
	t.Logf("%d connections holding %d KB bodies open: %d refused, peak RSS %+d MB", conns, size>>10, refused, grew>>20)
	if grew > 64<<20 {
		t.Fatalf("%d held bodies grew the server by %d MB", conns, grew>>20)
	}
	if refused == 0 {
		t.Fatalf("no held body was refused")
	}
	r, err := postFromAddr("127.0.0.2", s.url, `{ locations { code } }`)
	if err != nil || r != 200 {
		t.Fatalf("another address meanwhile: %d %v", r, err)
	}
}

// postFromAddr POSTs query anonymously from local address ip; the status.
func postFromAddr(ip, url, query string) (int, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	body := fmt.Sprintf(`{"query":%q}`, query)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body); err != nil {
		return 0, err
	}
	buf := make([]byte, 32)
	n, err := c.Read(buf)
	if n < 12 {
		return 0, fmt.Errorf("short answer %q: %v", buf[:n], err)
	}
	var status int
	_, err = fmt.Sscanf(string(buf[9:12]), "%d", &status)
	return status, err
}
