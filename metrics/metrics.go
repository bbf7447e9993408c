// Package metrics exposes the server's Prometheus metrics at /metrics: what
// on-call needs first during a sale — reservation outcomes, transitions, holds
// the sweeper had to rescue, live subscribers and the ones cut off, events
// published, and request latency. No metric carries a code, token or customer
// identifier.
package metrics

import (
	"context"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"inventory/domain"
)

// Metrics holds the collectors, registered on a registry of their own.
type Metrics struct {
	registry          *prometheus.Registry
	operations        *prometheus.CounterVec
	sweptHolds        prometheus.Counter
	reconcileIssues   prometheus.Gauge
	httpLatency       *prometheus.HistogramVec
	availabilityApply prometheus.Histogram
	notReady          *prometheus.CounterVec
	shipAge           prometheus.Histogram
}

// Live is what the event broker reports. events.Broker is one.
type Live interface {
	Subscribers() int
	Stalled() int64
	Published() int64
	RelayAttempts() int64
}

// New registers every collector; live may be nil (a CLI command).
func New(live Live) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_operations_total",
			Help: "Reservation operations by outcome: ok, replayed, or the userErrors code (e.g. out_of_stock), or error.",
		}, []string{"operation", "outcome"}),
		sweptHolds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inventory_sweeper_released_total",
			Help: "Overdue holds released by the sweeper instead of their expiry job; should stay 0.",
		}),
		reconcileIssues: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inventory_reconciliation_issues",
			Help: "Invariants that did not hold at this instance's last reconciliation pass (the leader runs them); should stay 0.",
		}),
		availabilityApply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "inventory_availability_apply_lag_seconds",
			Help:    "Time from a stock event's transaction to its being applied to the in-memory availability copy.",
			Buckets: []float64{.005, .01, .025, .05, .075, .1, .15, .25, .5, 1, 2.5},
		}),
		notReady: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_readiness_failures_total",
			Help: "/readyz answers of 503 by reason: database (unreachable, or its schema version unreadable), migrations (behind this binary), events (live events unavailable or stalled). The details are in the log.",
		}, []string{"reason"}),
		shipAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "inventory_order_ship_age_seconds",
			Help: "At each fulfillOrder (replays apart), how long ago its order was confirmed: commit-to-ship age; a growing tail means the warehouse is behind.",
			// A minute to a week.
			Buckets: []float64{60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 2 * 86400, 4 * 86400, 7 * 86400},
		}),
		httpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "inventory_http_request_duration_seconds",
			Help:    "HTTP request latency by status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"code", "method"}),
	}
	for _, reason := range []string{"database", "migrations", "events"} {
		m.notReady.WithLabelValues(reason) // every series from the start, at 0
	}
	m.registry.MustRegister(m.operations, m.sweptHolds, m.reconcileIssues, m.httpLatency, m.notReady, m.shipAge,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if live != nil {
		m.registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "inventory_subscribers", Help: "Live subscriptions on this instance."},
				func() float64 { return float64(live.Subscribers()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_subscribers_stalled_total", Help: "Subscriptions cut off for not reading."},
				func() float64 { return float64(live.Stalled()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_stock_events_published_total", Help: "Stock events this instance's relay published."},
				func() float64 { return float64(live.Published()) }),
			// With several instances one relays and the others stand by:
			// this grows about 40 a second on one instance and slowly on
			// the rest (every instance's growing fast means none stands by).
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_stock_events_relay_transactions_total", Help: "Relay transactions this instance ran, whether or not they published."},
				func() float64 { return float64(live.RelayAttempts()) }),
		)
	}
	return m
}

// Batching is what reserve and confirm coalescing report. store.Store is one.
type Batching interface {
	ReservationBatchStats() (batches, requests, failed int64)
	ConfirmBatchStats() (batches, requests, failed int64)
}

