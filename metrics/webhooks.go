package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WebhookLagger reads how far webhook delivery is behind and how many
// endpoints are paused. store.Store is one.
type WebhookLagger interface {
	WebhookLag(ctx context.Context) (lag int64, paused int, err error)
}

// webhookCollector counts delivery attempts by outcome and reads the
// delivery lag and paused endpoints at each scrape (one statement, bounded by
// a timeout); if the read fails the scrape omits both.
type webhookCollector struct {
	src        WebhookLagger
	deliveries *prometheus.CounterVec
	lag        *prometheus.Desc
	paused     *prometheus.Desc
}

// WatchWebhooks exports webhook delivery outcomes and lag. It returns the
// hook for jobs.Config.OnWebhookAttempt.
func (m *Metrics) WatchWebhooks(src WebhookLagger) func(ok bool, latency time.Duration) {
	c := &webhookCollector{src: src,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome: delivered (2xx) or failed.",
		}, []string{"outcome"}),
		lag: prometheus.NewDesc("inventory_webhook_lag_events",
			"Newest published stock event seq minus the smallest cursor among webhook endpoints that are not paused; 0 without endpoints.", nil, nil),
		paused: prometheus.NewDesc("inventory_webhook_endpoints_paused",
			"Webhook endpoints that are paused, by an admin or after repeated failed deliveries: their receivers get nothing until resumed.", nil, nil),
	}
	// Both outcomes show from the start, at 0.
	c.deliveries.WithLabelValues("delivered")
	c.deliveries.WithLabelValues("failed")
	m.registry.MustRegister(c)
	return func(ok bool, _ time.Duration) {
		if ok {
			c.deliveries.WithLabelValues("delivered").Inc()
		} else {
			c.deliveries.WithLabelValues("failed").Inc()
		}
	}
}

func (c *webhookCollector) Describe(ch chan<- *prometheus.Desc) {
	c.deliveries.Describe(ch)
	ch <- c.lag
	ch <- c.paused
}

func (c *webhookCollector) Collect(ch chan<- prometheus.Metric) {
	c.deliveries.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	lag, paused, err := c.src.WebhookLag(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag))
	ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, float64(paused))
}
