package webhooks

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// publicUnicast is the address policy written a second way, as arithmetic on
// the address bytes rather than prefixes (a typo in one shows against the
// other): true for a public unicast address a delivery may reach.
func publicUnicast(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	if a.Is4() {
		b := a.As4()
		switch {
		case b[0] == 0, b[0] == 10, b[0] == 127, b[0] >= 224, // this network, private, loopback, multicast, reserved, broadcast
			b[0] == 100 && b[1]>>6 == 1, // 100.64/10
			b[0] == 169 && b[1] == 254, b[0] == 172 && b[1]>>4 == 1, b[0] == 192 && b[1] == 168,
			b[0] == 192 && b[1] == 0 && (b[2] == 0 || b[2] == 2), // 192.0.0/24, 192.0.2/24
			b[0] == 192 && (b[1] == 31 && b[2] == 196 || b[1] == 52 && b[2] == 193 || b[1] == 88 && b[2] == 99 || b[1] == 175 && b[2] == 48),
			b[0] == 198 && b[1]>>1 == 9, // 198.18/15
			b[0] == 198 && b[1] == 51 && b[2] == 100, b[0] == 203 && b[1] == 0 && b[2] == 113:
			return false
		}
		return true
	}
	b := a.As16()
	w := func(i int) uint16 { return uint16(b[2*i])<<8 | uint16(b[2*i+1]) }
	switch {
	case b[0]>>5 != 1: // outside 2000::/3: ::/96, ::ffff:0:0/96, 64:ff9b::, 100::, 5f00::/16 (0101…), fc00::/7, fe80::/10, fec0::/10, ff00::/8
		return false
	case w(0) == 0x2001 && w(1) < 0x200, // 2001::/23
		w(0) == 0x2001 && w(1) == 0xdb8, w(0) == 0x2002,
		w(0) == 0x2620 && w(1) == 0x4f && w(2) == 0x8000,
		w(0) == 0x3fff && w(1) < 0x1000: // 3fff::/20
		return false
	}
	return true
}

// FuzzAddressCheck: for any IPv4 or IPv6 address, with or without a zone,
// Forbidden never panics and allows exactly the public unicast addresses, and
// the dialer's Control, given the address as a dial target, agrees.
func FuzzAddressCheck(f *testing.F) {
	for _, tc := range specialCases {
		a := netip.MustParseAddr(tc.addr)
		if a.Is4() {
			b := a.As4()
			f.Add(b[:], "", uint16(443))
		} else {
			b := a.As16()
			f.Add(b[:], "", uint16(80))
		}
	}
	f.Add([]byte{0xfe, 0x80, 15: 1}, "eth0", uint16(0))
	f.Add([]byte{0x20, 0x01, 0x48, 0x60, 15: 0x88}, "1", uint16(65535))
	f.Add([]byte{}, "", uint16(1))
	f.Fuzz(func(t *testing.T, raw []byte, zone string, port uint16) {
		var a netip.Addr
		switch {
		case len(raw) >= 16:
			a = netip.AddrFrom16([16]byte(raw[:16])).WithZone(zone)
		case len(raw) >= 4:
			a = netip.AddrFrom4([4]byte(raw[:4]))
		}
		want := publicUnicast(a)
		if got := !Forbidden(a); got != want {
			t.Fatalf("Forbidden(%v) = %v, want %v", a, !got, !want)
		}
		if !a.IsValid() {
			return
		}
		if err := Control(false)("tcp", netip.AddrPortFrom(a, port).String(), nil); (err == nil) != want {
			t.Fatalf("Control(%v) = %v, want allowed %v", netip.AddrPortFrom(a, port), err, want)
		}
		if err := Control(true)("tcp", netip.AddrPortFrom(a, port).String(), nil); err != nil {
			t.Fatalf("Control allowing private refused %v: %v", a, err)
		}
	})
}

// inetAton parses host as inet_aton and URL parsers read an IPv4 host: one
// to four parts, each decimal, octal (leading 0) or hex (0x), the last
// filling the remaining bytes.
func inetAton(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(host, ".")
	parts := strings.Split(host, ".")
	if host == "" || len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			p, base = p[2:], 16
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil || p == "" {
			return netip.Addr{}, false
		}
		bits := uint(8)
		if i == len(parts)-1 {
			bits = uint(8 * (5 - len(parts)))
		}
		if n >= 1<<bits {
			return netip.Addr{}, false
		}
		v = v<<bits | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// FuzzCheckURL: CheckURL never panics; a URL it accepts is an absolute http
// or https URL without credentials or fragment whose host, if it is an IP
// address (or would be read as one by inet_aton), is a public unicast
// address written in standard form, which the dialer's Control also allows;
// and allowing private targets never refuses a URL the strict policy takes.
func FuzzCheckURL(f *testing.F) {
	for _, tc := range specialCases {
		f.Add(literalURL(tc.addr))
	}
	for _, s := range []string{
		"https://example.com/hook", "http://8.8.8.8:8080/x?y=1", "http://[2606:4700:4700::1111]/", "http://localhost/",
		"http://2130706433/", "http://0x7f.1/", "http://127.1/", "http://0177.0.0.1/", "http://8.8.8.010/", "http://8.8.8.8./",
		"http://[fe80::1%25eth0]/", "http://%31%32%37.0.0.1/", "http://[::ffff:8.8.8.8]/", "http://a.b.c.d.e/", "http://x.0x/",
		"https://u@example.com/", "http://example.com/#f", "ftp://8.8.8.8/", "http://[64:ff9b::a9fe:a9fe]:80/", "http://1e1/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		strict := CheckURL(raw, false)
		if loose := CheckURL(raw, true); strict == nil && loose != nil {
			t.Fatalf("CheckURL(%q) accepts strictly but not allowing private: %v", raw, loose)
		}
		if strict != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Fragment != "" || u.Hostname() == "" {
			t.Fatalf("CheckURL accepted %q: %+v, %v", raw, u, err)
		}
		host := u.Hostname()
		if a, err := netip.ParseAddr(host); err == nil {
			if !publicUnicast(a) {
				t.Fatalf("CheckURL accepted %q: %v is not public unicast", raw, a)
			}
			if err := Control(false)("tcp", netip.AddrPortFrom(a, 443).String(), nil); err != nil {
				t.Fatalf("CheckURL accepted %q, Control refuses %v: %v", raw, a, err)
			}
		}
		if a, ok := inetAton(strings.ToLower(host)); ok {
			if b, err := netip.ParseAddr(host); err != nil || b != a || !publicUnicast(a) {
				t.Fatalf("CheckURL accepted %q: its host reads as %v (inet_aton)", raw, a)
			}
		}
	})
}
