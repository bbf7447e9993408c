package api

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ConnLimit bounds the connections one client address holds open at once
// (IPv6: one /64), at the listener, before a byte is read: each open
// connection is a goroutine and buffers, and an answer its client does not
// read stays in memory until the write timeout; the per-request caps bound
// one answer, this bounds how many one address can pin. A connection past
// the bound is answered 429 and closed. Connections from the trusted
// proxies are not counted (every client behind them shares their address).
type ConnLimit struct {
	net.Listener
	max     int
	exempt  []netip.Prefix
	mu      sync.Mutex
	open    map[netip.Addr]int
	refused atomic.Int64
}

// NewConnLimit wraps ln; max < 1 is no bound (ln itself is returned
// wrapped, refusing nothing). trustedProxies are CIDR prefixes or addresses.
func NewConnLimit(ln net.Listener, max int, trustedProxies []string) *ConnLimit {
	l := &ConnLimit{Listener: ln, max: max, open: map[netip.Addr]int{}}
	for _, p := range trustedProxies {
		if !strings.Contains(p, "/") {
			if a, err := netip.ParseAddr(p); err == nil {
				p = netip.PrefixFrom(a, a.BitLen()).String()
			}
		}
		if prefix, err := netip.ParsePrefix(p); err == nil {
			l.exempt = append(l.exempt, prefix.Masked())
		}
	}
	return l
}

// Refused counts the connections refused for their address's bound.
func (l *ConnLimit) Refused() int64 { return l.refused.Load() }

// tooManyConns is what a refused connection is sent before it is closed.
const tooManyConns = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: 73\r\n\r\nthis address has too many open connections (INVENTORY_MAX_CONNS_PER_IP)\r\n"

// Accept returns the next connection whose address is within its bound.
func (l *ConnLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.max < 1 {
			return c, err
		}
		addr, counted := l.key(c.RemoteAddr())
		if !counted {
			return c, nil
		}
		l.mu.Lock()
		over := l.open[addr] >= l.max
		if !over {
			l.open[addr]++
		}
		l.mu.Unlock()
		if over {
			l.refused.Add(1)
			go refuseConn(c)
			continue
		}
		return &limitedConn{Conn: c, release: func() { l.release(addr) }}, nil
	}
}

// refuseConn tells the client why and closes, without waiting on it long.
func refuseConn(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte(tooManyConns))
	_ = c.Close()
}

func (l *ConnLimit) release(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[addr]--; l.open[addr] <= 0 {
		delete(l.open, addr)
	}
}

// key is the address a connection counts against (an IPv6 address's /64),
// and false for a trusted proxy's.
func (l *ConnLimit) key(remote net.Addr) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return netip.Addr{}, false
	}
	a := ap.Addr().Unmap()
	for _, p := range l.exempt {
		if p.Contains(a) {
			return a, false
		}
	}
	if a.Is6() {
		a = netip.PrefixFrom(a, 64).Masked().Addr()
	}
	return a, true
}

// limitedConn gives its place back once, when it is closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// errNoSyscallConn: the connection under a limitedConn has no descriptor.
var errNoSyscallConn = errors.New("the connection has no file descriptor")

// SyscallConn is the connection's own: the WebSocket fan-out writes to a
// socket without blocking (socket.Writer.TryWrite) through it.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errNoSyscallConn
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("the connection's descriptor: %w", err)
	}
	return raw, nil
}
