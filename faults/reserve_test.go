package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

const reserveMutation = `mutation($in: ReserveInput!) { reserve(input: $in) {
	replayed reservation { id status lines { sku location quantity } } userErrors { code message } } }`

// line is one basket line, as sent and as returned. An empty Location is
// sourced by priority.
type line struct {
	SKU      string `json:"sku"`
	Location string `json:"location,omitempty"`
	Quantity int    `json:"quantity"`
}

// reserveReq is one reserve request; (CheckoutID, RequestKey) names it.
type reserveReq struct {
	CheckoutID string `json:"checkoutId"`
	RequestKey string `json:"requestKey"`
	Lines      []line `json:"lines"`
	TTLSeconds int    `json:"ttlSeconds"`
}

type rkey struct{ checkout, request string }

func (r reserveReq) key() rkey { return rkey{r.CheckoutID, r.RequestKey} }

// kind says how a reserve request ended as the client saw it.
type kind int

const (
	held      kind = iota // a reservation came back (new or replayed)
	refused               // userErrors: a definitive business answer
	internal              // HTTP 200 with a GraphQL error INTERNAL
	status5xx             // an HTTP 5xx
	noAnswer              // no HTTP answer: connection refused, reset, timeout
	unclean               // anything else: not what the contract allows
)

var kindNames = [...]string{"held", "refused", "INTERNAL", "5xx", "no answer", "unclean"}

func (k kind) String() string { return kindNames[k] }

// answered says the client has its answer and stops retrying.
func (k kind) answered() bool { return k == held || k == refused }

type outcome struct {
	kind     kind
	replayed bool
	id       string
	status   string
	lines    []line
	code     string // the userError code
	detail   string
}

