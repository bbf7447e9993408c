package socket

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// TestCorkHoldsABoundedBatch: a corked socket given a batch far bigger than
// maxCorked holds at most maxCorked of it at any time (it writes as it goes,
// in order) and the peer gets every byte in order once uncorked.
func TestCorkHoldsABoundedBatch(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer server.Close()
	c := newCorkConn(server, nil, 0)
	var want bytes.Buffer
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		got <- b
	}()
	c.cork()
	most := 0
	for i := range 128 { // 128 writes of 64 KiB: 8 MiB
		p := bytes.Repeat([]byte{byte(i)}, 64<<10)
		want.Write(p)
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		most = max(most, len(*c.buf))
		c.mu.Unlock()
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	_ = server.Close()
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("the peer got %d bytes, not the %d written in order", len(b), want.Len())
	}
	if most > maxCorked {
		t.Fatalf("the corked socket held %d bytes of the batch, want at most %d", most, maxCorked)
	}
}
