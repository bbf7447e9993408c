package webhooks

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// specialCases is one address inside every entry of the IANA IPv4 and IPv6
// special-purpose address registries (and multicast, site-local and the
// IPv4-compatible form), each of which a delivery must never reach, and
// public unicast neighbours just outside them, which it may.
var specialCases = []struct {
	addr      string
	forbidden bool
}{
	// IPv4 special-purpose registry.
	{"0.0.0.0", true}, {"0.1.2.3", true}, {"0.255.255.255", true},
	{"10.0.0.1", true}, {"10.255.255.255", true},
	{"100.64.0.1", true}, {"100.127.255.254", true},
	{"127.0.0.1", true}, {"127.255.255.254", true},
	{"169.254.169.254", true}, {"169.254.0.1", true},
	{"172.16.0.1", true}, {"172.31.255.255", true},
	{"192.0.0.1", true}, {"192.0.0.8", true}, {"192.0.0.9", true}, {"192.0.0.10", true},
	{"192.0.0.170", true}, {"192.0.0.171", true}, {"192.0.0.192", true}, {"192.0.0.255", true},
	{"192.0.2.1", true},
	{"192.31.196.1", true},
	{"192.52.193.1", true},
	{"192.88.99.1", true}, {"192.88.99.2", true},
	{"192.168.0.1", true}, {"192.168.255.255", true},
	{"192.175.48.1", true},
	{"198.18.0.1", true}, {"198.19.255.255", true},
	{"198.51.100.1", true},
	{"203.0.113.1", true},
	{"240.0.0.1", true}, {"255.255.255.254", true}, {"255.255.255.255", true},
	// IPv4 multicast.
	{"224.0.0.1", true}, {"239.255.255.255", true},
	// IPv4 public neighbours.
	{"1.0.0.1", false}, {"8.8.8.8", false}, {"9.255.255.255", false}, {"11.0.0.1", false},
	{"100.63.255.255", false}, {"100.128.0.1", false}, {"126.255.255.255", false}, {"128.0.0.1", false},
	{"169.253.255.255", false}, {"169.255.0.1", false}, {"172.15.255.255", false}, {"172.32.0.1", false},
	{"191.255.255.255", false}, {"192.0.1.1", false}, {"192.0.3.1", false}, {"192.88.98.1", false},
	{"192.167.255.255", false}, {"192.169.0.1", false}, {"198.17.255.255", false}, {"198.20.0.1", false},
	{"198.51.99.1", false}, {"203.0.112.1", false}, {"203.0.114.1", false}, {"223.255.255.255", false},
	// IPv6 special-purpose registry.
	{"::1", true}, {"::", true},
	{"::ffff:127.0.0.1", true}, {"::ffff:8.8.8.8", true}, {"::ffff:169.254.169.254", true},
	{"64:ff9b::a9fe:a9fe", true}, {"64:ff9b::808:808", true},
	{"64:ff9b:1::a00:1", true}, {"64:ff9b:1:ffff::1", true},
	{"100::1", true}, {"100::ffff:ffff:ffff:ffff", true}, {"100:0:0:1::1", true},
	{"2001::1", true}, {"2001:0:a9fe:a9fe::1", true}, {"2001:1::1", true}, {"2001:1::2", true}, {"2001:1::3", true},
	{"2001:2::1", true}, {"2001:3::1", true}, {"2001:4:112::1", true},
	{"2001:10::1", true}, {"2001:20::1", true}, {"2001:2f:ffff::1", true}, {"2001:30::1", true},
	{"2001:1ff:ffff::1", true},
	{"2001:db8::1", true}, {"2001:db8:ffff::1", true},
	{"2002::1", true}, {"2002:a9fe:a9fe::1", true}, {"2002:7f00:1::1", true}, {"2002:ffff::1", true},
	{"2620:4f:8000::1", true},
	{"3fff::1", true}, {"3fff:fff::1", true},
	{"5f00::1", true},
	{"fc00::1", true}, {"fd12:3456::1", true},
	{"fe80::1", true}, {"febf::1", true},
	// Deprecated IPv4-compatible (::/96) and site-local forms, multicast,
	// and space IANA has not allocated for global unicast.
	{"::127.0.0.1", true}, {"::8.8.8.8", true}, {"::a9fe:a9fe", true},
	{"fec0::1", true}, {"ff02::1", true}, {"ff0e::1", true},
	{"1::1", true}, {"4000::1", true}, {"e000::1", true},
	// IPv6 public neighbours.
	{"2001:4860:4860::8888", false}, {"2606:4700:4700::1111", false}, {"2001:200::1", false},
	{"2001:db7:ffff::1", false}, {"2001:db9::1", false}, {"2003::1", false},
	{"2620:4f:7fff::1", false}, {"2620:4f:8001::1", false}, {"3ffe:ffff::1", false}, {"2a00:1450::1", false},
}

// Every special-purpose entry is forbidden, its public neighbours are not;
// a zone makes any address forbidden (a zoned address names an interface).
func TestForbiddenSpecialPurpose(t *testing.T) {
	t.Parallel()
	for _, tc := range specialCases {
		if got := Forbidden(netip.MustParseAddr(tc.addr)); got != tc.forbidden {
			t.Errorf("Forbidden(%s) = %v, want %v", tc.addr, got, tc.forbidden)
		}
	}
	for _, a := range []string{"fe80::1%eth0", "2001:4860:4860::8888%eth0"} {
		if !Forbidden(netip.MustParseAddr(a)) {
			t.Errorf("Forbidden(%s) = false", a)
		}
	}
	if !Forbidden(netip.Addr{}) {
		t.Error("Forbidden(invalid) = false")
	}
}

