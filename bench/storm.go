package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// stormResult is what the expiry storm measured.
type stormResult struct {
	wanted, created        int
	createSecs             float64
	firstDue, lastDue      time.Time
	waited                 time.Duration // how long after the last deadline the bench watched
	releasedAfter          time.Duration // from the last deadline until no storm hold is held; <0: not within waited
	lagP50, lagP99, lagMax float64       // ms, ended_at - expires_at per hold (now - expires_at for holds still held)
	expired, stillHeld     int
	otherEnd               int    // ended otherwise than EXPIRED (nothing here confirms or releases them)
	endedBy                string // expired ledger rows by actor: expiry job or sweeper
	expiredTwice           int
	rssMB                  float64
	problem                string // a correctness failure; slowness is reported, not failed
}

// stormFallbackRate is the reserve rate the storm assumes when the run did
// not measure one: low enough for two shared cores, so the holds are made
// before their deadline, at the price of a longer wait for it.
const stormFallbackRate = 1000

// runStorm creates n holds through reserve whose deadlines fall in the same
// second, then watches them expire: the River expiry jobs must release every
// one, exactly once, soon after the deadline. rate (reserves/s measured
// earlier in the run) sizes how far ahead the deadline must be.
func (b *bench) runStorm(ctx context.Context, n, clients int, rate float64, wait time.Duration) (stormResult, error) {
	res := stormResult{wanted: n, waited: wait}
	if rate <= 0 {
		// No service-key reserve row ran (-only storm): assume a rate
		// rather than a deadline a day away.
		rate = stormFallbackRate
		logf("storm: no reserve rate measured in this run; assuming %d reserves/s", stormFallbackRate)
	}
	lead := time.Duration(float64(n)/max(rate, 1)*1.5*float64(time.Second)) + 3*time.Second
	target := time.Now().Add(lead).Truncate(time.Second).Add(time.Second).Unix()
	logf("storm: creating %d holds due at %s (in %s), %d clients", n, time.Unix(target, 0).Format("15:04:05"), time.Until(time.Unix(target, 0)).Round(time.Second), clients)
	rss := sampleRSS(b.srv.cmd.Process.Pid)
	var next, created atomic.Int64
	var firstErr atomic.Value
	stopAt := time.Unix(target, 0).Add(-time.Second)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			var s clientState
			co := "storm-" + strconv.Itoa(c)
			for ctx.Err() == nil {
				k := next.Add(1)
				if k > int64(n) {
					return
				}
				now := time.Now()
				if now.After(stopAt) {
					return // too late to land in the target second
				}
				ttl := strconv.FormatInt(target-now.Unix(), 10)
				s.body = appendReserve(s.body[:0], co, strconv.FormatInt(k, 10), ttl, b.cat.spread[int(k)%len(b.cat.spread)], b.cat.locCode)
				var err error
				if s.resp, err = b.gql.post(ctx, s.body, b.serviceKey, s.resp); err == nil {
					err = mutationOK(s.resp)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				created.Add(1)
			}
		})
	}
	wg.Wait()
	res.created = int(created.Load())
	res.createSecs = time.Since(start).Seconds()
	if err, _ := firstErr.Load().(error); err != nil {
		logf("storm: some reserves failed: %v", err)
	}
	if err := b.pool.QueryRow(ctx, `SELECT min(expires_at), max(expires_at) FROM reservations WHERE checkout_id LIKE 'storm-%'`).
		Scan(&res.firstDue, &res.lastDue); err != nil {
		rss.done()
		return res, fmt.Errorf("storm deadlines: %w", err)
	}
	logf("storm: %d holds created in %.1fs, due %s..%s", res.created, res.createSecs,
		res.firstDue.Format("15:04:05.000"), res.lastDue.Format("15:04:05.000"))

	// Poll until no storm hold is held, at most wait after the deadline. The
	// poll reads the index of held holds by deadline (every storm hold is
	// due by lastDue) and stops at the first one: counting the storm's
	// rows would scan the table, a third of a core at this rate, taken
	// from the server it measures.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(res.lastDue)):
	}
	res.releasedAfter = -1
	for deadline := res.lastDue.Add(wait); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		var held bool
		if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM reservations
			WHERE status = 'held' AND expires_at <= $1 AND checkout_id LIKE 'storm-%')`, res.lastDue).Scan(&held); err != nil {
			rss.done()
			return res, fmt.Errorf("storm poll: %w", err)
		}
		if !held {
			res.releasedAfter = time.Since(res.lastDue)
			break
		}
	}
	res.rssMB = rss.done()
	if err := b.pool.QueryRow(ctx, `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), 0), coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY lag), 0),
		       coalesce(max(lag), 0), count(*) FILTER (WHERE status = 'expired'), count(*) FILTER (WHERE status = 'held'),
		       count(*) FILTER (WHERE status NOT IN ('expired', 'held'))
		FROM (SELECT status, extract(epoch FROM coalesce(ended_at, clock_timestamp()) - expires_at) * 1000 AS lag
		      FROM reservations WHERE checkout_id LIKE 'storm-%') r`).
		Scan(&res.lagP50, &res.lagP99, &res.lagMax, &res.expired, &res.stillHeld, &res.otherEnd); err != nil {
		return res, fmt.Errorf("storm lag: %w", err)
	}
	if err := b.pool.QueryRow(ctx, `
		SELECT coalesce(string_agg(actor || ' ' || n, ', ' ORDER BY actor), '') FROM (
			SELECT m.actor, count(*) AS n FROM stock_movements m JOIN reservations r ON r.id = m.reservation_id
			WHERE r.checkout_id LIKE 'storm-%' AND m.cause = 'expired' GROUP BY m.actor) x`).Scan(&res.endedBy); err != nil {
		return res, fmt.Errorf("storm ended by: %w", err)
	}
	if err := b.pool.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT m.reservation_id FROM stock_movements m JOIN reservations r ON r.id = m.reservation_id
			WHERE r.checkout_id LIKE 'storm-%' AND m.cause = 'expired'
			GROUP BY m.reservation_id
			HAVING count(*) > (SELECT count(*) FROM reservation_lines l WHERE l.reservation_id = m.reservation_id)) x`).
		Scan(&res.expiredTwice); err != nil {
		return res, fmt.Errorf("storm double expiry: %w", err)
	}
	switch {
	case res.expiredTwice > 0:
		res.problem = fmt.Sprintf("%d holds expired twice", res.expiredTwice)
	case res.otherEnd > 0:
		res.problem = fmt.Sprintf("%d holds ended other than EXPIRED", res.otherEnd)
	}
	return res, nil
}
