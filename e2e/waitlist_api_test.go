package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const joinWaitlistMutation = `mutation($in: JoinWaitlistInput!) { joinWaitlist(input: $in) {
	entry { id checkoutId requestKey sku location quantity status position joinedAt expiresAt reservation { id status } }
	replayed userErrors { code message field available sku } } }`

const leaveWaitlistMutation = `mutation($id: ID!) { leaveWaitlist(id: $id) {
	entry { id status position } replayed userErrors { code message field } } }`

const waitlistEntryQuery = `query($id: ID!) { waitlistEntry(id: $id) { id checkoutId status position reservation { id status } } }`

const waitlistChangedSub = `subscription($c: String!) { waitlistChanged(checkoutId: $c) { id checkoutId sku status position reservation { id status requestKey } } }`

type waitlistView struct {
	ID          string  `json:"id"`
	CheckoutID  string  `json:"checkoutId"`
	RequestKey  string  `json:"requestKey"`
	Sku         string  `json:"sku"`
	Location    *string `json:"location"`
	Quantity    int     `json:"quantity"`
	Status      string  `json:"status"`
	Position    *int    `json:"position"`
	JoinedAt    time.Time
	ExpiresAt   time.Time
	Reservation *struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		RequestKey string `json:"requestKey"`
	} `json:"reservation"`
}

type waitlistPayload struct {
	Entry      *waitlistView
	Replayed   bool
	UserErrors []struct {
		Code      string
		Message   string
		Field     []string
		Available *int
		Sku       *string
	}
}

func (p waitlistPayload) code() string {
	if len(p.UserErrors) == 0 {
		return ""
	}
	return p.UserErrors[0].Code
}

// joinVars is joinWaitlist's input for q units of sku at any location.
func joinVars(checkout, key, sku string, q int) map[string]any {
	return map[string]any{"in": map[string]any{"checkoutId": checkout, "requestKey": key, "sku": sku, "quantity": q}}
}

// waitlistCall sends a joinWaitlist or leaveWaitlist to url as bearer and
// decodes its payload; r has any top-level errors.
func waitlistCall(t *testing.T, url, bearer, query, field string, vars map[string]any) (waitlistPayload, gqlResponse) {
	t.Helper()
	r, err := gqlTo(url, bearer, query, vars)
	if err != nil {
		t.Fatal(err)
	}
	var p waitlistPayload
	if raw := r.Data[field]; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("decode %s: %v (%s)", field, err, raw)
		}
	}
	return p, r
}

func joinAs(t *testing.T, url, bearer string, vars map[string]any) (waitlistPayload, gqlResponse) {
	t.Helper()
	return waitlistCall(t, url, bearer, joinWaitlistMutation, "joinWaitlist", vars)
}

func leaveAs(t *testing.T, url, bearer, id string) (waitlistPayload, gqlResponse) {
	t.Helper()
	return waitlistCall(t, url, bearer, leaveWaitlistMutation, "leaveWaitlist", map[string]any{"id": id})
}

// mustJoinAs joins and fails the test unless a new entry is WAITING.
func mustJoinAs(t *testing.T, url, bearer string, vars map[string]any) waitlistView {
	t.Helper()
	p, r := joinAs(t, url, bearer, vars)
	if len(r.Errors) > 0 || p.Entry == nil || p.Replayed || p.Entry.Status != "WAITING" {
		t.Fatalf("join %v: %+v %+v", vars, p, r.Errors)
	}
	return *p.Entry
}

// soldOutHTTP stocks sku with n units at AMS and holds them all for
// cart-sold, returning that hold's id.
func (ts *testServer) soldOutHTTP(sku string, n int) string {
	ts.t.Helper()
	ts.seed(sku, n)
	p := reserveAs(ts.t, ts.url, ts.service, "cart-sold", "all-"+sku, sku, n, 0)
	if p.Reservation == nil {
		ts.t.Fatalf("reserve all of %s: %+v", sku, p)
	}
	return p.Reservation.ID
}

