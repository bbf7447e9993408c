package jobs_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/domain"
	"inventory/jobs"
	"inventory/metrics"
)

// The real River client's hourly retention job (run on start) deletes
// code-reveal audit rows older than CodeRevealRetention and webhook delivery
// rows older than WebhookDeliveryRetention, in batches of at most
// RetentionBatch rows, and keeps every younger row, however close to the
// line; inventory_rows_pruned_total counts the deletions per table.
func TestRetentionPrunesOldRowsKeepsYoung(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"A"}, "L1")
	b.Stock(t, "A", "L1", 5)
	res := b.reserve(t, "k1", "A", "L1", 1, 600)
	if _, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: "ORD-1"}); err != nil {
		t.Fatal(err)
	}
	hook, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: "https://hooks.example.org/h", Topics: []domain.WebhookTopic{domain.TopicStockChanged}})
	if err != nil {
		t.Fatal(err)
	}
	const oldReveals, oldDeliveries, young = 2500, 3500, 20
	// Rows written in the past: old ones a day past retention, young ones
	// from a day inside it to a minute ago.
	for _, q := range []string{
		`INSERT INTO code_reveals (order_line_id, actor, codes, at)
		 SELECT (SELECT min(id) FROM order_lines), 'admin:test', 1, now() - interval '401 days' - g * interval '1 second' FROM generate_series(1, 2500) g`,
		`INSERT INTO code_reveals (order_line_id, actor, codes, at)
		 SELECT (SELECT min(id) FROM order_lines), 'admin:test', 1, now() - interval '399 days' + g * interval '1 hour' FROM generate_series(1, 10) g
		 UNION ALL SELECT (SELECT min(id) FROM order_lines), 'admin:test', 1, now() - g * interval '1 minute' FROM generate_series(1, 10) g`,
		`INSERT INTO webhook_deliveries (endpoint_id, webhook_id, topic, attempt, latency_ms, at)
		 SELECT '` + hook.Webhook.ID + `'::uuid, 'evt_' || g, 'stock.changed', 1, 5, now() - interval '31 days' - g * interval '1 second' FROM generate_series(1, 3500) g`,
		`INSERT INTO webhook_deliveries (endpoint_id, webhook_id, topic, attempt, latency_ms, at)
		 SELECT '` + hook.Webhook.ID + `'::uuid, 'young_' || g, 'stock.changed', 1, 5, now() - interval '29 days' + g * interval '1 hour' FROM generate_series(1, 10) g
		 UNION ALL SELECT '` + hook.Webhook.ID + `'::uuid, 'new_' || g, 'stock.changed', 1, 5, now() - g * interval '1 minute' FROM generate_series(1, 10) g`,
	} {
		if _, err := b.Pool.Exec(b.Ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	m := metrics.New(nil)
	count := m.WatchRetention(jobs.TableCodeReveals, jobs.TableWebhookDeliveries)
	var mu sync.Mutex
	sums, biggest := map[string]int{}, 0
	cfg := b.config()
	cfg.RetentionPruner = b.Store
	cfg.CodeRevealRetention, cfg.WebhookDeliveryRetention = 400*24*time.Hour, 30*24*time.Hour
	cfg.OnPruned = func(table string, n int) {
		mu.Lock()
		sums[table] += n
		biggest = max(biggest, n)
		mu.Unlock()
		count(table, n)
	}
	b.startClient(t, cfg)

	counts := func() (reveals, deliveries, oldLeft int) {
		t.Helper()
		if err := b.Pool.QueryRow(b.Ctx, `SELECT (SELECT count(*) FROM code_reveals), (SELECT count(*) FROM webhook_deliveries),
			(SELECT count(*) FROM code_reveals WHERE at < now() - interval '400 days')
			+ (SELECT count(*) FROM webhook_deliveries WHERE at < now() - interval '30 days')`).Scan(&reveals, &deliveries, &oldLeft); err != nil {
			t.Fatal(err)
		}
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, d, old := counts()
		if old == 0 {
			if r != young || d != young {
				t.Fatalf("%d reveals and %d deliveries left, want the %d young of each", r, d, young)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d reveals, %d deliveries, %d of them past retention", r, d, old)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The last batch is counted after its DELETE commits.
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if sums[jobs.TableCodeReveals] != oldReveals || sums[jobs.TableWebhookDeliveries] != oldDeliveries || biggest != jobs.RetentionBatch {
		t.Fatalf("pruned %v, biggest batch %d; want %d and %d, batches of at most %d",
			sums, biggest, oldReveals, oldDeliveries, jobs.RetentionBatch)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`inventory_rows_pruned_total{table="code_reveals"} 2500`, `inventory_rows_pruned_total{table="webhook_deliveries"} 3500`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	b.requireNoJobErrors(t)
}
