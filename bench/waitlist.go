package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// waitlistResult is the waitlist row: reserve → release pairs on a hot SKU
// without and with a line of waiting entries in front of it, side by side,
// and how long one receipt takes to hand a sold-out SKU's line its units.
type waitlistResult struct {
	clients, entries int
	without, with    loadResult // pairs on WL-FREE and on WL-LINE
	// expiry: holds on both SKUs, interleaved and due in the same second,
	// expired by the same job passes (River's job per hold, the set-based
	// expiry): per SKU, how many and their lag p50 / max after the deadline
	expiryHolds          [2]int
	expiryP50, expiryMax [2]time.Duration
	joinSecs             float64 // joining the line of entries
	drainEntries         int
	drainSecs            float64 // the receipt's round trip: every offer is made in its transaction
	offered              int
	problem              string
}

// waitlistStock is each pair SKU's stock: the line on WL-LINE waits for one
// unit more, so it may join (never that much free) and no unit a release
// frees ever fits it: every release asks the line, and plain reserves go on.
const waitlistStock = 1_000

// runWaitlist seeds the row's SKUs, joins entries entries to WL-LINE's line
// through joinWaitlist, runs the two cells of pairs, then joins drain
// single-unit entries to the sold-out WL-DRAIN and receives drain units in
// one receiveStock: its answer comes after every entry was offered a hold.
func (b *bench) runWaitlist(ctx context.Context, clients, entries, drain int) (waitlistResult, error) {
	res := waitlistResult{clients: clients, entries: entries, drainEntries: drain}
	if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO skus (code, name, kind) VALUES ('WL-FREE', 'bench waitlist, no line', 'quantity'),
			('WL-LINE', 'bench waitlist, a line', 'quantity'), ('WL-DRAIN', 'bench waitlist, sold out', 'quantity')`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO balances (sku_id, location_id, on_hand)
			SELECT id, $1, CASE WHEN code = 'WL-DRAIN' THEN 0 ELSE $2::int END FROM skus WHERE code LIKE 'WL-%'`, b.cat.loc, waitlistStock); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO stock_movements (sku_id, location_id, on_hand_delta, cause, reference, actor)
			SELECT b.sku_id, b.location_id, b.on_hand, 'received', 'bench waitlist seed', 'bench'
			FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code LIKE 'WL-%' AND b.on_hand > 0`)
		return err
	}); err != nil {
		return res, fmt.Errorf("waitlist: seed: %w", err)
	}
	start := time.Now()
	if err := b.joinLine(ctx, clients, "line", "WL-LINE", entries, waitlistStock+1); err != nil {
		return res, err
	}
	res.joinSecs = time.Since(start).Seconds()
	logf("waitlist: %d entries joined WL-LINE in %.1f s; pairs without a line", entries, res.joinSecs)
	res.without = closedLoop(ctx, clients, b.opts.cellDur, b.pairOp("WL-FREE", clients))
	logf("waitlist: %.0f pairs/s without; with %d waiting", res.without.opsPerSec(), entries)
	res.with = closedLoop(ctx, clients, b.opts.cellDur, b.pairOp("WL-LINE", clients))
	logf("waitlist: %.0f pairs/s with the line", res.with.opsPerSec())

	skus := []string{"WL-FREE", "WL-LINE"}
	if err := b.expireTogether(ctx, clients, skus, min(entries, waitlistStock/2), &res); err != nil {
		return res, err
	}
	for i, sku := range skus {
		logf("waitlist: %d holds on %s expired, lag after their deadline p50 %s max %s", res.expiryHolds[i], sku,
			res.expiryP50[i].Round(time.Millisecond), res.expiryMax[i].Round(time.Millisecond))
	}

	if err := b.joinLine(ctx, clients, "drain", "WL-DRAIN", drain, 1); err != nil {
		return res, err
	}
	start = time.Now()
	if err := b.gql.do(ctx, b.adminKey, `mutation($in: ReceiveStockInput!) { receiveStock(input: $in) { userErrors { code message } } }`,
		map[string]any{"in": map[string]any{"sku": "WL-DRAIN", "location": b.cat.locCode, "quantity": drain, "reference": "bench-waitlist-drain"}}, nil); err != nil {
		return res, fmt.Errorf("waitlist: receive: %w", err)
	}
	res.drainSecs = time.Since(start).Seconds()
	var waiting, reserved int
	if err := b.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM waitlist_entries w JOIN skus s ON s.id = w.sku_id WHERE s.code = 'WL-DRAIN' AND w.status = 'offered'),
		       (SELECT count(*) FROM waitlist_entries w JOIN skus s ON s.id = w.sku_id WHERE s.code = 'WL-LINE' AND w.status = 'waiting'),
		       (SELECT b.reserved FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = 'WL-DRAIN')`).Scan(&res.offered, &waiting, &reserved); err != nil {
		return res, fmt.Errorf("waitlist: counts: %w", err)
	}
	switch {
	case res.offered != drain || reserved != drain:
		res.problem = fmt.Sprintf("%d of %d entries offered after the receipt, %d units reserved", res.offered, drain, reserved)
	case waiting != entries:
		res.problem = fmt.Sprintf("%d of WL-LINE's %d entries still waiting: a unit it cannot fit was offered", waiting, entries)
	}
	logf("waitlist: one receipt offered %d of %d entries in %.2f s; problem %q", res.offered, drain, res.drainSecs, res.problem)
	return res, nil
}

