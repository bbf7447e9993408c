package socket

import "encoding/binary"

// WebSocket framing (RFC 6455, 5.2) of what the server sends: unmasked.
const (
	opText  = 0x1
	opClose = 0x8
	finBit  = 0x80
)

// AppendTextFrame appends to dst one final text frame whose payload is
// parts, one after the other, as coder/websocket would frame the message
// (uncompressed: permessage-deflate is not negotiated). Fan-out frames a
// group's message once and writes the same bytes to every member that
// shares its operation id and subprotocol (TryWrite).
func AppendTextFrame(dst []byte, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	dst = append(dst, finBit|opText)
	switch {
	case n < 126:
		dst = append(dst, byte(n))
	case n <= 0xffff:
		dst = append(dst, 126)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, 127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

// frameTracker follows the frames written to a socket, byte by byte of
// their headers and skipping their payloads, to know when a close frame
// went out: after it no data frame may (RFC 6455, 5.5.1), and frames the
// fan-out writes do not pass through coder/websocket, which knows.
type frameTracker struct {
	hdr     [14]byte // the header read so far (at most 14 bytes)
	n       int
	payload uint64 // bytes of the current frame's payload still to come
	closed  bool
}

func (t *frameTracker) track(p []byte) {
	for len(p) > 0 {
		if t.payload > 0 {
			skip := min(uint64(len(p)), t.payload)
			t.payload -= skip
			p = p[skip:]
			continue
		}
		t.hdr[t.n] = p[0]
		t.n++
		p = p[1:]
		if size, ok := t.header(); ok {
			t.payload, t.n = size, 0
		}
	}
}

// header reports the payload length once the header is complete.
func (t *frameTracker) header() (uint64, bool) {
	if t.n < 2 {
		return 0, false
	}
	need, length := 2, uint64(t.hdr[1]&0x7f)
	switch length {
	case 126:
		need += 2
	case 127:
		need += 8
	}
	if t.hdr[1]&0x80 != 0 {
		need += 4 // masked (a client's frame): not written here, but counted right
	}
	if t.n < need {
		return 0, false
	}
	switch length {
	case 126:
		length = uint64(binary.BigEndian.Uint16(t.hdr[2:4]))
	case 127:
		length = binary.BigEndian.Uint64(t.hdr[2:10])
	}
	if t.hdr[0]&0x0f == opClose {
		t.closed = true
	}
	return length, true
}