// literalURL is a URL whose host is addr written as a literal.
func literalURL(addr string) string {
	a := netip.MustParseAddr(addr)
	if a.Is6() {
		return "http://[" + addr + "]/hook"
	}
	return "http://" + addr + "/hook"
}

// At save time every special-purpose literal is refused with the same
// message, and every public neighbour accepted; so are the attacks of issue
// 17 and hosts that only parsers read as IPv4 (inet_aton forms).
func TestCheckURLSpecialPurpose(t *testing.T) {
	t.Parallel()
	for _, tc := range specialCases {
		err := CheckURL(literalURL(tc.addr), false)
		if tc.forbidden && !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("CheckURL(%s) = %v, want ErrForbiddenAddress", literalURL(tc.addr), err)
		}
		if !tc.forbidden && err != nil {
			t.Errorf("CheckURL(%s) = %v, want ok", literalURL(tc.addr), err)
		}
	}
	for _, u := range []string{
		"http://[64:ff9b::a9fe:a9fe]/", "http://[64:ff9b:1::a00:1]/", "http://[2002:a9fe:a9fe::1]/",
		"http://198.18.0.1/", "http://192.0.0.192/", "http://240.0.0.1/", "http://255.255.255.255/",
		"http://[fe80::1%25eth0]/", "http://[::ffff:a9fe:a9fe]/", "http://[::a9fe:a9fe]/",
		"http://2130706433/", "http://0x7f000001/", "http://0x7f.1/", "http://127.1/", "http://0177.0.0.1/",
		"http://0/", "http://1.2.3.4./", "http://169.254.169.254.:80/", "http://example.0x10/", "http://a.123/",
	} {
		if err := CheckURL(u, false); err == nil {
			t.Errorf("CheckURL(%s) accepted", u)
		} else if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "169.254") {
			t.Errorf("CheckURL(%s) = %v: names an address", u, err)
		}
	}
	for _, u := range []string{"http://example.com/", "http://a1.example/", "http://123.example/", "http://x.0a/", "http://cafe.example/"} {
		if err := CheckURL(u, false); err != nil {
			t.Errorf("CheckURL(%s) = %v, want ok", u, err)
		}
	}
}

// lookupTo resolves every name to addrs.
func lookupTo(addrs ...netip.Addr) Lookup {
	return func(context.Context, string, string) ([]netip.Addr, error) { return addrs, nil }
}

// At connection time a name that resolves (or rebinds) to any special-purpose
// address is refused before connect, and the error the delivery log records
// names neither that address nor any other. The same name resolving to a
// loopback receiver is delivered to when private targets are allowed, so the
// refusal is the check's doing, not the lookup's.
func TestPostRefusesResolvedSpecialPurpose(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	target := "http://receiver.example:" + strconv.Itoa(port) + "/hook"
	loop := netip.MustParseAddr("127.0.0.1")

	post := func(allow bool, lookup Lookup) (int, error) {
		c := NewClient(allow, time.Second, lookup)
		defer c.CloseIdleConnections()
		return Post(context.Background(), c, target, allow, time.Second, "msg_1", []byte(`{}`), NewSecret())
	}
	if status, err := post(true, lookupTo(loop)); err != nil || status != http.StatusOK || hits.Load() != 1 {
		t.Fatalf("allowed loopback: status %d, %v, %d hits", status, err, hits.Load())
	}
	for _, tc := range specialCases {
		a := netip.MustParseAddr(tc.addr)
		if !tc.forbidden || !Forbidden(a.Unmap()) {
			continue // a resolved ::ffff:8.8.8.8 is dialed as 8.8.8.8: public
		}
		_, err := post(false, lookupTo(a))
		if !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("%s: err = %v, want ErrForbiddenAddress", tc.addr, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, tc.addr) || strings.Contains(msg, a.Unmap().String()) ||
			strings.Contains(msg, strconv.Itoa(port)) || strings.ContainsAny(msg, "[]") {
			t.Errorf("%s: refusal %q names the address", tc.addr, msg)
		}
	}
	// A name with a public and a forbidden address: the forbidden one is
	// never dialed (the receiver listens on loopback, so reaching it would
	// count a hit).
	if _, err := post(false, lookupTo(netip.MustParseAddr("192.0.2.1"), loop)); !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("two forbidden addresses: %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("receiver hit %d times, want 1 (only the allowed post)", hits.Load())
	}
}

// Errors that are not refusals name no address either: not the peer's, not
// this server's own (net.OpError's Source) and not the DNS server's.
func TestPostErrorsNameNoAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing listens there now: connection refused
	dnsFail := func(context.Context, string, string) ([]netip.Addr, error) {
		return nil, &net.DNSError{Err: "no such host", Name: "receiver.example", Server: "10.9.8.7:53", IsNotFound: true}
	}
	for _, tc := range []struct {
		lookup Lookup
		want   string
	}{
		{lookupTo(netip.MustParseAddr("127.0.0.1")), "connection refused"},
		{dnsFail, "no such host"},
	} {
		c := NewClient(true, time.Second, tc.lookup)
		_, err := Post(context.Background(), c, "http://receiver.example:"+port+"/", true, time.Second, "m", nil, NewSecret())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("err = %v, want %q", err, tc.want)
		}
		if msg := err.Error(); strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "10.9.8.7") {
			t.Errorf("error %q names an address", msg)
		}
	}
}