// expireTogether holds up to n single units of each of skus, interleaved,
// all due in the same second a few seconds ahead, waits until none is held,
// and records per SKU how many it made and their expiry lag (ended_at -
// expires_at): the same job passes expire both, so what the line costs each
// expiry shows side by side, apart from when River's passes happen to run.
func (b *bench) expireTogether(ctx context.Context, clients int, skus []string, n int, res *waitlistResult) error {
	target := time.Now().Add(5 * time.Second).Truncate(time.Second).Add(time.Second)
	stopAt := target.Add(-time.Second)
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			var st clientState
			for ctx.Err() == nil {
				k := next.Add(1)
				now := time.Now()
				if k > int64(n*len(skus)) || now.After(stopAt) {
					return
				}
				sku := skus[int(k)%len(skus)]
				ttl := strconv.FormatInt(target.Unix()-now.Unix(), 10)
				st.body = appendReserve(st.body[:0], "wle-"+sku+"-"+strconv.Itoa(c), strconv.FormatInt(k, 10), ttl, sku, b.cat.locCode)
				var err error
				if st.resp, err = b.gql.post(ctx, st.body, b.serviceKey, st.resp); err == nil {
					err = mutationOK(st.resp)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("waitlist: holds to expire: %w", err)
	}
	for deadline := target.Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var held int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE checkout_id LIKE 'wle-%' AND status = 'held'`).Scan(&held); err != nil {
			return fmt.Errorf("waitlist: count holds: %w", err)
		}
		if held == 0 && time.Now().After(target) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("waitlist: %d holds still held a minute after their deadline", held)
		}
	}
	for i, sku := range skus {
		var p50, mx float64
		if err := b.pool.QueryRow(ctx, `
			SELECT count(*), coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), 0), coalesce(max(lag), 0)
			FROM (SELECT extract(epoch FROM ended_at - expires_at) AS lag FROM reservations
			      WHERE checkout_id LIKE $1 AND status = 'expired') t`, "wle-"+sku+"-%").Scan(&res.expiryHolds[i], &p50, &mx); err != nil {
			return fmt.Errorf("waitlist: expiry lag: %w", err)
		}
		res.expiryP50[i], res.expiryMax[i] = time.Duration(p50*float64(time.Second)), time.Duration(mx*float64(time.Second))
	}
	return nil
}

// joinLine joins n entries of quantity units each to sku's line, one
// checkout per entry, with the service key, over clients connections.
func (b *bench) joinLine(ctx context.Context, clients int, prefix, sku string, n, quantity int) error {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := next.Add(1)
				if k > int64(n) {
					return
				}
				var out struct {
					JoinWaitlist struct {
						Entry      *struct{ Status string }
						UserErrors []struct{ Code, Message string }
					}
				}
				err := b.gql.do(ctx, b.serviceKey, `mutation($in: JoinWaitlistInput!) { joinWaitlist(input: $in) { entry { status } userErrors { code message } } }`,
					map[string]any{"in": map[string]any{"checkoutId": "wl-" + prefix + "-" + strconv.FormatInt(k, 10), "requestKey": "join",
						"sku": sku, "location": b.cat.locCode, "quantity": quantity}}, &out)
				if err == nil && (out.JoinWaitlist.Entry == nil || out.JoinWaitlist.Entry.Status != "WAITING") {
					err = fmt.Errorf("joinWaitlist answered %+v", out.JoinWaitlist)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("waitlist: join %s: %w", sku, err)
	}
	return nil
}

// pairOp reserves one unit of sku with the service key and releases it: a
// checkout that gives up, whose release asks the line before it commits.
func (b *bench) pairOp(sku string, clients int) op {
	st := make([]clientState, clients)
	return func(ctx context.Context, c int) error {
		s := &st[c]
		s.n++
		co := "wlp-" + sku + "-" + strconv.Itoa(c)
		s.body = appendReserve(s.body[:0], co, strconv.Itoa(s.n), holdTTL, sku, b.cat.locCode)
		var err error
		if s.resp, err = b.gql.post(ctx, s.body, b.serviceKey, s.resp); err != nil {
			return err
		}
		if err := mutationOK(s.resp); err != nil {
			return err
		}
		id, ok := jsonString(s.resp, idKey)
		if !ok {
			return fmt.Errorf("reserve answered without an id: %.200s", s.resp)
		}
		s.body = append(s.body[:0], `{"query":"mutation($in:ReleaseReservationInput!){releaseReservation(input:$in){reservation{status} userErrors{code}}}","variables":{"in":{"id":"`...)
		s.body = append(s.body, id...)
		s.body = append(s.body, `","reason":"CUSTOMER_CANCELLED"}}}`...)
		if s.resp, err = b.gql.post(ctx, s.body, b.serviceKey, s.resp); err != nil {
			return err
		}
		return mutationOK(s.resp)
	}
}

// markdown renders the row.
func (r *waitlistResult) markdown() string {
	ratio := 0.0
	if r.without.opsPerSec() > 0 {
		ratio = r.with.opsPerSec() / r.without.opsPerSec()
	}
	check := "ok"
	if r.problem != "" {
		check = "FAIL: " + r.problem
	}
	return fmt.Sprintf("\n## Waitlists\n\n"+
		"Reserve → release pairs of 1 unit on a hot SKU (%d units), %d clients, service key: without a line, and with %d entries waiting in front of it for %d units each (joined through `joinWaitlist` in %.1f s), so every release asks the line and nothing it frees fits; then holds on both SKUs, interleaved and due in the same second, expired by the same passes (each hold's lag after its deadline). Then %d single-unit entries wait for a sold-out SKU and one `receiveStock` of %d units offers them all, in its transaction.\n\n"+
		"| pairs/s without a line | with %d waiting | ratio | target | holds due together, expiry lag p50 / max: without the line | with it | one receipt offering %d entries | check |\n|---:|---:|---:|---|---|---|---:|---|\n"+
		"| %.0f (p99 %.1f ms) | %.0f (p99 %.1f ms) | %.2f | ≥ 0.9 %s | %d: %s / %s | %d: %s / %s | %.2f s (%d offered) | %s |\n",
		waitlistStock, r.clients, r.entries, waitlistStock+1, r.joinSecs, r.drainEntries, r.drainEntries,
		r.entries, r.drainEntries,
		r.without.opsPerSec(), r.without.lat.quantile(0.99), r.with.opsPerSec(), r.with.lat.quantile(0.99), ratio, mark(ratio >= 0.9),
		r.expiryHolds[0], r.expiryP50[0].Round(time.Millisecond), r.expiryMax[0].Round(time.Millisecond),
		r.expiryHolds[1], r.expiryP50[1].Round(time.Millisecond), r.expiryMax[1].Round(time.Millisecond),
		r.drainSecs, r.offered, check)
}
