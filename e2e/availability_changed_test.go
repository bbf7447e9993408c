package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const availabilityChangedSub = `subscription($skus: [String!]!, $locations: [String!]) { availabilityChanged(skus: $skus, locations: $locations) { sku available onHand reserved preorderAvailable locations { location onHand reserved } } }`

// liveAvailability is the part of Availability the tests read.
type liveAvailability struct {
	SKU       string `json:"sku"`
	Available int    `json:"available"`
	OnHand    int    `json:"onHand"`
	Reserved  int    `json:"reserved"`
}

// timedAvailability is one message and when it arrived.
type timedAvailability struct {
	liveAvailability
	at time.Time
}

// sqlAvailability is the SKU's balance at AMS as the database has it.
func (ts *testServer) sqlAvailability(sku string) liveAvailability {
	ts.t.Helper()
	a := liveAvailability{SKU: sku}
	if err := ts.db.QueryRow(context.Background(), `SELECT b.on_hand, b.reserved FROM balances b JOIN skus s ON s.id = b.sku_id
		JOIN locations l ON l.id = b.location_id WHERE s.code = $1 AND l.code = 'AMS'`, sku).Scan(&a.OnHand, &a.Reserved); err != nil {
		ts.t.Fatal(err)
	}
	a.Available = a.OnHand - a.Reserved
	return a
}

// wsAvailability reads a socket's availabilityChanged messages into a
// channel from a goroutine of its own (so each is timed as it arrives),
// closed at the first frame that is not one or when the socket ends.
func wsAvailability(c *wsClient) <-chan timedAvailability {
	out := make(chan timedAvailability, 1000)
	go func() {
		defer close(out)
		for {
			m, err := c.next(time.Minute)
			if err != nil || m.Type != "next" && m.Type != "data" {
				return
			}
			var p struct {
				Data   struct{ AvailabilityChanged liveAvailability }
				Errors []any
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil || len(p.Errors) > 0 {
				return
			}
			out <- timedAvailability{p.Data.AvailabilityChanged, time.Now()}
		}
	}()
	return out
}

// sseAvailability reads an SSE availabilityChanged stream's messages into a
// channel (closed when the stream ends).
func sseAvailability(t *testing.T, ctx context.Context, url string, vars map[string]any) <-chan timedAvailability {
	t.Helper()
	resp := openSSE(t, ctx, url, "", availabilityChangedSub, vars)
	out := make(chan timedAvailability, 1000)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "next":
				var p struct {
					Data   struct{ AvailabilityChanged liveAvailability }
					Errors []any
				}
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &p); err != nil || len(p.Errors) > 0 {
					return
				}
				out <- timedAvailability{p.Data.AvailabilityChanged, time.Now()}
			}
		}
	}()
	return out
}

// reserveBurst makes n one-unit reserves of sku with the service key from
// workers goroutines and returns when all are answered.
func (ts *testServer) reserveBurst(sku string, n, workers int) {
	ts.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	per := n / workers
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				r, err := gqlTo(ts.url, ts.service, `mutation($c: String!, $s: String!) { reserve(input: {checkoutId: $c, requestKey: "k", lines: [{sku: $s, quantity: 1}]}) { userErrors { code } } }`,
					map[string]any{"c": fmt.Sprintf("burst-%d-%d", w, i), "s": sku})
				if err == nil && (len(r.Errors) > 0 || !strings.Contains(string(r.Data["reserve"]), `"userErrors":[]`)) {
					err = fmt.Errorf("reserve: %+v %s", r.Errors, r.Data["reserve"])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		ts.t.Fatal(err)
	}
}

// checkConflated holds one subscriber's updates (after its first message)
// to the contract: available only falls (the burst only reserves, so a
// rise would be an older value after a newer one), the last one is the
// database's final value, and there are at most as many as push intervals
// passed (plus one for the tick the burst started in).
func checkConflated(t *testing.T, name string, updates []timedAvailability, start time.Time, interval time.Duration, final liveAvailability) {
	t.Helper()
	if len(updates) == 0 {
		t.Fatalf("%s: no update after the burst", name)
	}
	for i := 1; i < len(updates); i++ {
		if updates[i].Available >= updates[i-1].Available {
			t.Fatalf("%s: update %d has available %d after %d: a value went backwards or repeated", name, i, updates[i].Available, updates[i-1].Available)
		}
	}
	last := updates[len(updates)-1]
	if last.liveAvailability != final {
		t.Fatalf("%s: last update %+v, the database has %+v", name, last.liveAvailability, final)
	}
	elapsed := last.at.Sub(start)
	bound := int(elapsed/interval) + 2
	if len(updates) > bound {
		t.Fatalf("%s: %d updates in %s, want at most %d (one per SKU per %s)", name, len(updates), elapsed.Round(time.Millisecond), bound, interval)
	}
	minGap := time.Hour
	for i := 1; i < len(updates); i++ {
		minGap = min(minGap, updates[i].at.Sub(updates[i-1].at))
	}
	// Ticks fall on wall-clock multiples of the interval (shared by every
	// subscription), so an update's delay after its tick is how far past a
	// multiple it arrived.
	var delays []time.Duration
	for _, u := range updates {
		delays = append(delays, u.at.Sub(u.at.Truncate(interval)))
	}
	slices.Sort(delays)
	t.Logf("%s: 1000 changes in %s → %d updates (bound %d), smallest gap %s; tick to delivery p50 %s, max %s", name,
		elapsed.Round(time.Millisecond), len(updates), bound, minGap.Round(time.Millisecond),
		delays[len(delays)/2].Round(100*time.Microsecond), delays[len(delays)-1].Round(100*time.Microsecond))
}

