package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Replica is what the standby monitor reports. replica.Monitor is one.
type Replica interface {
	Lag() time.Duration
	Up() bool
	Fresh() bool
}

// WatchReplica exports the streaming standby's replay lag, whether it
// answers and may answer now, and the storefront reads each side served.
func (m *Metrics) WatchReplica(r Replica, reads func() (standby, primary int64)) {
	boolean := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "inventory_replica_lag_seconds",
			Help: "The standby's replay lag, from WAL positions: the age of the oldest primary position it has not replayed (while it does not answer: the time since it last did). Past INVENTORY_REPLICA_MAX_LAG the primary answers storefront reads."},
			func() float64 { return r.Lag().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "inventory_replica_up", Help: "1 when the standby answered the last lag probe."},
			func() float64 { return boolean(r.Up()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "inventory_replica_fresh", Help: "1 when the standby may answer storefront reads now (answering, within INVENTORY_REPLICA_MAX_LAG)."},
			func() float64 { return boolean(r.Fresh()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_replica_reads_total", Help: "Storefront reads meant for the standby, by who answered (the primary when the standby was stale, down or failed).", ConstLabels: prometheus.Labels{"served_by": "standby"}},
			func() float64 { s, _ := reads(); return float64(s) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_replica_reads_total", Help: "Storefront reads meant for the standby, by who answered (the primary when the standby was stale, down or failed).", ConstLabels: prometheus.Labels{"served_by": "primary"}},
			func() float64 { _, p := reads(); return float64(p) }),
	)
}
