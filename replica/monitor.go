// Package replica decides when a streaming standby may answer reads: it
// measures the standby's replay lag against the primary, in time, and says
// whether it is within a bound. Nothing that decides a sale ever asks it:
// only storefront reads (the in-memory availability copy's loads, and
// availability answered from the database) go to a standby.
package replica

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// WAL is how the monitor reads WAL positions; store.Store on the primary's
// pool and on the standby's are the two.
type WAL interface {
	WALPosition(ctx context.Context) (int64, error)
	WALReplayed(ctx context.Context) (int64, error)
}

// Config tunes the monitor; zero values take the defaults.
type Config struct {
	// MaxLag is how far behind the standby may be and still answer.
	// Default 1s.
	MaxLag time.Duration
	// Interval is how often both positions are read: the lag's resolution.
	// Default 100ms.
	Interval time.Duration
}

// Monitor measures a standby's replay lag. Every Interval it reads the
// primary's WAL position (remembering when) and the standby's replay
// position; the lag is the age of the oldest primary position the standby
// has not replayed yet, 0 when it has replayed all of them. WAL positions
// say exactly what is replayed, unlike pg_last_xact_replay_timestamp(),
// which grows while the primary is idle.
type Monitor struct {
	primary, standby WAL
	cfg              Config
	logger           *slog.Logger

	mu      sync.Mutex
	samples []sample // primary positions not yet replayed, oldest first

	lag      atomic.Int64 // nanoseconds; the last measurement
	measured atomic.Int64 // unix nanoseconds of the last good measurement
	down     atomic.Bool  // the last read of the standby failed
}

type sample struct {
	lsn int64
	at  time.Time
}

// New returns a monitor of standby against primary; Run measures.
func New(primary, standby WAL, cfg Config, logger *slog.Logger) *Monitor {
	if cfg.MaxLag <= 0 {
		cfg.MaxLag = time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	m := &Monitor{primary: primary, standby: standby, cfg: cfg, logger: logger}
	m.down.Store(true) // until measured
	return m
}

// Run measures until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		m.measure(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Monitor) measure(ctx context.Context) {
	// Each read is bounded by the interval's budget: a standby that hangs
	// must not make the monitor report an old "fresh".
	ctx, cancel := context.WithTimeout(ctx, max(m.cfg.Interval, 500*time.Millisecond))
	defer cancel()
	now := time.Now()
	lsn, err := m.primary.WALPosition(ctx)
	if err != nil {
		return // nothing to compare with; Fresh ages out on its own
	}
	replayed, err := m.standby.WALReplayed(ctx)
	if err != nil {
		if !m.down.Swap(true) && ctx.Err() == nil {
			m.logger.Warn("replica: standby unreadable; storefront reads go to the primary", "err", err)
		}
		return
	}
	m.mu.Lock()
	m.samples = append(m.samples, sample{lsn, now})
	drop := 0
	for drop < len(m.samples) && m.samples[drop].lsn <= replayed {
		drop++
	}
	m.samples = m.samples[drop:]
	var lag time.Duration
	if len(m.samples) > 0 {
		lag = time.Since(m.samples[0].at)
	}
	m.mu.Unlock()
	m.lag.Store(int64(lag))
	m.measured.Store(time.Now().UnixNano())
	if m.down.Swap(false) {
		m.logger.Info("replica: standby readable", "lag", lag)
	}
}

// Lag is the standby's replay lag as last measured; while the standby is
// unreadable, how long since it was last measured readable (so it grows).
func (m *Monitor) Lag() time.Duration {
	lag := time.Duration(m.lag.Load())
	if m.down.Load() {
		if at := m.measured.Load(); at > 0 {
			return max(lag, time.Since(time.Unix(0, at)))
		}
		return time.Hour
	}
	return lag
}

// Fresh reports whether the standby may answer a read now: at the last
// measurement it was lag behind, and if its replay stopped right after, it
// is lag plus the time since behind now; that must be within MaxLag.
func (m *Monitor) Fresh() bool {
	if m.down.Load() {
		return false
	}
	since := time.Since(time.Unix(0, m.measured.Load()))
	return time.Duration(m.lag.Load())+since <= m.cfg.MaxLag
}

// Up reports whether the last read of the standby worked.
func (m *Monitor) Up() bool { return !m.down.Load() }
