package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// NewClient returns the HTTP client a delivery is sent with: no proxy (the
// dialer must see the address actually reached), no redirects (a redirect
// could lead anywhere), and every address checked when it is dialed
// (DialContext), so DNS cannot point a delivery at a private network.
// lookup is nil but in tests (see DialContext).
func NewClient(allowPrivate bool, timeout time.Duration, lookup Lookup) *http.Client {
	return &http.Client{
		Transport: &http.Transport{Proxy: nil, DialContext: DialContext(allowPrivate, timeout, lookup),
			MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Post sends one message to url, signed with every secret (SignatureHeader),
// within timeout. It returns the status the endpoint answered (0 when none
// came) and an error unless it was 2xx. The URL is checked again first
// (CheckURL): it may have been stored under other rules.
func Post(ctx context.Context, client *http.Client, url string, allowPrivate bool, timeout time.Duration,
	msgID string, body []byte, secrets ...string) (int, error) {
	if err := CheckURL(url, allowPrivate); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "inventory-webhooks")
	req.Header.Set(HeaderID, msgID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, SignatureHeader(msgID, ts, body, secrets...))
	// The delivery's trace context (none when tracing is off), outside the
	// signature: a receiver that traces continues our trace.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := client.Do(req)
	if err != nil {
		return 0, withoutAddresses(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("answered HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// withoutAddresses is a failed post's error as the delivery log records it
// and the admin reads it: it names no IP address. A refusal by Control says
// only that the host is or resolves to a forbidden address (the resolved
// address belongs to the network this server runs in); a network error keeps
// its cause ("connect: connection refused", "i/o timeout") without the
// addresses net.OpError adds (the peer's and this server's own), and a DNS
// error without the resolver's address.
func withoutAddresses(err error) error {
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		return ErrForbiddenAddress
	case errors.As(err, &dns):
		return fmt.Errorf("cannot resolve the url host: %s", dns.Err)
	case errors.As(err, &op):
		return fmt.Errorf("%s: %w", op.Op, op.Err)
	}
	return err
}
