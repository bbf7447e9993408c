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

// ErrForbiddenAddress is a target that is, or resolves to, an address that
// is not public unicast (see Forbidden). Its message never names the
// address: a name's resolved address is the internal network's, not the
// admin's, to know.
var ErrForbiddenAddress = errors.New("url host is, or resolves to, a loopback, private or special-purpose address")

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
// host, no credentials, no fragment; unless allowPrivate, a literal IP
// address must not be Forbidden, and the host must not be "localhost" or a
// number only parsers read as an address. Names are not resolved here (an
// answer now proves nothing about the next one): every address they resolve
// to is checked at each connection (Control).
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
	if addr, err := netip.ParseAddr(host); err == nil {
		if Forbidden(addr) {
			return ErrForbiddenAddress
		}
	} else if numericHost(h) {
		return errors.New("url host must be a DNS name or an IP address in standard form")
	}
	return nil
}

// numericHost reports whether a host that is not an IP address in standard
// form would still be taken for one: its last label is a number (decimal,
// octal or 0x hex), which URL parsers and inet_aton read as an IPv4 address
// ("2130706433", "0x7f.1", "127.1", "0177.0.0.1" are all 127.0.0.1). No DNS
// name ends in a number (RFC 3696 §2), so refusing them costs nothing.
func numericHost(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// Control is a net.Dialer Control function refusing forbidden addresses: it
// runs after DNS resolution, once per address dialed, just before connect,
// so a name resolving (or rebinding) to a private address cannot be used to
// reach it. Its error names no address.
func Control(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if allowPrivate {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil || Forbidden(ap.Addr()) {
			return ErrForbiddenAddress
		}
		return nil
	}
}

// Lookup resolves a host name, as net.Resolver.LookupNetIP does.
type Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)

// DialContext returns a dialer for http.Transport.DialContext that applies
// Control to every resolved address. lookup, if set, resolves names instead
// of the system resolver (tests: a name that resolves to any address); the
// addresses it returns are dialed one after another, each through Control.
// It is set only in Go code, never from configuration or the API.
func DialContext(allowPrivate bool, timeout time.Duration, lookup Lookup) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, Control: Control(allowPrivate)}
	if lookup == nil {
		return d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return d.DialContext(ctx, network, addr)
		}
		ips, err := lookup(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		errs := []error{fmt.Errorf("no address for %s", host)}
		for _, ip := range ips {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs[min(1, len(errs)-1):]...)
	}
}
