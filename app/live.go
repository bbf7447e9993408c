package app

import (
	"context"
	"log/slog"

	"inventory/avail"
	"inventory/config"
	"inventory/domain"
	"inventory/events"
	"inventory/fanout"
	"inventory/metrics"
	"inventory/replica"
	"inventory/resolvers"
	"inventory/store"
)

// live is what follows the event stream and what watches it: the broker,
// the fan-out of identical subscriptions, the availability copy and the
// metrics that report on all of them.
type live struct {
	broker  *events.Broker
	fan     *fanout.Registry
	metrics *metrics.Metrics
	// copy is the in-memory availability copy; nil when
	// INVENTORY_AVAILABILITY_MAX_LAG=0 (availability from the database only).
	copy *avail.Copy
	// stock answers availability: from the copy while it is fresh, else
	// from the standby while it is fresh (replica_reads.go), else the
	// primary.
	stock avail.Stock
}

func wireLive(ctx context.Context, cfg config.Config, db *pools, st stores, logger *slog.Logger) *live {
	eventsCfg := cfg.Events
	eventsCfg.Listen = db.listen
	l := &live{broker: events.NewBroker(st.events, db.events, eventsCfg, logger)}
	// Identical subscriptions run once for all their subscribers; a member
	// may fall behind as far as a broker subscriber may.
	l.fan = fanout.New(fanout.Config{Backlog: cfg.Events.Buffer, StallTimeout: cfg.Events.StallTimeout, Flush: cfg.SubscriptionFlush, Report: resolvers.ReportSubscriptionEnd})
	l.metrics = metrics.New(liveSubscriptions{Broker: l.broker, fan: l.fan})
	l.metrics.WatchFanout(l.fan)
	var copyStore avail.Store = st.events
	var stock domain.Stock = st.api
	if db.replica != nil {
		reads := &replicaReads{standby: store.New(db.replica), logger: logger}
		reads.monitor = replica.New(st.events, reads.standby, replica.Config{MaxLag: cfg.ReplicaMaxLag}, logger)
		go reads.monitor.Run(ctx)
		l.metrics.WatchReplica(reads.monitor, reads.Reads)
		copyStore = copySource{Store: st.events, reads: reads}
		stock = standbyStock{Stock: st.api, reads: reads}
	}
	if cfg.AvailabilityMaxLag > 0 {
		l.copy = avail.New(copyStore, l.broker, avail.Config{MaxLag: cfg.AvailabilityMaxLag, OnApply: l.metrics.AvailabilityApplied}, logger)
		l.metrics.WatchAvailability(l.copy)
	}
	l.stock = avail.Stock{Stock: stock, Copy: l.copy}
	l.metrics.WatchBatching(st.api)
	l.metrics.WatchOperations(st.api)
	l.metrics.WatchPools(db.all())
	// Offers are made by API requests and by jobs (expiry, sweeper): both
	// stores report them.
	waitlistHooks := l.metrics.WatchWaitlists(st.api)
	st.api.SetWaitlistHooks(waitlistHooks)
	st.jobs.SetWaitlistHooks(waitlistHooks)
	return l
}