// TestWaitlistJoinOverHTTP: joinWaitlist through GraphQL — a new entry
// WAITING at position 0, the same request again a replay of it, the same key
// with other inputs IDEMPOTENCY_KEY_REUSED, a second key for the same SKU
// ALREADY_EXISTS, a SKU with enough free INVALID_INPUT with the available
// count; waitlistEntry reads positions, leaveWaitlist ends it. Refusals write
// nothing (counted in SQL).
func TestWaitlistJoinOverHTTP(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.soldOutHTTP("DROP", 2)
	ts.seed("FREE", 5)

	first := mustJoinAs(t, ts.url, ts.service, joinVars("cart-A", "k1", "DROP", 1))
	if first.CheckoutID != "cart-A" || first.RequestKey != "k1" || first.Sku != "DROP" || first.Location != nil || first.Quantity != 1 ||
		first.Position == nil || *first.Position != 0 || first.Reservation != nil {
		t.Fatalf("first entry: %+v", first)
	}
	if ttl := first.ExpiresAt.Sub(first.JoinedAt); ttl < 3599*time.Second || ttl > 3601*time.Second {
		t.Fatalf("default entry TTL %s, want 1h", ttl)
	}
	again, r := joinAs(t, ts.url, ts.service, joinVars("cart-A", "k1", "DROP", 1))
	if len(r.Errors) > 0 || !again.Replayed || again.Entry == nil || again.Entry.ID != first.ID {
		t.Fatalf("replay: %+v %+v", again, r.Errors)
	}
	for _, c := range []struct {
		name, code string
		vars       map[string]any
		field      string
	}{
		{"same key, other quantity", "IDEMPOTENCY_KEY_REUSED", joinVars("cart-A", "k1", "DROP", 2), "requestKey"},
		{"second entry for the SKU", "ALREADY_EXISTS", joinVars("cart-A", "k2", "DROP", 1), "sku"},
		{"enough free", "INVALID_INPUT", joinVars("cart-A", "k3", "FREE", 2), "quantity"},
		{"unknown SKU", "UNKNOWN_SKU", joinVars("cart-A", "k4", "NOPE", 1), "sku"},
		{"quantity 0", "INVALID_INPUT", joinVars("cart-A", "k5", "DROP", 0), "quantity"},
	} {
		p, r := joinAs(t, ts.url, ts.service, c.vars)
		if len(r.Errors) > 0 || p.Entry != nil || p.code() != c.code || strings.Join(p.UserErrors[0].Field, ".") != "input."+c.field {
			t.Fatalf("%s: %+v %+v, want userError %s on input.%s", c.name, p, r.Errors, c.code, c.field)
		}
		if c.code == "INVALID_INPUT" && c.field == "quantity" && c.vars["in"].(map[string]any)["sku"] == "FREE" &&
			(p.UserErrors[0].Available == nil || *p.UserErrors[0].Available != 5) {
			t.Fatalf("%s: available %v, want 5", c.name, p.UserErrors[0].Available)
		}
	}
	ttl := joinVars("cart-A", "k6", "DROP", 1)
	ttl["in"].(map[string]any)["ttlSeconds"] = 86401
	if p, _ := joinAs(t, ts.url, ts.service, ttl); p.code() != "INVALID_INPUT" {
		t.Fatalf("ttlSeconds 86401: %+v", p)
	}
	second := mustJoinAs(t, ts.url, ts.service, joinVars("cart-B", "k1", "DROP", 1))
	if *second.Position != 1 {
		t.Fatalf("second entry's position %d, want 1", *second.Position)
	}
	if n := ts.count(`SELECT count(*) FROM waitlist_entries`); n != 2 {
		t.Fatalf("%d entries after the refusals, want 2", n)
	}

	var got *waitlistView
	ts.mustData(ts.gql(ts.service, waitlistEntryQuery, map[string]any{"id": first.ID}), "waitlistEntry", &got)
	if got == nil || got.Status != "WAITING" || *got.Position != 0 {
		t.Fatalf("waitlistEntry: %+v", got)
	}
	left, r := leaveAs(t, ts.url, ts.service, first.ID)
	if len(r.Errors) > 0 || left.Entry == nil || left.Entry.Status != "LEFT" || left.Entry.Position != nil || left.code() != "" {
		t.Fatalf("leave: %+v %+v", left, r.Errors)
	}
	ts.mustData(ts.gql(ts.service, waitlistEntryQuery, map[string]any{"id": second.ID}), "waitlistEntry", &got)
	if *got.Position != 0 {
		t.Fatalf("second entry's position after the first left: %d", *got.Position)
	}
	if again, _ := leaveAs(t, ts.url, ts.service, first.ID); again.Entry == nil || again.Entry.Status != "LEFT" {
		t.Fatalf("second leave: %+v", again)
	}
	if p, _ := leaveAs(t, ts.url, ts.service, "not-an-id"); p.code() != "NOT_FOUND" {
		t.Fatalf("leave of an unknown id: %+v", p)
	}
	ts.mustData(ts.gql(ts.service, waitlistEntryQuery, map[string]any{"id": "00000000-0000-0000-0000-000000000000"}), "waitlistEntry", &got)
	if got != nil {
		t.Fatalf("unknown entry: %+v", got)
	}
	if n := ts.count(`SELECT count(*) FROM waitlist_entries WHERE status = 'left'`); n != 1 {
		t.Fatalf("%d entries left, want 1", n)
	}
}

