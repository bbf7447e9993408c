//go:build !linux

package socket

// unsent cannot be known here: the keep-alive's stall check is off.
func (c *corkConn) unsent() int64 { return -1 }
