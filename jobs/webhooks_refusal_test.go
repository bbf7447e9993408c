package jobs_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"inventory/domain"
	"inventory/testkit"
	"inventory/webhooks"
)

// DNS rebinding at delivery: endpoints saved under the default policy with
// names that resolve publicly when saved resolve, at delivery, to internal
// and special-purpose addresses (the real River client's deliveries resolve
// through cfg.WebhookLookup). Each delivery is refused before connect: the
// receiver (listening on one of those addresses, loopback) gets nothing, no
// cursor moves, and the delivery log records a refusal that names no address.
func TestWebhookDeliveryRefusesRebindingWithoutNamingAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"A"}, "L1")
	rcv := testkit.NewWebhookReceiver(t)
	u, err := url.Parse(rcv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resolved := map[string]netip.Addr{}
	for i, a := range []string{"127.0.0.1", "::1", "169.254.169.254", "10.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:1",
		"2002:a9fe:a9fe::1", "198.18.0.1", "192.0.0.192", "240.0.0.1", "100.64.0.1", "fd00::1"} {
		host := fmt.Sprintf("h%d.receiver.example", i)
		resolved[host] = netip.MustParseAddr(a)
		if _, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: "http://" + host + ":" + u.Port() + u.Path,
			Topics: []domain.WebhookTopic{domain.TopicStockChanged}}); err != nil {
			t.Fatalf("save %s: %v", host, err)
		}
	}
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "A", Location: "L1", Quantity: 1, Reference: "r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil {
		t.Fatal(err)
	}
	cfg := b.config()
	cfg.Webhooks, cfg.WebhookPauseAfter = b.Store, 2
	cfg.WebhookBackoff = func(int) time.Duration { return 20 * time.Millisecond }
	cfg.WebhookLookup = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		if a, ok := resolved[host]; ok {
			return []netip.Addr{a}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	b.startClient(t, cfg)

	// Every endpoint pauses after its two refused attempts.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var paused int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM webhook_endpoints WHERE paused_at IS NOT NULL`).Scan(&paused); err != nil {
			t.Fatal(err)
		}
		if paused == len(resolved) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d endpoints paused after 20s", paused, len(resolved))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var attempts, refusals, moved int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*), count(*) FILTER (WHERE error = $1 AND status_code IS NULL),
		(SELECT count(*) FROM webhook_endpoints WHERE cursor_seq > 0 OR pause_reason IS DISTINCT FROM '2 consecutive failed deliveries; last: ' || $1)
		FROM webhook_deliveries`, webhooks.ErrForbiddenAddress.Error()).Scan(&attempts, &refusals, &moved); err != nil {
		t.Fatal(err)
	}
	if attempts != 2*len(resolved) || refusals != attempts || moved != 0 {
		t.Fatalf("%d attempts, %d recorded as the refusal, %d endpoints moved or paused otherwise; want %d, %d, 0",
			attempts, refusals, moved, 2*len(resolved), 2*len(resolved))
	}
	rows, err := b.Pool.Query(b.Ctx, `SELECT error FROM webhook_deliveries UNION ALL SELECT pause_reason FROM webhook_endpoints`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			t.Fatal(err)
		}
		for _, a := range resolved {
			if strings.Contains(msg, a.String()) || strings.Contains(msg, u.Port()) {
				t.Fatalf("logged %q names %s", msg, a)
			}
		}
	}
	if n := len(rcv.Requests()); n != 0 {
		t.Fatalf("receiver got %d requests", n)
	}
}
