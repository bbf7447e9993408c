package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AvailabilityCopy is what the in-memory availability copy reports.
// avail.Copy is one.
type AvailabilityCopy interface {
	Lag() time.Duration
	Seq() int64
	Reloads() int64
	Hits() int64
	Fallbacks() int64
}

// WatchAvailability exports the copy's staleness (commit to applied, as
// measured: 3600 while it is loading), the seq it has applied, its loads,
// and availability queries it answered and those it left to the database.
func (m *Metrics) WatchAvailability(c AvailabilityCopy) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "inventory_availability_lag_seconds",
			Help: "How stale this instance's in-memory availability copy is: time since the newest moment before which every committed change is known applied. Past INVENTORY_AVAILABILITY_MAX_LAG availability is read from the database."},
			func() float64 { return c.Lag().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "inventory_availability_seq", Help: "Newest stock event seq the availability copy has applied."},
			func() float64 { return float64(c.Seq()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_availability_loads_total", Help: "Full loads of the availability copy (start, gap, stream end, LISTEN reconnect)."},
			func() float64 { return float64(c.Reloads()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_availability_reads_total", Help: "availability queries by where they were answered.", ConstLabels: prometheus.Labels{"from": "memory"}},
			func() float64 { return float64(c.Hits()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_availability_reads_total", Help: "availability queries by where they were answered.", ConstLabels: prometheus.Labels{"from": "database"}},
			func() float64 { return float64(c.Fallbacks()) }),
		m.availabilityApply,
	)
}

// AvailabilityApplied observes one event's commit-to-applied time.
func (m *Metrics) AvailabilityApplied(d time.Duration) { m.availabilityApply.Observe(d.Seconds()) }