// TestWaitlistAuth: a checkout token joins, reads, leaves and watches only
// its own checkout's entries — another's is FORBIDDEN to join for, null to
// read, NOT_FOUND to leave (and stays waiting), 4403 to subscribe to; an
// anonymous caller is UNAUTHENTICATED everywhere.
func TestWaitlistAuth(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.soldOutHTTP("DROP", 1)
	tokA := ts.checkoutToken("cart-A")

	if _, r := joinAs(t, ts.url, "", joinVars("cart-A", "k", "DROP", 1)); r.errorCode() != "UNAUTHENTICATED" {
		t.Fatalf("anonymous join: %+v", r)
	}
	if _, r := joinAs(t, ts.url, tokA, joinVars("cart-B", "k", "DROP", 1)); r.errorCode() != "FORBIDDEN" {
		t.Fatalf("checkout A joining for B: %+v", r)
	}
	own := mustJoinAs(t, ts.url, tokA, joinVars("cart-A", "k", "DROP", 1))
	other := mustJoinAs(t, ts.url, ts.service, joinVars("cart-B", "k", "DROP", 1))

	var got *waitlistView
	ts.mustData(ts.gql(tokA, waitlistEntryQuery, map[string]any{"id": own.ID}), "waitlistEntry", &got)
	if got == nil || got.ID != own.ID {
		t.Fatalf("A reading its own entry: %+v", got)
	}
	ts.mustData(ts.gql(tokA, waitlistEntryQuery, map[string]any{"id": other.ID}), "waitlistEntry", &got)
	if got != nil {
		t.Fatalf("A reading B's entry: %+v, want null", got)
	}
	if r := ts.gql("", waitlistEntryQuery, map[string]any{"id": own.ID}); r.errorCode() != "UNAUTHENTICATED" {
		t.Fatalf("anonymous read: %+v", r)
	}
	if p, r := leaveAs(t, ts.url, tokA, other.ID); len(r.Errors) > 0 || p.code() != "NOT_FOUND" || p.Entry != nil {
		t.Fatalf("A leaving B's entry: %+v %+v", p, r.Errors)
	}
	if _, r := leaveAs(t, ts.url, "", own.ID); r.errorCode() != "UNAUTHENTICATED" {
		t.Fatalf("anonymous leave: %+v", r)
	}
	if n := ts.count(`SELECT count(*) FROM waitlist_entries WHERE status = 'waiting'`); n != 2 {
		t.Fatalf("%d entries waiting, want both", n)
	}
	if n := ts.count(`SELECT count(*) FROM waitlist_entries WHERE checkout_id = 'cart-B'`); n != 1 {
		t.Fatalf("%d entries for cart-B, want the service's one", n)
	}

	c := dialWS(t, ts.url, tokA, false)
	c.ack()
	c.subscribe("1", waitlistChangedSub, map[string]any{"c": "cart-B"})
	if code, reason := c.closeCode(5 * time.Second); code != 4403 {
		t.Fatalf("A on B's waitlistChanged: %d %q, want 4403", code, reason)
	}
	c = dialWS(t, ts.url, "", false)
	c.ack()
	c.subscribe("1", waitlistChangedSub, map[string]any{"c": "cart-A"})
	if code, reason := c.closeCode(5 * time.Second); code != 4401 {
		t.Fatalf("anonymous waitlistChanged: %d %q, want 4401", code, reason)
	}
}

