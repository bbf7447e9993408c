package socket

import "golang.org/x/sys/unix"

// unsent is how many bytes written to the socket its peer has not yet
// acknowledged (SIOCOUTQ), or -1 when it cannot be known.
func (c *corkConn) unsent() int64 {
	if c.raw == nil {
		return -1
	}
	n := int64(-1)
	_ = c.raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
			n = int64(v)
		}
	})
	return n
}
