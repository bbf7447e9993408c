package app

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"inventory/domain"
	"inventory/replica"
	"inventory/store"
)

// standbyReadTimeout bounds one availability read on the standby: one that
// hangs (a standby stopped mid-query, a network partition) is given up and
// the primary answers, within the request's deadline.
const standbyReadTimeout = 500 * time.Millisecond

// replicaReads sends storefront reads to a streaming standby while its
// monitor says it is within INVENTORY_REPLICA_MAX_LAG, and to the primary
// otherwise, or when the standby fails to answer: a stopped standby costs a
// request nothing but the failed attempt until the monitor notices (one
// interval). Only reads that decide nothing go here: the availability
// copy's full loads, and availability answered from the database. Mutations, a checkout's reservations, sku and balances
// never do.
type replicaReads struct {
	standby *store.Store
	monitor *replica.Monitor
	logger  *slog.Logger

	fromStandby, fromPrimary atomic.Int64
}

// onStandby answers with standby if the standby is fresh, and with primary
// if it is not or the standby fails within timeout.
func onStandby[T any](r *replicaReads, ctx context.Context, timeout time.Duration, standby, primary func(context.Context) (T, error)) (T, error) {
	if r.monitor.Fresh() {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		v, err := standby(sctx)
		cancel()
		if err == nil {
			r.fromStandby.Add(1)
			return v, nil
		}
		if ctx.Err() != nil {
			var zero T
			return zero, ctx.Err()
		}
		r.logger.DebugContext(ctx, "replica: standby read failed; the primary answers", "err", err)
	}
	r.fromPrimary.Add(1)
	return primary(ctx)
}

// Reads reports how many reads the standby and the primary answered.
func (r *replicaReads) Reads() (standby, primary int64) {
	return r.fromStandby.Load(), r.fromPrimary.Load()
}

// copySource is what the availability copy reads: its full loads from the
// standby when fresh (a snapshot is consistent in itself: balances and the
// seq they reflect come from one transaction, and the stream carries the
// copy on from that seq), its staleness probe, its supply refreshes and its
// catalog checks from the primary (they must not be older than what the
// copy already applied, and a check's time says how fresh the copy's
// catalog is, which a standby's would not).
type copySource struct {
	*store.Store // the primary
	reads        *replicaReads
}

// AvailabilitySnapshot reads on the standby when fresh. A standby's
// snapshot holds what it had replayed, and its own view of unpublished
// events says nothing of what the primary committed since: its age is not
// known (At zero), so the copy answers nothing from it until a head read
// on the primary says it has caught up (one probe interval once the stream
// has carried it there); and a snapshot older than what the copy already
// answered is not answered from until the stream passes that (avail.Copy).
func (s copySource) AvailabilitySnapshot(ctx context.Context) (domain.AvailabilitySnapshot, error) {
	fromStandby := func(ctx context.Context) (domain.AvailabilitySnapshot, error) {
		snap, err := s.reads.standby.AvailabilitySnapshot(ctx)
		snap.At = time.Time{}
		return snap, err
	}
	return onStandby(s.reads, ctx, time.Minute, fromStandby, s.Store.AvailabilitySnapshot)
}

// standbyStock is domain.Stock whose availability, when the copy cannot
// answer it, is read on the standby when fresh.
type standbyStock struct {
	domain.Stock
	reads *replicaReads
}

// AvailabilityList reads on the standby when fresh. A SKU the standby does
// not know may be one created less than the lag ago:
// unknown is not "a little stale", so such an answer is the primary's.
func (s standbyStock) AvailabilityList(ctx context.Context, q domain.AvailabilityQuery) ([]*domain.Availability, error) {
	return onStandby(s.reads, ctx, standbyReadTimeout,
		func(ctx context.Context) ([]*domain.Availability, error) {
			out, err := s.reads.standby.AvailabilityList(ctx, q)
			if err == nil && slices.Contains(out, nil) {
				return nil, errStandbyLacksSKU
			}
			return out, err
		},
		func(ctx context.Context) ([]*domain.Availability, error) { return s.Stock.AvailabilityList(ctx, q) })
}

// errStandbyLacksSKU is a standby's answer naming a SKU as unknown.
var errStandbyLacksSKU = errors.New("the standby does not know a SKU asked for (created since it replayed?)")