// TestWaitlistCheckoutTokenLimits: a checkout token's entry is bound by
// INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU (what it holds of the SKU plus the
// entry) and INVENTORY_CHECKOUT_MAX_WAITLIST_TTL (LIMIT_EXCEEDED, with what
// is still allowed), and without ttlSeconds it waits that maximum when it is
// below the default hour; the service key is bound by neither.
func TestWaitlistCheckoutTokenLimits(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU": "3", "INVENTORY_CHECKOUT_MAX_WAITLIST_TTL": "60s"})
	ts.soldOutHTTP("DROP", 1)
	ts.seed("HELD", 1)
	tok := ts.checkoutToken("cart-A")
	if p := reserveAs(t, ts.url, tok, "cart-A", "mine", "HELD", 1, 0); p.Reservation == nil {
		t.Fatalf("reserve: %+v", p)
	}

	p, r := joinAs(t, ts.url, tok, joinVars("cart-A", "k1", "DROP", 4))
	if len(r.Errors) > 0 || p.code() != "LIMIT_EXCEEDED" || p.UserErrors[0].Available == nil || *p.UserErrors[0].Available != 3 {
		t.Fatalf("4 units past a limit of 3: %+v %+v", p, r.Errors)
	}
	// It holds one unit of HELD: two more may wait, not three.
	if p, _ := joinAs(t, ts.url, tok, joinVars("cart-A", "k2", "HELD", 3)); p.code() != "LIMIT_EXCEEDED" || *p.UserErrors[0].Available != 2 {
		t.Fatalf("3 more of a SKU it holds 1 of: %+v", p)
	}
	long := joinVars("cart-A", "k3", "DROP", 1)
	long["in"].(map[string]any)["ttlSeconds"] = 61
	if p, _ := joinAs(t, ts.url, tok, long); p.code() != "LIMIT_EXCEEDED" || strings.Join(p.UserErrors[0].Field, ".") != "input.ttlSeconds" {
		t.Fatalf("ttlSeconds 61 past 60: %+v", p)
	}
	if n := ts.count(`SELECT count(*) FROM waitlist_entries`); n != 0 {
		t.Fatalf("%d entries after refusals", n)
	}
	e := mustJoinAs(t, ts.url, tok, joinVars("cart-A", "k4", "DROP", 3))
	if ttl := e.ExpiresAt.Sub(e.JoinedAt); ttl < 59*time.Second || ttl > 61*time.Second {
		t.Fatalf("a checkout token's default TTL: %s, want the 60s maximum", ttl)
	}
	svc := joinVars("cart-S", "k", "DROP", 50)
	svc["in"].(map[string]any)["ttlSeconds"] = 7200
	mustJoinAs(t, ts.url, ts.service, svc)
}

// nextSSE reads the next "next" event of an SSE subscription and decodes
// its data's field into v.
func nextSSE(t *testing.T, sc *bufio.Scanner, field string, v any) {
	t.Helper()
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "next":
			var p struct{ Data map[string]json.RawMessage }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &p); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(p.Data[field], v); err != nil {
				t.Fatalf("decode %s: %v", field, err)
			}
			return
		}
	}
	t.Fatalf("SSE ended waiting for %s: %v", field, sc.Err())
}

