package metrics

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"inventory/domain"
)

// Snapshotter reads the operations snapshot. store.Store is one.
type Snapshotter interface {
	OperationsSnapshot(ctx context.Context) (domain.OperationsSnapshot, error)
}

// operationsCollector reads the snapshot at each scrape (one cheap
// statement, bounded by a timeout), so the numbers are the database's, the
// same on every instance. If the read fails the scrape omits them and
// inventory_operations_snapshot_ok says 0.
type operationsCollector struct {
	src                        Snapshotter
	held, overdue, lag, readOK *prometheus.Desc
	unshipped, committed, age  *prometheus.Desc
}

// WatchOperations exports held and overdue holds, the relay's lag, and the
// orders waiting to ship.
func (m *Metrics) WatchOperations(src Snapshotter) {
	m.registry.MustRegister(&operationsCollector{src: src,
		held:    prometheus.NewDesc("inventory_held_reservations", "Reservations currently held.", nil, nil),
		overdue: prometheus.NewDesc("inventory_overdue_holds", "Held reservations past their deadline: expiry is not keeping up.", nil, nil),
		lag:     prometheus.NewDesc("inventory_relay_lag_seconds", "How long the oldest committed stock event has waited to be published to subscribers.", nil, nil),
		readOK:  prometheus.NewDesc("inventory_operations_snapshot_ok", "1 if this scrape could read the numbers above from the database.", nil, nil),
		unshipped: prometheus.NewDesc("inventory_unshipped_orders",
			"Orders with units committed at an ON_SHIPMENT location, not yet fulfilled or cancelled.", nil, nil),
		committed: prometheus.NewDesc("inventory_committed_units", "Units sold and waiting to ship at ON_SHIPMENT locations.", nil, nil),
		age: prometheus.NewDesc("inventory_oldest_unshipped_order_seconds",
			"Since the oldest order still waiting to ship was confirmed (0: none): a growing value means the warehouse is behind.", nil, nil),
	})
}

func (c *operationsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.overdue
	ch <- c.lag
	ch <- c.readOK
	ch <- c.unshipped
	ch <- c.committed
	ch <- c.age
}

func (c *operationsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := c.src.OperationsSnapshot(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.readOK, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.readOK, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(s.HeldReservations))
	ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, float64(s.OverdueHolds))
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, s.RelayLagSeconds)
	ch <- prometheus.MustNewConstMetric(c.unshipped, prometheus.GaugeValue, float64(s.UnshippedOrders))
	ch <- prometheus.MustNewConstMetric(c.committed, prometheus.GaugeValue, float64(s.UnshippedUnits))
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, s.OldestUnshippedSeconds)
}

// poolCollector exports each connection pool's use and waits, so a
// saturated pool (requests queued on a hot balance) shows before it hurts.
type poolCollector struct {
	pools                                     map[string]*pgxpool.Pool
	acquired, max, waits, waitSeconds, cancel *prometheus.Desc
}

// WatchPools exports the pools by name (api, jobs, events).
func (m *Metrics) WatchPools(pools map[string]*pgxpool.Pool) {
	l := []string{"pool"}
	m.registry.MustRegister(&poolCollector{pools: pools,
		acquired:    prometheus.NewDesc("inventory_db_pool_acquired_connections", "Connections in use.", l, nil),
		max:         prometheus.NewDesc("inventory_db_pool_max_connections", "Pool size.", l, nil),
		waits:       prometheus.NewDesc("inventory_db_pool_empty_acquire_total", "Acquires that had to wait for a connection.", l, nil),
		waitSeconds: prometheus.NewDesc("inventory_db_pool_acquire_seconds_total", "Time spent acquiring connections.", l, nil),
		cancel:      prometheus.NewDesc("inventory_db_pool_canceled_acquire_total", "Acquires given up (the request ended while waiting).", l, nil),
	})
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.max, c.waits, c.waitSeconds, c.cancel} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, p := range c.pools {
		s := p.Stat()
		ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(s.AcquiredConns()), name)
		ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()), name)
		ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.EmptyAcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(c.waitSeconds, prometheus.CounterValue, s.AcquireDuration().Seconds(), name)
		ch <- prometheus.MustNewConstMetric(c.cancel, prometheus.CounterValue, float64(s.CanceledAcquireCount()), name)
	}
}