// TestAvailabilityChangedBurst: anonymous product pages (graphql-transport-ws,
// legacy graphql-ws and SSE) first get each SKU's current value, equal to
// the database's; under a burst of 1,000 reserves each gets a bounded
// number of updates whose values only fall, the last equal to the
// database's; a watched SKU that does not change is not sent again.
func TestAvailabilityChangedBurst(t *testing.T) {
	t.Parallel()
	const interval = 250 * time.Millisecond // the default
	ts := setup(t)
	ts.seed("DROP", 1000)
	ts.seed("CALM", 5)
	vars := map[string]any{"skus": []string{"DROP", "CALM", "DROP"}}

	page := dialWS(t, ts.url, "", false)
	page.ack()
	page.subscribe("1", availabilityChangedSub, vars)
	legacy := dialWS(t, ts.url, "", true)
	legacy.ack()
	legacy.subscribe("1", availabilityChangedSub, map[string]any{"skus": []string{"DROP"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sse := sseAvailability(t, ctx, ts.url, map[string]any{"skus": []string{"DROP"}})

	pageC, legacyC := wsAvailability(page), wsAvailability(legacy)
	recv := func(name string, c <-chan timedAvailability) (timedAvailability, bool) {
		select {
		case a, ok := <-c:
			return a, ok
		case <-time.After(30 * time.Second):
			t.Logf("%s: nothing for 30s", name)
			return timedAvailability{}, false
		}
	}
	first := func(name string, c <-chan timedAvailability, want liveAvailability) {
		if got, ok := recv(name, c); !ok || got.liveAvailability != want {
			t.Fatalf("%s: first message %+v, the database has %+v", name, got.liveAvailability, want)
		}
	}
	// First: one message per SKU, in the order asked, as the database has it.
	first("graphql-transport-ws", pageC, ts.sqlAvailability("DROP"))
	first("graphql-transport-ws", pageC, ts.sqlAvailability("CALM"))
	first("graphql-ws", legacyC, ts.sqlAvailability("DROP"))
	first("SSE", sse, ts.sqlAvailability("DROP"))

	start := time.Now()
	ts.reserveBurst("DROP", 1000, 8)
	burst := time.Since(start)
	final := ts.sqlAvailability("DROP")
	if final.Available != 0 || final.Reserved != 1000 {
		t.Fatalf("after the burst the database has %+v", final)
	}

	readUntilFinal := func(name string, c <-chan timedAvailability) []timedAvailability {
		var got []timedAvailability
		for {
			a, ok := recv(name, c)
			if !ok {
				t.Fatalf("%s: ended after %d updates, the last %+v", name, len(got), got)
			}
			if a.SKU != "DROP" {
				t.Fatalf("%s: %s was sent again though it did not change: %+v", name, a.SKU, a)
			}
			got = append(got, a)
			if a.liveAvailability == final {
				return got
			}
		}
	}
	pageUpdates := readUntilFinal("graphql-transport-ws", pageC)
	legacyUpdates := readUntilFinal("graphql-ws", legacyC)
	sseUpdates := readUntilFinal("SSE", sse)
	t.Logf("burst of 1000 reserves took %s; the final value reached the page %s after the last reserve was answered",
		burst.Round(time.Millisecond), pageUpdates[len(pageUpdates)-1].at.Sub(start.Add(burst)).Round(time.Millisecond))
	checkConflated(t, "graphql-transport-ws", pageUpdates, start, interval, final)
	checkConflated(t, "graphql-ws", legacyUpdates, start, interval, final)
	checkConflated(t, "SSE", sseUpdates, start, interval, final)
	if len(pageUpdates) < 2 && burst > 4*interval {
		t.Fatalf("a burst of %s gave one update: nothing was pushed while it ran", burst)
	}
	// Nothing changes any more: nothing more is sent (one more read would
	// have to wait past a few intervals).
	select {
	case a, ok := <-sse:
		if ok {
			t.Fatalf("SSE: sent %+v after the final value", a)
		}
	case a := <-pageC:
		t.Fatalf("graphql-transport-ws: sent %+v after the final value", a)
	case <-time.After(3 * interval):
	}
}

// TestAvailabilityChangedAnonymousCaps: without a token one client address
// may hold INVENTORY_ANONYMOUS_MAX_SOCKETS sockets (one more is closed with
// 4429 at connection_init) and INVENTORY_ANONYMOUS_MAX_SUBSCRIPTIONS live
// subscriptions over all its sockets and SSE streams (one more is refused
// with BAD_REQUEST naming the setting); a completed subscription or closed
// socket gives its place back; a key's sockets are not counted.
func TestAvailabilityChangedAnonymousCaps(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_ANONYMOUS_MAX_SOCKETS": "2", "INVENTORY_ANONYMOUS_MAX_SUBSCRIPTIONS": "3"})
	ts.seed("CAP", 3)
	vars := map[string]any{"skus": []string{"CAP"}}
	a := dialWS(t, ts.url, "", false)
	a.ack()
	b := dialWS(t, ts.url, "", true)
	b.ack()
	if code, reason := dialWS(t, ts.url, "", false).closeCode(5 * time.Second); code != 4429 || !strings.Contains(reason, "INVENTORY_ANONYMOUS_MAX_SOCKETS") {
		t.Fatalf("third anonymous socket: closed with %d %q, want 4429 naming INVENTORY_ANONYMOUS_MAX_SOCKETS", code, reason)
	}
	admin := dialWS(t, ts.url, ts.admin, false)
	admin.ack()
	admin.subscribe("1", availabilityChangedSub, vars)
	if got := admin.outcome("1"); got != "" {
		t.Fatalf("admin socket: %s", got)
	}

	a.subscribe("1", availabilityChangedSub, vars)
	a.subscribe("2", availabilityChangedSub, vars)
	for _, id := range []string{"1", "2"} {
		if got := a.outcome(id); got != "" {
			t.Fatalf("subscription %s: %s", id, got)
		}
	}
	b.subscribe("3", availabilityChangedSub, vars)
	if got := b.outcome("3"); got != "" {
		t.Fatalf("subscription 3: %s", got)
	}
	b.subscribe("4", availabilityChangedSub, vars)
	if got := b.outcome("4"); !strings.Contains(got, "BAD_REQUEST") || !strings.Contains(got, "INVENTORY_ANONYMOUS_MAX_SUBSCRIPTIONS") {
		t.Fatalf("fourth anonymous subscription: %q, want BAD_REQUEST naming INVENTORY_ANONYMOUS_MAX_SUBSCRIPTIONS", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := openSSE(t, ctx, ts.url, "", availabilityChangedSub, vars)
	body, _ := io.ReadAll(resp.Body) // the refusal ends the stream
	if !strings.Contains(string(body), "INVENTORY_ANONYMOUS_MAX_SUBSCRIPTIONS") {
		t.Fatalf("anonymous SSE past the cap: %s", body)
	}

	// A completed subscription gives its place back (once the server has
	// seen the complete: retried until then).
	a.send(wsMessage{ID: "1", Type: "complete"})
	for i := 5; ; i++ {
		id := fmt.Sprint(i)
		b.subscribe(id, availabilityChangedSub, vars)
		if got := b.outcome(id); got == "" {
			break
		} else if i > 50 {
			t.Fatalf("subscription after one completed: %s", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A closed socket gives its place back.
	_ = a.conn.Close(1000, "")
	waitUntil(t, 5*time.Second, "the closed socket's place", func() bool {
		c := dialWS(t, ts.url, "", false)
		m, err := c.next(time.Second)
		return err == nil && m.Type == "connection_ack"
	})
}

// TestAvailabilityChangedArguments: an unknown SKU (null in availability)
// refuses the subscription with BAD_REQUEST, userErrorCode UNKNOWN_SKU, naming
// it; more than 100 SKUs or none is BAD_REQUEST; the socket stays open.
func TestAvailabilityChangedArguments(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("REAL", 1)
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprint("S", i)
	}
	c := dialWS(t, ts.url, "", false)
	c.ack()
	for i, tc := range []struct {
		skus []string
		want []string
	}{
		{[]string{"REAL", "NOPE"}, []string{"BAD_REQUEST", "UNKNOWN_SKU", "NOPE"}},
		{many, []string{"BAD_REQUEST", "at most 100"}},
		{[]string{}, []string{"BAD_REQUEST", "at least one"}},
	} {
		id := fmt.Sprint(i + 1)
		c.subscribe(id, availabilityChangedSub, map[string]any{"skus": tc.skus})
		m, err := c.next(5 * time.Second)
		for err == nil && m.Type == "complete" { // of the one before
			m, err = c.next(5 * time.Second)
		}
		if err != nil || m.ID != id || m.Type != "error" && m.Type != "next" {
			t.Fatalf("%d SKUs: %+v %v", len(tc.skus), m, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(m.Payload), w) {
				t.Fatalf("%d SKUs: %s, want %q in it", len(tc.skus), m.Payload, w)
			}
		}
	}
	c.subscribe("9", availabilityChangedSub, map[string]any{"skus": []string{"REAL"}})
	if got := c.outcome("9"); got != "" {
		t.Fatalf("after the refusals: %s", got)
	}
}
