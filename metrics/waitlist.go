package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inventory/store"
)

// WaitlistReader reads the waitlists' totals. store.Store is one.
type WaitlistReader interface {
	WaitlistTotals(ctx context.Context) (store.WaitlistTotals, error)
}

// waitlistCollector reads how many entries wait, and the longest line, at
// each scrape (one statement over the waiting entries only, bounded by a
// timeout; omitted if it fails), and counts this instance's offers.
//
// Not per SKU: any SKU of the catalog can get a line, so a per-SKU series
// would be unbounded label cardinality. The total and the longest line say
// "how much is waiting" and "how bad is the worst drop"; which SKUs those
// are is the /admin waitlist panel's job (the 20 longest lines).
type waitlistCollector struct {
	src              WaitlistReader
	waiting, longest *prometheus.Desc
	offers, expired  prometheus.Counter
	waited           prometheus.Histogram
}

// WatchWaitlists exports the waitlists: waiting entries, the longest line,
// offers made, their time from join to offer, and offers whose hold expired
// unused. It returns the hooks for store.Store.SetWaitlistHooks.
func (m *Metrics) WatchWaitlists(src WaitlistReader) store.WaitlistHooks {
	c := &waitlistCollector{src: src,
		waiting: prometheus.NewDesc("inventory_waitlist_waiting",
			"Waitlist entries waiting in line, over every SKU (read from the database at each scrape).", nil, nil),
		longest: prometheus.NewDesc("inventory_waitlist_longest_line",
			"Entries waiting in the longest line: the SKU with the most waiting (read from the database at each scrape).", nil, nil),
		offers: prometheus.NewCounter(prometheus.CounterOpts{Name: "inventory_waitlist_offers_total",
			Help: "Waitlist entries handed a HELD reservation by this instance's transactions (sum over instances)."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "inventory_waitlist_offers_expired_total",
			Help: "Waitlist offers whose hold expired unused, expired by this instance (sum over instances)."}),
		waited: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "inventory_waitlist_offer_wait_seconds",
			Help:    "Time from joining a waitlist to being offered a hold.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400}}),
	}
	m.registry.MustRegister(c)
	return store.WaitlistHooks{
		Offered: func(waited time.Duration) {
			c.offers.Inc()
			c.waited.Observe(waited.Seconds())
		},
		OffersExpired: func(n int) { c.expired.Add(float64(n)) },
	}
}

func (c *waitlistCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.longest
	c.offers.Describe(ch)
	c.expired.Describe(ch)
	c.waited.Describe(ch)
}

func (c *waitlistCollector) Collect(ch chan<- prometheus.Metric) {
	c.offers.Collect(ch)
	c.expired.Collect(ch)
	c.waited.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t, err := c.src.WaitlistTotals(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(t.Waiting))
	ch <- prometheus.MustNewConstMetric(c.longest, prometheus.GaugeValue, float64(t.LongestLine))
}