// TestWaitlistOfferPushedAcrossInstances: subscribers on instance B — to
// waitlistChanged over graphql-transport-ws and SSE, to reservationChanged
// over graphql-ws — hear of each change made on instance A: the join
// (WAITING), the offer made when A releases the units (OFFERED, with the
// HELD reservation it was handed, which reservationChanged pushes too), and
// a second entry's leave (LEFT).
func TestWaitlistOfferPushedAcrossInstances(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	b, _ := ts.startInstance()
	hold := ts.soldOutHTTP("DROP", 1)
	ts.soldOutHTTP("DROP2", 1)
	tok := ts.checkoutToken("cart-W")

	wl := dialWS(t, b, tok, false)
	wl.ack()
	wl.subscribe("1", waitlistChangedSub, map[string]any{"c": "cart-W"})
	rc := dialWS(t, b, tok, true)
	rc.ack()
	rc.subscribe("1", `subscription($c: String!) { reservationChanged(checkoutId: $c) { id status requestKey lines { sku quantity } } }`, map[string]any{"c": "cart-W"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sse := bufio.NewScanner(openSSE(t, ctx, b, tok, waitlistChangedSub, map[string]any{"c": "cart-W"}).Body)
	time.Sleep(300 * time.Millisecond) // the subscriptions start from now

	// Each push should come from the notification, well before the
	// WaitlistFeedPoll fallback (5 s).
	const soon = 3 * time.Second
	expect := func(what, status string, since time.Time) waitlistView {
		t.Helper()
		var ws, viaSSE waitlistView
		wl.data("waitlistChanged", &ws, 10*time.Second)
		nextSSE(t, sse, "waitlistChanged", &viaSSE)
		took := time.Since(since)
		t.Logf("%s pushed after %s", what, took.Round(time.Millisecond))
		if ws.Status != status || viaSSE.Status != status || ws.ID != viaSSE.ID || ws.CheckoutID != "cart-W" {
			t.Fatalf("%s: pushed %+v over WebSocket, %+v over SSE, want %s", what, ws, viaSSE, status)
		}
		if took > soon {
			t.Fatalf("%s took %s to push, want under %s", what, took, soon)
		}
		return ws
	}

	start := time.Now()
	e := mustJoinAs(t, ts.url, tok, joinVars("cart-W", "k1", "DROP", 1))
	if got := expect("join", "WAITING", start); got.ID != e.ID || got.Position == nil || *got.Position != 0 || got.Reservation != nil {
		t.Fatalf("join pushed %+v", got)
	}

	start = time.Now()
	if _, err := gqlTo(ts.url, ts.service, `mutation($id: ID!) { releaseReservation(input: {id: $id}) { userErrors { code } } }`, map[string]any{"id": hold}); err != nil {
		t.Fatal(err)
	}
	offered := expect("offer", "OFFERED", start)
	if offered.ID != e.ID || offered.Position != nil || offered.Reservation == nil || offered.Reservation.Status != "HELD" ||
		offered.Reservation.RequestKey != "waitlist:"+e.ID {
		t.Fatalf("offer pushed %+v", offered)
	}
	var res struct {
		ID, Status, RequestKey string
		Lines                  []struct {
			Sku      string
			Quantity int
		}
	}
	rc.data("reservationChanged", &res, soon)
	if res.ID != offered.Reservation.ID || res.Status != "HELD" || len(res.Lines) != 1 || res.Lines[0].Sku != "DROP" || res.Lines[0].Quantity != 1 {
		t.Fatalf("reservationChanged pushed %+v, want the offered hold %s", res, offered.Reservation.ID)
	}
	if n := ts.count(`SELECT count(*) FROM reservations WHERE checkout_id = 'cart-W' AND status = 'held' AND id = '` + res.ID + `'`); n != 1 {
		t.Fatalf("the offered hold is not HELD for cart-W in the table")
	}

	start = time.Now()
	second := mustJoinAs(t, ts.url, tok, joinVars("cart-W", "k2", "DROP2", 1))
	if got := expect("second join", "WAITING", start); got.ID != second.ID {
		t.Fatalf("second join pushed %+v", got)
	}
	start = time.Now()
	if p, r := leaveAs(t, ts.url, tok, second.ID); p.Entry == nil || p.Entry.Status != "LEFT" {
		t.Fatalf("leave: %+v %+v", p, r.Errors)
	}
	if got := expect("leave", "LEFT", start); got.ID != second.ID {
		t.Fatalf("leave pushed %+v", got)
	}
}

// TestWaitlistChangedEndsAtShutdown: when an instance shuts down, its
// waitlistChanged subscriptions end as the stock event ones do: a WebSocket
// closes with 1012 (service restart), an SSE stream ends, and neither holds
// the shutdown up.
func TestWaitlistChangedEndsAtShutdown(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	other, stop := ts.startInstance()
	tok := ts.checkoutToken("cart-W")
	c := dialWS(t, other, tok, false)
	c.ack()
	c.subscribe("1", waitlistChangedSub, map[string]any{"c": "cart-W"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sse := openSSE(t, ctx, other, tok, waitlistChangedSub, map[string]any{"c": "cart-W"})
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("shutdown took %s with waitlistChanged subscribers", took)
	}
	if code, reason := c.closeCode(5 * time.Second); code != 1012 {
		t.Fatalf("at shutdown the socket closed with %d %q, want 1012", code, reason)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(sse.Body)
		for sc.Scan() {
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the SSE stream did not end at shutdown")
	}
}

// TestWaitlistChangedSurvivesLostNotifications: a status change that sends
// no notification (written here straight to the table) is still pushed, by
// the subscription's WaitlistFeedPoll re-read; and one made while the
// instance's LISTEN connection is down is pushed as soon as it is made
// again (the broker wakes every watcher then), not a poll later.
func TestWaitlistChangedSurvivesLostNotifications(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	b, _ := ts.startInstance()
	ts.soldOutHTTP("DROP", 1)
	ts.soldOutHTTP("DROP2", 1)
	tok := ts.checkoutToken("cart-W")
	first := mustJoinAs(t, ts.url, tok, joinVars("cart-W", "k1", "DROP", 1))
	second := mustJoinAs(t, ts.url, tok, joinVars("cart-W", "k2", "DROP2", 1))

	c := dialWS(t, b, tok, false)
	c.ack()
	c.subscribe("1", waitlistChangedSub, map[string]any{"c": "cart-W"})
	time.Sleep(300 * time.Millisecond)
	end := func(id string) {
		t.Helper()
		ts.exec(`UPDATE waitlist_entries SET status = 'left', ended_at = now(), updated_at = now() WHERE id = '` + id + `'`)
	}

	start := time.Now()
	end(first.ID)
	var got waitlistView
	c.data("waitlistChanged", &got, 8*time.Second)
	t.Logf("a change without a notification pushed after %s", time.Since(start).Round(time.Millisecond))
	if got.ID != first.ID || got.Status != "LEFT" {
		t.Fatalf("pushed %+v, want the first entry LEFT", got)
	}

	// Right after a poll: the next is WaitlistFeedPoll (5 s) away.
	start = time.Now()
	if n := ts.count(`SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity
		WHERE datname = current_database() AND query ILIKE 'listen%' AND pid <> pg_backend_pid()`); n == 0 {
		t.Fatal("found no LISTEN connection to cut")
	}
	end(second.ID)
	c.data("waitlistChanged", &got, 8*time.Second)
	took := time.Since(start)
	t.Logf("a change made while LISTEN was down pushed after %s", took.Round(time.Millisecond))
	if got.ID != second.ID || got.Status != "LEFT" {
		t.Fatalf("pushed %+v, want the second entry LEFT", got)
	}
	if took > 3500*time.Millisecond {
		t.Fatalf("pushed %s after the change, want on reconnect (about 1 s), before the next poll", took)
	}
}

// TestWaitlistChangedCountedInMetrics: /metrics counts a waitlistChanged
// subscriber as a live subscriber, beside a stockChanged one.
func TestWaitlistChangedCountedInMetrics(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	tok := ts.checkoutToken("cart-W")
	stock := dialWS(t, ts.url, ts.admin, false)
	stock.ack()
	stock.subscribe("1", stockChangedSub, map[string]any{"after": 0}) // resumes: runs alone
	wl := dialWS(t, ts.url, tok, false)
	wl.ack()
	wl.subscribe("1", waitlistChangedSub, map[string]any{"c": "cart-W"})
	deadline := time.Now().Add(5 * time.Second)
	body := ""
	for time.Now().Before(deadline) {
		if _, body = httpGetAs(t, ts.url+"/metrics", ts.admin); strings.Contains(body, "inventory_subscribers 2\n") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	i := strings.Index(body, "\ninventory_subscribers ") + 1
	t.Fatalf("/metrics does not count both subscribers: %q", body[i:i+min(40, len(body)-i)])
}
