package socket

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// corkConn is a net.Conn whose writes, while it is corked, collect in a
// buffer that uncork sends in one write. Writes of other goroutines (a pong,
// a close frame) that come meanwhile join the batch, in order: each frame is
// whole in the buffer, because coder/websocket writes a frame under its own
// lock. The buffer exists only while corked (idle sockets hold none).
//
// It also takes ready-made frames without blocking (tryWrite): a fan-out
// writer, which serves thousands of sockets, writes what the kernel takes
// at once and leaves the rest to a drain that runs in the background, in
// order, before any other write.
//
// Invariant: mu is held across every write to Conn, and by a drain for
// its whole length (the drain's goroutine unlocks it), so the bytes of two
// frames never interleave on the wire.
//
// Every write that waits for the peer gives up once the peer has taken no
// byte for stallAfter, and then closes the connection (writeAll): a peer
// that never reads would otherwise hold the writer, the socket's lock and
// the kernel's send buffer (a few MB) for as long as it stays connected,
// and the keep-alive could not notice, as its ping waits for that lock.
type corkConn struct {
	net.Conn
	raw        syscall.RawConn // nil: Conn cannot be written without blocking (tryWrite is always busy)
	unread     []byte          // read before the hijack; only the reader touches it
	stallAfter time.Duration   // 0: writes wait as long as the peer does
	sent       atomic.Int64    // bytes the kernel took, ever: with unsent, what the peer acknowledged

	mu       sync.Mutex
	uncorked sync.Cond // on mu: signalled when the last cork is taken out
	corked   int
	buf      *[]byte
	frames   frameTracker // every byte written, in order: where frames start, whether a close went out
	now      nowWrite     // writeNow's
	nowFn    func(uintptr) bool
}

func newCorkConn(nc net.Conn, unread []byte, stallAfter time.Duration) *corkConn {
	c := &corkConn{Conn: nc, unread: unread, stallAfter: stallAfter}
	c.uncorked.L = &c.mu
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	return c
}

func (c *corkConn) Read(p []byte) (int, error) {
	if len(c.unread) > 0 {
		n := copy(p, c.unread)
		c.unread = c.unread[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// A batch buffer starts small (a viewer's batch is one message) and grows
// as a batch needs.
var corkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1<<10); return &b }}

// maxPooledCork: a batch buffer that grew past this is dropped, not pooled.
const maxPooledCork = 64 << 10

// Write is coder/websocket's: always under its frame lock, so a frame it
// writes in several calls (a header, then a payload bigger than its buffer)
// is never split by another of its frames.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frames.track(p)
	if c.corked == 0 {
		return c.writeAll(p)
	}
	if len(*c.buf)+len(p) > maxCorked {
		// Sent as it comes past maxCorked, in order: a batch's bytes are
		// copied into the buffer, and a late joiner's batch of a big
		// question's newest values is one copy per socket (12 MB each:
		// 100 slow readers from one address held 1.2 GB of them).
		if len(*c.buf) > 0 {
			if _, err := c.writeAll(*c.buf); err != nil {
				return 0, err
			}
			*c.buf = (*c.buf)[:0]
		}
		if len(p) > maxCorked {
			return c.writeAll(p)
		}
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

// maxCorked bounds what a corked socket holds before it writes: a batch
// bigger than this leaves in writes of about this size, not one.
const maxCorked = 256 << 10

// writeAll writes p, waiting for the peer to take it, but never longer than
// stallAfter without progress: a stalled write closes the connection (half a
// frame went out, so nothing can follow it), which ends the socket's reader
// and with it every subscription on it. mu held.
func (c *corkConn) writeAll(p []byte) (int, error) {
	if c.stallAfter <= 0 {
		n, err := c.Conn.Write(p)
		c.sent.Add(int64(n))
		return n, err
	}
	total := 0
	for {
		// The deadline is cleared after the write: tryWrite's non-blocking
		// writes would fail on one that passed.
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.stallAfter))
		n, err := c.Conn.Write(p)
		_ = c.Conn.SetWriteDeadline(time.Time{})
		c.sent.Add(int64(n))
		total += n
		if err == nil {
			return total, nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return total, err
		}
		if n == 0 {
			_ = c.Conn.Close()
			return total, err
		}
		p = p[n:] // the peer reads, slowly: it has another stallAfter
	}
}

