package api

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5/middleware"

	"inventory/domain"
)

// fuzzTrusted are the proxies FuzzClientIP trusts: IPv4 and IPv6 ranges,
// so v4-mapped and zoned spellings of a proxy are tried against both.
var fuzzTrusted = []string{"10.0.0.0/8", "127.0.0.1/32", "2001:db8::/32", "fe80::/10"}

// FuzzClientIP checks the client address every rate limit and the
// failed-authentication guard key on (clientIP, ipKey), from any peer
// address and any X-Forwarded-For headers:
//
//   - without trusted proxies the TCP peer is the client and the header is
//     ignored;
//   - with them, an untrusted peer is the client whatever it claims; behind
//     a trusted peer the client is the rightmost entry that is not a trusted
//     proxy, and an entry that is not an address there (or no entry) yields
//     no address rather than one the client chose further left;
//   - the result is never a trusted proxy (from behind one), and is a
//     plain address (no zone, no v4-mapped form) when it came from the header;
//   - two IPv6 clients in one /64 share a budget key.
func FuzzClientIP(f *testing.F) {
	for _, seed := range []struct {
		trusted          bool
		peer, xff1, xff2 string
	}{
		{false, "203.0.113.7:5555", "", ""},
		{false, "203.0.113.7:5555", "198.51.100.1", ""},
		{true, "203.0.113.7:5555", "198.51.100.1", ""},
		{true, "10.1.2.3:443", "198.51.100.1", ""},
		{true, "10.1.2.3:443", "192.0.2.50, 198.51.100.1", ""},
		{true, "10.1.2.3:443", "198.51.100.1, 10.9.9.9", ""},
		{true, "10.1.2.3:443", "198.51.100.1", "10.0.0.1, 10.0.0.2"},
		{true, "10.1.2.3:443", "garbage, 198.51.100.1", ""},
		{true, "10.1.2.3:443", "198.51.100.1, garbage", ""},
		{true, "10.1.2.3:443", "::ffff:10.0.0.1", ""},
		{true, "10.1.2.3:443", "fe80::1%eth0", ""},
		{true, "10.1.2.3:443", "[2001:db9::1]:80", ""},
		{true, "[::ffff:10.1.2.3]:443", "2001:db9:1:2::99", ""},
		{true, "[fe80::1%lo]:443", "198.51.100.1", ""},
		{true, "127.0.0.1:1", ",,, ,", ""},
		{true, "not an address", "198.51.100.1", ""},
		{true, "10.1.2.3:443", "", ""},
	} {
		f.Add(seed.trusted, seed.peer, seed.xff1, seed.xff2)
	}
	prefixes := make([]netip.Prefix, len(fuzzTrusted))
	for i, p := range fuzzTrusted {
		prefixes[i] = netip.MustParsePrefix(p)
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range prefixes {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, trusted bool, peer, xff1, xff2 string) {
		var proxies []string
		if trusted {
			proxies = fuzzTrusted
		}
		r := httptest.NewRequest(http.MethodGet, "/graphql", nil)
		r.RemoteAddr = peer
		for _, v := range []string{xff1, xff2} {
			if v != "" {
				r.Header.Add("X-Forwarded-For", v)
			}
		}
		var got, key string
		clientIP(proxies)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			got = middleware.GetClientIP(r.Context())
			key = callerKey(r.Context(), domain.Anonymous)
		})).ServeHTTP(httptest.NewRecorder(), r)

		want := referenceClientIP(trusted, peer, r.Header.Values("X-Forwarded-For"), isTrusted)
		if got != want {
			t.Fatalf("trusted=%v peer %q XFF %q: client %q, want %q", trusted, peer, r.Header.Values("X-Forwarded-For"), got, want)
		}
		if !strings.HasPrefix(key, "ip:") {
			t.Fatalf("budget key %q", key)
		}
		if got == "" {
			return
		}
		addr, err := netip.ParseAddr(got)
		if err != nil {
			t.Fatalf("client %q is not an address", got)
		}
		peerAddr, peerOK := parsePeer(peer)
		fromHeader := trusted && peerOK && isTrusted(peerAddr.WithZone(""))
		if fromHeader && (isTrusted(addr) || addr.Zone() != "" || addr.Is4In6()) {
			t.Fatalf("client %q from behind a trusted proxy is a proxy, zoned or v4-mapped", got)
		}
		if addr.Is6() && !addr.Is4In6() && addr.Zone() == "" {
			// Another address in the same /64 spends the same budget.
			b := addr.As16()
			b[15] ^= 0xff
			b[8] ^= 0x01
			twin := netip.AddrFrom16(b)
			r2 := httptest.NewRequest(http.MethodGet, "/graphql", nil)
			r2.RemoteAddr = net.JoinHostPort(twin.String(), "1")
			var key2 string
			clientIP(nil)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				key2 = callerKey(r.Context(), domain.Anonymous)
			})).ServeHTTP(httptest.NewRecorder(), r2)
			if key2 != key {
				t.Fatalf("%s and %s (one /64) have budget keys %q and %q", addr, twin, key, key2)
			}
		}
	})
}

// parsePeer parses a RemoteAddr ("host:port" or a bare address) as the
// server sees its TCP peer: v4-mapped folded to IPv4, a zone kept.
func parsePeer(remote string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// referenceClientIP is the rule FuzzClientIP holds clientIP to, written
// out plainly.
func referenceClientIP(trusted bool, peer string, xff []string, isTrusted func(netip.Addr) bool) string {
	p, ok := parsePeer(peer)
	if !trusted || !ok || !isTrusted(p.WithZone("")) {
		if !ok {
			return ""
		}
		return p.String()
	}
	var entries []string
	for _, h := range xff {
		for _, e := range strings.Split(h, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(entries[i])
		if err != nil {
			return "" // fail closed: nothing further left is believed
		}
		if a = a.Unmap().WithZone(""); !isTrusted(a) {
			return a.String()
		}
	}
	return ""
}
