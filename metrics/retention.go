package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchRetention exports inventory_rows_pruned_total{table}: rows the
// retention job deleted, per table (the tables named are
// shown from the start at 0). A flat line while the table grows means the job
// is not running (no leader working jobs); a line rising by thousands an
// hour means retention is catching up. It returns the hook for
// jobs.Config.OnPruned.
func (m *Metrics) WatchRetention(tables ...string) func(table string, n int) {
	pruned := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "inventory_rows_pruned_total",
		Help: "Rows deleted by the retention job, by table: code-reveal audit rows and webhook delivery log rows past their retention.",
	}, []string{"table"})
	for _, t := range tables {
		pruned.WithLabelValues(t)
	}
	m.registry.MustRegister(pruned)
	return func(table string, n int) { pruned.WithLabelValues(table).Add(float64(n)) }
}
