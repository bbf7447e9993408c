package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// MaxURLLength bounds a target URL.
const MaxURLLength = 2048

// ErrForbiddenAddress is a target that is, or resolves to, a loopback,
// private, link-local, unspecified, multicast or shared (CGNAT) address.
var ErrForbiddenAddress = errors.New("webhooks: address not allowed")

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Forbidden reports whether deliveries must not reach addr unless private
// targets are allowed in configuration.
func Forbidden(addr netip.Addr) bool {
	addr = addr.Unmap()
	return !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsUnspecified() ||
		addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() ||
		addr.IsMulticast() || cgnat.Contains(addr)
}

// notURLChar is a character RFC 3986 does not allow in a URL as written
// (space, quotes, <, >, \, ^, `, {, |, }, controls, non-ASCII): a URL an
// admin pastes with one of them is a mistake, and shown back on the admin
// page it must not look like markup.
func notURLChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("-._~:/?#[]@!$&'()*+,;=%", r)
}

// CheckURL validates a target URL at registration: absolute http or https, a
// host, no credentials, no fragment; a literal IP address (or "localhost")
// must not be forbidden unless allowPrivate. Names are checked again after
// resolution at delivery (see Dialer).
func CheckURL(raw string, allowPrivate bool) error {
	if raw == "" || len(raw) > MaxURLLength {
		return fmt.Errorf("url must be 1 to %d characters", MaxURLLength)
	}
	if i := strings.IndexFunc(raw, notURLChar); i >= 0 {
		return fmt.Errorf("url must be written with URL characters only (percent-encode the rest): %q at byte %d", raw[i:i+1], i)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("url does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("url scheme must be http or https")
	}
	if u.User != nil {
		return errors.New("url must not carry credentials")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("url must not have a fragment")
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("url must have a host")
	}
	if allowPrivate {
		return nil
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return errors.New("url host is loopback")
	}
	if addr, err := netip.ParseAddr(host); err == nil && Forbidden(addr) {
		return errors.New("url host is a loopback, private or reserved address")
	}
	return nil
}

// Control is a net.Dialer Control function refusing forbidden addresses: it
// runs after DNS resolution, once per address dialed, so a name resolving to
// a private address cannot be used to reach it.
func Control(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if allowPrivate {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
		}
		if Forbidden(ap.Addr()) {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, ap.Addr())
		}
		return nil
	}
}

// DialContext returns a dialer for http.Transport.DialContext that applies
// Control to every resolved address.
func DialContext(allowPrivate bool, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, Control: Control(allowPrivate)}
	return d.DialContext
}