// WatchBatching exports reserve and confirm coalescing: batches, the
// requests they took (their ratio is the mean batch size) and batches that
// failed as a whole, which should stay 0 (their requests were served one by
// one instead).
func (m *Metrics) WatchBatching(b Batching) {
	for _, kind := range []struct {
		name, what string
		stats      func() (batches, requests, failed int64)
	}{
		{"reserve", "concurrent single-line reserves decided in one transaction", b.ReservationBatchStats},
		{"confirm", "concurrent confirms done in one transaction", b.ConfirmBatchStats},
	} {
		stat := func(pick func(batches, requests, failed int64) int64) func() float64 {
			return func() float64 { return float64(pick(kind.stats())) }
		}
		title := strings.ToUpper(kind.name[:1]) + kind.name[1:]
		m.registry.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_" + kind.name + "_batches_total", Help: title + " batches run: " + kind.what + "."},
				stat(func(n, _, _ int64) int64 { return n })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_" + kind.name + "_batch_requests_total", Help: title + " requests taken into batches."},
				stat(func(_, n, _ int64) int64 { return n })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_" + kind.name + "_batch_failures_total", Help: title + " batches that failed as a whole (their requests ran one by one); should stay 0."},
				stat(func(_, _, n int64) int64 { return n })),
		)
	}
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Instrument records the latency of next's requests.
func (m *Metrics) Instrument(next http.Handler) http.Handler {
	return promhttp.InstrumentHandlerDuration(m.httpLatency, next)
}

// Reconciled records how many issues a reconciliation pass found.
func (m *Metrics) Reconciled(issues int) { m.reconcileIssues.Set(float64(issues)) }

// NotReady counts a /readyz answer of 503 for reason (database, migrations
// or events): how often and why an instance was out of its load balancer,
// beside the log line that says what was behind it.
func (m *Metrics) NotReady(reason string) { m.notReady.WithLabelValues(reason).Inc() }

// SweptHolds counts holds the sweeper released.
func (m *Metrics) SweptHolds(n int) { m.sweptHolds.Add(float64(n)) }

// Reservations counts the outcome of every reservation operation. It wraps
// the real service; reads pass through uncounted.
type Reservations struct {
	domain.Reservations
	Metrics *Metrics
}

func (r Reservations) count(op string, err error) {
	outcome := "ok"
	if e, ok := domain.AsError(err); ok {
		outcome = strings.ToLower(string(e.Code))
	} else if err != nil {
		outcome = "error"
	}
	r.Metrics.operations.WithLabelValues(op, outcome).Inc()
}

// ReservationCreate counts reserve outcomes, replays apart.
func (r Reservations) ReservationCreate(ctx context.Context, in domain.ReserveInput) (domain.Reservation, bool, error) {
	res, replayed, err := r.Reservations.ReservationCreate(ctx, in)
	if replayed {
		r.Metrics.operations.WithLabelValues("reserve", "replayed").Inc()
	} else {
		r.count("reserve", err)
	}
	return res, replayed, err
}

// ReservationConfirm counts confirm outcomes.
func (r Reservations) ReservationConfirm(ctx context.Context, scope domain.Scope, in domain.ConfirmInput) (domain.Reservation, error) {
	res, err := r.Reservations.ReservationConfirm(ctx, scope, in)
	r.count("confirm", err)
	return res, err
}

// ReservationRelease counts release outcomes.
func (r Reservations) ReservationRelease(ctx context.Context, scope domain.Scope, in domain.ReleaseInput) (domain.Reservation, error) {
	res, err := r.Reservations.ReservationRelease(ctx, scope, in)
	r.count("release", err)
	return res, err
}

// ReservationExtend counts extend outcomes.
func (r Reservations) ReservationExtend(ctx context.Context, scope domain.Scope, in domain.ExtendInput) (domain.Reservation, error) {
	res, err := r.Reservations.ReservationExtend(ctx, scope, in)
	r.count("extend", err)
	return res, err
}

// KeyReads is what the API key cache reports. auth.KeyCache is one.
type KeyReads interface {
	DatabaseReads() (live, unknown int64)
}

// WatchKeyReads exports the key cache's database reads by what they found:
// a live key, or none (unknown or revoked). A climbing "unknown" rate is a
// client guessing or replaying dead keys; the negative cache and the
// per-address failure limit keep it from reaching the database per request.
func (m *Metrics) WatchKeyReads(k KeyReads) {
	read := func(unknown bool) func() float64 {
		return func() float64 {
			live, miss := k.DatabaseReads()
			if unknown {
				return float64(miss)
			}
			return float64(live)
		}
	}
	help := "API key lookups that read the database (cache misses), by result: live key or unknown/revoked."
	m.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_api_key_reads_total", Help: help, ConstLabels: prometheus.Labels{"result": "live"}}, read(false)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_api_key_reads_total", Help: help, ConstLabels: prometheus.Labels{"result": "unknown"}}, read(true)),
	)
}
