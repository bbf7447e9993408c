package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"inventory/fanout"
)

// Fanout is what subscription groups report. fanout.Registry is one.
type Fanout interface {
	Stats() fanout.Stats
}

// WatchFanout exports subscription groups: how often gqlgen executed a
// subscription response against how many messages subscribers were sent
// (their ratio is the mean group size an event met), the live groups and
// their members, and members cut off for falling behind.
func (m *Metrics) WatchFanout(f Fanout) {
	stat := func(pick func(fanout.Stats) int64) func() float64 {
		return func() float64 { return float64(pick(f.Stats())) }
	}
	m.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_subscription_executions_total",
			Help: "Subscription responses executed and serialized: once per event (or availability tick) per group of identical subscriptions."},
			stat(func(s fanout.Stats) int64 { return s.Executions })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_subscription_messages_total",
			Help: "Subscription data messages sent to subscribers: once per event per subscriber."},
			stat(func(s fanout.Stats) int64 { return s.Delivered })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "inventory_subscription_groups",
			Help: "Live groups of identical subscriptions (same document, variables and caller scope), each executed once."},
			stat(func(s fanout.Stats) int64 { return s.Groups })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "inventory_subscription_group_members",
			Help: "Subscribers in those groups."},
			stat(func(s fanout.Stats) int64 { return s.Members })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "inventory_subscription_members_cut_total",
			Help: "Group members cut off for falling behind (with their resume cursor); also counted in inventory_subscribers_stalled_total."},
			stat(func(s fanout.Stats) int64 { return s.Cut })),
	)
}