func (c *corkConn) cork() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked == 0 {
		c.buf = corkBuffers.Get().(*[]byte)
	}
	c.corked++
}

// uncork sends what collected since the first cork, once the last cork is
// taken out. The lock is held across the write so that a later write cannot
// overtake the batch.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked--; c.corked > 0 {
		return nil
	}
	b := c.buf
	c.buf = nil
	c.uncorked.Broadcast()
	var err error
	if len(*b) > 0 {
		_, err = c.writeAll(*b)
	}
	if cap(*b) <= maxPooledCork {
		*b = (*b)[:0]
		corkBuffers.Put(b)
	}
	return err
}

// TryResult is what TryWrite did with a writer's frames.
type TryResult int

const (
	// Busy: nothing was written; another write has the socket (or it cannot
	// be written without blocking). Send the frames another way
	// (WriteFrames), after anything sent before them.
	Busy TryResult = iota
	// Sent: the kernel took every byte.
	Sent
	// Queued: the kernel took part; the rest goes out in the background,
	// before any later write. The peer reads slowly: later writes wait.
	Queued
)

// ErrClosing: a close frame went out on the socket; no data may follow it
// (RFC 6455, 5.5.1).
var ErrClosing = errors.New("the socket sent its close frame")

// tryWrite writes frames (whole WebSocket frames, never touched again by the
// caller or anyone: a drain may still be writing from them) without waiting
// for the socket.
func (c *corkConn) tryWrite(frames []byte) (TryResult, error) {
	if c.raw == nil || !c.mu.TryLock() {
		return Busy, nil
	}
	// Corked: a batch is being put together, maybe half a frame of it in
	// coder/websocket's buffer, which the batch's holder flushes.
	if c.corked > 0 {
		c.mu.Unlock()
		return Busy, nil
	}
	if c.frames.closed {
		c.mu.Unlock()
		return Busy, ErrClosing
	}
	c.frames.track(frames)
	n, err := c.writeNow(frames)
	if err != nil || n == len(frames) {
		c.mu.Unlock()
		if err != nil {
			return Busy, err
		}
		return Sent, nil
	}
	// The rest goes out before anything else: the drain keeps mu until it
	// is written, or the connection fails (closing it ends the drain).
	rest := frames[n:]
	go func() {
		defer c.mu.Unlock()
		_, _ = c.writeAll(rest)
	}()
	return Queued, nil
}

// writeNow makes one write(2) of p on the non-blocking socket: n is what the
// kernel took (0 when its buffer is full). mu held.
func (c *corkConn) writeNow(p []byte) (int, error) {
	c.now = nowWrite{p: p}
	if c.nowFn == nil {
		c.nowFn = c.now.write // made once: a closure per write would be garbage per message
	}
	err := c.raw.Write(c.nowFn)
	n, werr := c.now.n, c.now.err
	c.now = nowWrite{}
	if err != nil {
		return 0, err
	}
	c.sent.Add(int64(max(n, 0)))
	if errors.Is(werr, syscall.EAGAIN) || errors.Is(werr, syscall.EINTR) {
		werr = nil
	}
	return max(n, 0), werr
}

// acked is how many bytes the peer has acknowledged, ever, and whether any
// are still waiting for it; ok is false when that cannot be known.
func (c *corkConn) acked() (acked int64, waiting, ok bool) {
	unsent := c.unsent() // before sent: a write in between reads as progress, never as a stall
	if unsent < 0 {
		return 0, false, false
	}
	return c.sent.Load() - unsent, unsent > 0, true
}

// nowWrite is writeNow's one write(2), as syscall.RawConn.Write calls it.
type nowWrite struct {
	p   []byte
	n   int
	err error
}

func (w *nowWrite) write(fd uintptr) bool {
	w.n, w.err = syscall.Write(int(fd), w.p)
	return true // never wait for the socket to become writable
}

// writeFrames writes ready-made frames, waiting for the socket: for a batch
// being corked (which may hold half a frame of coder/websocket's) and for a
// drain.
func (c *corkConn) writeFrames(frames []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.corked > 0 {
		c.uncorked.Wait()
	}
	if c.frames.closed {
		return ErrClosing
	}
	c.frames.track(frames)
	_, err := c.writeAll(frames)
	return err
}