// reserve sends one reserve request and classifies the answer.
func (h *harness) reserve(ctx context.Context, url, token string, in reserveReq) outcome {
	r, err := h.post(ctx, url, token, reserveMutation, map[string]any{"in": in})
	switch {
	case err != nil && r.Status == 0:
		return outcome{kind: noAnswer, detail: err.Error()}
	case r.Status >= 500:
		return outcome{kind: status5xx, detail: fmt.Sprintf("HTTP %d %.200s", r.Status, r.raw)}
	case err != nil || r.Status != 200:
		return outcome{kind: unclean, detail: fmt.Sprintf("HTTP %d %v %.300s", r.Status, err, r.raw)}
	case len(r.Errors) > 0:
		msg := r.Errors[0].Message
		// INTERNAL says only that it failed, with a request id: no SQL, no
		// driver error.
		if r.code() == "INTERNAL" && (strings.HasPrefix(msg, "internal error; request id") || strings.HasPrefix(msg, "the request took too long")) {
			return outcome{kind: internal, detail: msg}
		}
		return outcome{kind: unclean, detail: fmt.Sprintf("GraphQL error %s: %s", r.code(), msg)}
	}
	var p struct {
		Replayed    bool `json:"replayed"`
		Reservation *struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Lines  []line `json:"lines"`
		} `json:"reservation"`
		UserErrors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"userErrors"`
	}
	if err := json.Unmarshal(r.Data["reserve"], &p); err != nil {
		return outcome{kind: unclean, detail: fmt.Sprintf("payload %v: %.300s", err, r.raw)}
	}
	switch {
	case p.Reservation != nil && len(p.UserErrors) == 0:
		return outcome{kind: held, replayed: p.Replayed, id: p.Reservation.ID, status: p.Reservation.Status, lines: p.Reservation.Lines}
	case p.Reservation == nil && len(p.UserErrors) > 0:
		return outcome{kind: refused, code: p.UserErrors[0].Code, detail: p.UserErrors[0].Message}
	}
	return outcome{kind: unclean, detail: fmt.Sprintf("payload with both or neither reservation and userErrors: %.300s", r.raw)}
}

// ledger records what the clients were told, for the checks afterwards.
type ledger struct {
	mu       sync.Mutex
	inputs   map[rkey]reserveReq
	final    map[rkey]outcome // the answer each key ended with
	attempts map[kind]int     // every attempt's outcome
	samples  map[kind]string  // the first detail seen of each kind of failure
	retried  int              // keys that needed more than one attempt
	replayed int              // keys whose answer was a replay (an earlier attempt had committed)
	unclean  []string
}

func newLedger() *ledger {
	return &ledger{inputs: map[rkey]reserveReq{}, final: map[rkey]outcome{}, attempts: map[kind]int{}, samples: map[kind]string{}}
}

func (l *ledger) attempt(in reserveReq, o outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inputs[in.key()] = in
	l.attempts[o.kind]++
	if _, seen := l.samples[o.kind]; !seen && !o.kind.answered() {
		l.samples[o.kind] = o.detail
	}
	if o.kind == unclean {
		l.unclean = append(l.unclean, fmt.Sprintf("%s/%s: %s", in.CheckoutID, in.RequestKey, o.detail))
	}
}

func (l *ledger) answer(in reserveReq, o outcome, attempts int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.final[in.key()] = o
	if attempts == 1 && o.replayed {
		// Every key is fresh: only an earlier attempt can have made it.
		l.unclean = append(l.unclean, fmt.Sprintf("%s/%s: replayed at its first attempt", in.CheckoutID, in.RequestKey))
	}
	if attempts > 1 {
		l.retried++
		if o.replayed {
			l.replayed++
		}
	}
}

// counts returns how many keys ended held and refused (by code).
func (l *ledger) counts() (heldN int, refusedN map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	refusedN = map[string]int{}
	for _, o := range l.final {
		if o.kind == held {
			heldN++
		} else {
			refusedN[o.code]++
		}
	}
	return heldN, refusedN
}

func (l *ledger) attemptSummary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for k := held; k <= unclean; k++ {
		n := l.attempts[k]
		switch {
		case n > 0 && l.samples[k] != "":
			parts = append(parts, fmt.Sprintf("%d %s (e.g. %q)", n, k, truncate(l.samples[k], 70)))
		case n > 0 || k == unclean:
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// untilAnswered sends in to urls (starting at urls[first], moving to the next
// after every failed attempt) with the same key and inputs until it gets an
// answer, and records every attempt. It fails the test if there is none by
// deadline.
func (h *harness) untilAnswered(ctx context.Context, l *ledger, urls func() []string, first int, token string, in reserveReq, deadline time.Time) outcome {
	for n, i := 1, first; ; n, i = n+1, i+1 {
		us := urls()
		o := h.reserve(ctx, us[i%len(us)], token, in)
		l.attempt(in, o)
		if o.kind.answered() {
			l.answer(in, o, n)
			return o
		}
		if ctx.Err() != nil {
			return o // the test is ending
		}
		if time.Now().After(deadline) {
			h.t.Errorf("%s/%s: no answer after %d attempts; last: %s %s", in.CheckoutID, in.RequestKey, n, o.kind, o.detail)
			return o
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// basketGen makes a mix of requests that exercises every reserve path:
// single lines at a location (coalesced into batches), baskets over several
// SKUs (the basket path), lines without a location (sourced by priority),
// and CODES lines (specific code rows claimed).
type basketGen struct {
	rng       *rand.Rand
	quantity  []string // QUANTITY SKUs
	codes     []string // CODES SKUs (stocked at locations[0])
	locations []string
	ttl       int
}

func newBasketGen(seed uint64, s stock, ttl int) *basketGen {
	g := &basketGen{rng: rand.New(rand.NewPCG(seed, 0xfa17)), locations: s.locations, ttl: ttl}
	g.quantity = slices.Sorted(maps.Keys(s.quantity))
	g.codes = slices.Sorted(maps.Keys(s.codes))
	return g
}

func (g *basketGen) next(checkout, key string) reserveReq {
	in := reserveReq{CheckoutID: checkout, RequestKey: key, TTLSeconds: g.ttl}
	pick := g.rng.IntN(100)
	switch {
	case pick < 40 || len(g.codes) == 0 && pick < 60:
		in.Lines = []line{{SKU: g.quantity[g.rng.IntN(len(g.quantity))], Location: g.locations[g.rng.IntN(len(g.locations))], Quantity: 1 + g.rng.IntN(3)}}
	case pick < 65:
		n := 2 + g.rng.IntN(min(2, len(g.quantity)-1))
		for _, i := range g.rng.Perm(len(g.quantity))[:n] {
			in.Lines = append(in.Lines, line{SKU: g.quantity[i], Location: g.locations[g.rng.IntN(len(g.locations))], Quantity: 1 + g.rng.IntN(2)})
		}
	case pick < 80 || len(g.codes) == 0:
		in.Lines = []line{{SKU: g.quantity[g.rng.IntN(len(g.quantity))], Quantity: 1 + g.rng.IntN(4)}}
	default:
		in.Lines = []line{{SKU: g.codes[g.rng.IntN(len(g.codes))], Location: g.locations[0], Quantity: 1 + g.rng.IntN(2)}}
		if g.rng.IntN(2) == 0 {
			in.Lines = append(in.Lines, line{SKU: g.quantity[g.rng.IntN(len(g.quantity))], Location: g.locations[0], Quantity: 1})
		}
	}
	return in
}

// storeCheck is what checkStore found.
type storeCheck struct {
	acknowledged, found, duplicates, refusedWithoutRow, rows int
	heldUnits                                                int64
	expired, halfDone                                        int
}

// checkStore verifies in SQL, after the load, what the clients were told
// against what the database holds, and the invariants a fault must not
// break. Every key in the ledger must have its final answer.
//
//   - every acknowledged hold exists exactly once under its (checkoutId,
//     requestKey), with the id and lines the client was given, matching its
//     input; a key refused with a userError has no row; no row exists that no
//     client was told about;
//   - every reservation is whole: lines, one 'reserved' ledger row and stock
//     event per line adding up to its lines, one expiry job; ended ones have
//     their end rows once;
//   - no unit is held twice: each balance's reserved equals its held lines
//     and is at most on_hand; each held CODES line holds exactly its number
//     of codes, and no code is held outside a live hold;
//   - `inventory reconcile` is empty.
func (h *harness) checkStore(ctx context.Context, l *ledger) storeCheck {
	t := h.t
	t.Helper()
	var c storeCheck
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.unclean) > 0 {
		t.Errorf("%d answers outside the contract, e.g.:\n  %s", len(l.unclean), strings.Join(l.unclean[:min(5, len(l.unclean))], "\n  "))
	}
	for k := range l.inputs {
		if _, ok := l.final[k]; !ok {
			t.Errorf("%s/%s never got an answer", k.checkout, k.request)
		}
	}

	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM (SELECT FROM reservations GROUP BY checkout_id, request_key HAVING count(*) > 1) d`).Scan(&c.duplicates); err != nil {
		t.Fatal(err)
	}
	if c.duplicates > 0 {
		t.Errorf("%d (checkoutId, requestKey) pairs name more than one reservation", c.duplicates)
	}

	type dbRes struct {
		id, status string
		lines      []line
	}
	rows, err := h.db.Query(ctx, `
		SELECT r.checkout_id, r.request_key, r.id::text, upper(r.status), s.code, lo.code, rl.quantity
		FROM reservations r
		JOIN reservation_lines rl ON rl.reservation_id = r.id
		JOIN skus s ON s.id = rl.sku_id JOIN locations lo ON lo.id = rl.location_id
		ORDER BY r.id, rl.line_no, lo.code`)
	if err != nil {
		t.Fatal(err)
	}
	db := map[rkey]*dbRes{}
	for rows.Next() {
		var k rkey
		var r dbRes
		var ln line
		if err := rows.Scan(&k.checkout, &k.request, &r.id, &r.status, &ln.SKU, &ln.Location, &ln.Quantity); err != nil {
			t.Fatal(err)
		}
		if db[k] == nil {
			db[k] = &dbRes{id: r.id, status: r.status}
		}
		db[k].lines = append(db[k].lines, ln)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM reservations`).Scan(&c.rows); err != nil {
		t.Fatal(err)
	}
	if c.rows != len(db) {
		t.Errorf("%d reservations have no lines (half-done)", c.rows-len(db))
	}

	var problems []string
	for k, o := range l.final {
		r := db[k]
		in := l.inputs[k]
		if o.kind != held {
			if r != nil {
				problems = append(problems, fmt.Sprintf("%s/%s was refused %s but reservation %s exists", k.checkout, k.request, o.code, r.id))
			} else {
				c.refusedWithoutRow++
			}
			continue
		}
		c.acknowledged++
		if r == nil {
			problems = append(problems, fmt.Sprintf("acknowledged hold %s (%s/%s) is missing", o.id, k.checkout, k.request))
			continue
		}
		c.found++
		if r.id != o.id {
			problems = append(problems, fmt.Sprintf("%s/%s: acknowledged as %s, stored as %s", k.checkout, k.request, o.id, r.id))
		}
		if !sameLines(r.lines, o.lines) {
			problems = append(problems, fmt.Sprintf("%s: lines %v acknowledged, %v stored", o.id, o.lines, r.lines))
		}
		if p := matchesInput(in, r.lines); p != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", o.id, p))
		}
		if r.status == "EXPIRED" {
			c.expired++
		}
	}
	for k, r := range db {
		if _, ok := l.final[k]; !ok {
			problems = append(problems, fmt.Sprintf("reservation %s (%s/%s) exists but no client sent that key", r.id, k.checkout, k.request))
		}
	}

	// Whole reservations: every row a reserve writes, in the numbers its
	// lines imply; ended holds have exactly one set of end rows.
	rows, err = h.db.Query(ctx, `
		SELECT r.id::text, r.status,
			(SELECT count(*) FROM reservation_lines l WHERE l.reservation_id = r.id),
			(SELECT count(DISTINCT (l.sku_id, l.location_id)) FROM reservation_lines l WHERE l.reservation_id = r.id),
			(SELECT coalesce(sum(l.quantity - l.preorder_quantity), 0) FROM reservation_lines l WHERE l.reservation_id = r.id),
			(SELECT count(*) FROM stock_movements m WHERE m.reservation_id = r.id AND m.cause = 'reserved'),
			(SELECT coalesce(sum(m.reserved_delta), 0) FROM stock_movements m WHERE m.reservation_id = r.id AND m.cause = 'reserved'),
			(SELECT count(*) FROM stock_events e WHERE e.reservation_id = r.id AND e.cause = 'reserved'),
			(SELECT count(*) FROM river_job j WHERE j.kind = 'reservation_expiry' AND j.args->>'reservation_id' = r.id::text),
			(SELECT count(*) FROM stock_movements m WHERE m.reservation_id = r.id AND m.cause IN ('confirmed', 'released', 'expired')),
			(SELECT coalesce(-sum(m.reserved_delta), 0) FROM stock_movements m WHERE m.reservation_id = r.id AND m.cause IN ('confirmed', 'released', 'expired')),
			(SELECT count(*) FROM stock_events e WHERE e.reservation_id = r.id AND e.cause IN ('confirmed', 'released', 'expired'))
		FROM reservations r`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, status string
		var lines, balances, units, resRows, resUnits, resEvents, jobs, endRows, endUnits, endEvents int64
		if err := rows.Scan(&id, &status, &lines, &balances, &units, &resRows, &resUnits, &resEvents, &jobs, &endRows, &endUnits, &endEvents); err != nil {
			t.Fatal(err)
		}
		whole := lines > 0 && resRows == lines && resUnits == units && resEvents == lines && jobs == 1
		ended := status != "held"
		once := !ended && endRows == 0 && endEvents == 0 ||
			ended && endRows == lines && endUnits == units && endEvents == balances
		if !whole || !once {
			c.halfDone++
			problems = append(problems, fmt.Sprintf("reservation %s (%s): %d lines over %d balances, %d units; 'reserved' ledger rows %d (%d units), events %d; expiry jobs %d; end ledger rows %d (%d units), end events %d",
				id, status, lines, balances, units, resRows, resUnits, resEvents, jobs, endRows, endUnits, endEvents))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// No unit held twice.
	rows, err = h.db.Query(ctx, `
		WITH h AS (
			SELECT l.sku_id, l.location_id, sum(l.quantity - l.preorder_quantity) AS q
			FROM reservation_lines l JOIN reservations r ON r.id = l.reservation_id
			WHERE r.status = 'held' GROUP BY 1, 2
		)
		SELECT s.code, lo.code, b.on_hand, b.reserved, coalesce(h.q, 0)
		FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations lo ON lo.id = b.location_id
		LEFT JOIN h ON h.sku_id = b.sku_id AND h.location_id = b.location_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var sku, loc string
		var onHand, reserved, heldLines int64
		if err := rows.Scan(&sku, &loc, &onHand, &reserved, &heldLines); err != nil {
			t.Fatal(err)
		}
		c.heldUnits += reserved
		if reserved != heldLines || reserved > onHand || reserved < 0 {
			problems = append(problems, fmt.Sprintf("balance %s@%s: on_hand %d, reserved %d, held lines %d", sku, loc, onHand, reserved, heldLines))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var badCodeLines, strayCodes int
	if err := h.db.QueryRow(ctx, `
		SELECT count(*) FROM reservation_lines l
		JOIN skus s ON s.id = l.sku_id JOIN reservations r ON r.id = l.reservation_id
		WHERE s.kind = 'codes' AND (SELECT count(*) FROM codes c WHERE c.reservation_line_id = l.id AND c.status = 'held')
		      <> CASE WHEN r.status = 'held' THEN l.quantity - l.preorder_quantity ELSE 0 END`).Scan(&badCodeLines); err != nil {
		t.Fatal(err)
	}
	if err := h.db.QueryRow(ctx, `
		SELECT count(*) FROM codes c
		LEFT JOIN reservation_lines l ON l.id = c.reservation_line_id
		LEFT JOIN reservations r ON r.id = l.reservation_id
		WHERE c.status = 'held' AND (r.status IS DISTINCT FROM 'held' OR l.sku_id <> c.sku_id OR l.location_id <> c.location_id)`).Scan(&strayCodes); err != nil {
		t.Fatal(err)
	}
	if badCodeLines > 0 || strayCodes > 0 {
		problems = append(problems, fmt.Sprintf("codes: %d CODES lines hold the wrong number of codes, %d codes held outside a live hold", badCodeLines, strayCodes))
	}
	if len(problems) > 0 {
		t.Errorf("%d problems (%d reservations not whole or not ended once), e.g.:\n  %s", len(problems), c.halfDone, strings.Join(problems[:min(10, len(problems))], "\n  "))
	}
	h.reconcile()
	return c
}

func sameLines(a, b []line) bool {
	key := func(ls []line) []string {
		var out []string
		for _, l := range ls {
			out = append(out, fmt.Sprintf("%s@%s×%d", l.SKU, l.Location, l.Quantity))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// matchesInput says how stored lines differ from the request ("" if they
// do not): per SKU the quantities add up to the input's, at its location
// if it named one.
func matchesInput(in reserveReq, stored []line) string {
	want := map[string]int{}
	at := map[string]string{}
	for _, l := range in.Lines {
		want[l.SKU] += l.Quantity
		at[l.SKU] = l.Location
	}
	got := map[string]int{}
	for _, l := range stored {
		got[l.SKU] += l.Quantity
		if at[l.SKU] != "" && at[l.SKU] != l.Location {
			return fmt.Sprintf("%s held at %s, asked at %s", l.SKU, l.Location, at[l.SKU])
		}
	}
	if !maps.Equal(want, got) {
		return fmt.Sprintf("held %v, asked %v", got, want)
	}
	return ""
}

// load is clients reserving in the background (startLoad).
type load struct {
	stop, done chan struct{}
	cancel     context.CancelFunc
	once       sync.Once
}

// startLoad starts n clients: each sends fresh requests from a generator
// of its own (checkout ids prefix-<client>-<n>) to urls()[client], retrying
// each with the same key and inputs until it is answered, with pause
// between requests. finish stops them gracefully; abort (deferred by the
// tests, for when they fail early) cancels what is in flight.
func (h *harness) startLoad(ctx context.Context, l *ledger, n int, prefix string, s stock, ttl int, urls func() []string, pause time.Duration) *load {
	ctx, cancel := context.WithCancel(ctx)
	ld := &load{stop: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			gen := newBasketGen(uint64(c)+1, s, ttl)
			for i := 0; ; i++ {
				select {
				case <-ld.stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				in := gen.next(fmt.Sprintf("%s-%d-%d", prefix, c, i), "k")
				h.untilAnswered(ctx, l, urls, c, h.service, in, time.Now().Add(60*time.Second))
				time.Sleep(pause)
			}
		})
	}
	go func() {
		wg.Wait()
		close(ld.done)
	}()
	return ld
}

// finish lets every client finish its current request, then stops them.
func (ld *load) finish() {
	ld.once.Do(func() { close(ld.stop) })
	<-ld.done
	ld.cancel()
}

// abort cancels the requests in flight and waits for the clients to stop.
func (ld *load) abort() {
	ld.cancel()
	ld.finish()
}

// holdsSummary words a storeCheck for the report.
func (c storeCheck) String() string {
	return fmt.Sprintf("%d holds acknowledged, %d found, %d duplicates, %d half-done, %d refused keys without a row, %d units held",
		c.acknowledged, c.found, c.duplicates, c.halfDone, c.refusedWithoutRow, c.heldUnits)
}
