package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"
)

// outcome reads until subscription id is refused (its error is returned) or
// gets data ("": it is live; the test moves stock to find out), keeping what
// other subscriptions are told for later calls.
func (c *wsClient) outcome(id string) string {
	c.t.Helper()
	if c.outcomes == nil {
		c.outcomes = map[string]string{}
	}
	for {
		if got, ok := c.outcomes[id]; ok {
			return got
		}
		m, err := c.next(5 * time.Second)
		if err != nil {
			c.t.Fatalf("waiting for subscription %s: %v", id, err)
		}
		if m.Type == "complete" {
			continue
		}
		var p struct {
			Errors []struct {
				Message    string
				Extensions map[string]any
			}
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			c.t.Fatalf("payload %s: %v", m.Payload, err)
		}
		if _, told := c.outcomes[m.ID]; told {
			continue // a later message of a subscription already decided
		}
		c.outcomes[m.ID] = ""
		if len(p.Errors) > 0 {
			c.outcomes[m.ID] = fmt.Sprint(p.Errors[0].Extensions["code"], ": ", p.Errors[0].Message)
		}
	}
}

// TestSubscriptionCaps: one socket may hold INVENTORY_WS_MAX_SUBSCRIPTIONS
// live subscriptions and one caller INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER
// over all its sockets; one more is refused with BAD_REQUEST naming the
// setting; a completed subscription or a closed socket gives its place back;
// another caller is not affected. Many concurrent subscribes never pass the
// cap.
func TestSubscriptionCaps(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_WS_MAX_SUBSCRIPTIONS": "2", "INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER": "5"})
	ts.seed("PING", 1)
	bumps := 0
	bump := func() { // one stock event, which every live subscription hears
		t.Helper()
		var p map[string]any
		bumps++ // each bump is a receipt of its own
		ts.mustData(ts.gql(ts.admin, `mutation($r: String!) { receiveStock(input: {sku: "PING", location: "AMS", quantity: 1, reference: $r}) { userErrors { code } } }`,
			map[string]any{"r": fmt.Sprint("bump-", bumps)}), "receiveStock", &p)
	}
	// Subscriptions start concurrently: which of three is refused is
	// not defined, that exactly one is.
	a := dialWS(t, ts.url, ts.admin, false)
	a.ack()
	for _, id := range []string{"1", "2", "3"} {
		a.subscribe(id, stockChangedSub, nil)
	}
	bump()
	var live []string
	for _, id := range []string{"1", "2", "3"} {
		switch got := a.outcome(id); {
		case got == "":
			live = append(live, id)
		case !strings.Contains(got, "BAD_REQUEST") || !strings.Contains(got, "INVENTORY_WS_MAX_SUBSCRIPTIONS"):
			t.Fatalf("subscription %s refused otherwise: %q", id, got)
		}
	}
	if len(live) != 2 {
		t.Fatalf("live on a socket with a cap of 2: %v", live)
	}
	a.send(wsMessage{ID: live[0], Type: "complete"})
	try := 0
	waitUntil(t, 5*time.Second, "the completed subscription's place is given back", func() bool {
		try++
		id := fmt.Sprintf("again-%d", try)
		a.subscribe(id, stockChangedSub, nil)
		bump()
		return a.outcome(id) == ""
	})

	// Per caller: the admin has 2 on socket a; two more sockets of 2 and 1.
	b, c := dialWS(t, ts.url, ts.admin, false), dialWS(t, ts.url, ts.admin, false)
	b.ack()
	c.ack()
	b.subscribe("1", stockChangedSub, nil)
	b.subscribe("2", stockChangedSub, nil)
	c.subscribe("1", stockChangedSub, nil)
	bump()
	for _, s := range []struct {
		c  *wsClient
		id string
	}{{b, "1"}, {b, "2"}, {c, "1"}} {
		if got := s.c.outcome(s.id); got != "" {
			t.Fatalf("subscription %s of the caller's first five: %q", s.id, got)
		}
	}
	c.subscribe("2", stockChangedSub, nil)
	if got := c.outcome("2"); !strings.Contains(got, "INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER") {
		t.Fatalf("sixth subscription of the caller: %q", got)
	}
	// Another caller has places of its own.
	s := dialWS(t, ts.url, ts.cli("token", "create", "--role", "admin", "--name", "another"), false)
	s.ack()
	s.subscribe("1", stockChangedSub, nil)
	bump()
	if got := s.outcome("1"); got != "" {
		t.Fatalf("another key's first subscription: %q", got)
	}
	// A closed socket gives its places back.
	_ = b.conn.CloseNow()
	waitUntil(t, 5*time.Second, "a closed socket's places are given back", func() bool {
		try++
		id := fmt.Sprintf("again-%d", try)
		c.subscribe(id, stockChangedSub, nil)
		bump()
		return c.outcome(id) == ""
	})

	// Concurrent subscribes of a fresh caller: 6 sockets send 2 each at
	// once; exactly the cap of 5 are live.
	key := ts.cli("token", "create", "--role", "admin", "--name", "burst")
	sockets := make([]*wsClient, 6)
	for i := range sockets {
		sockets[i] = dialWS(t, ts.url, key, false)
		sockets[i].ack()
	}
	var wg sync.WaitGroup
	for _, w := range sockets {
		wg.Go(func() {
			for _, id := range []string{"1", "2"} {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := wsjson.Write(ctx, w.conn, wsMessage{ID: id, Type: "subscribe", Payload: mustJSON(map[string]any{"query": stockChangedSub})})
				cancel()
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	bump()
	burstLive := 0
	for _, w := range sockets {
		for _, id := range []string{"1", "2"} {
			switch got := w.outcome(id); {
			case got == "":
				burstLive++
			case !strings.Contains(got, "INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER"):
				t.Fatalf("refused otherwise: %q", got)
			}
		}
	}
	if burstLive != 5 {
		t.Fatalf("%d live subscriptions of one caller with a cap of 5", burstLive)
	}
}

// TestSocketClosedWhenCredentialsEnd: a WebSocket opened with a key that is
// then revoked, or with a checkout token that then expires, is closed with
// 4401 within a few seconds; its subscriptions end with it.
func TestSocketClosedWhenCredentialsEnd(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	key := ts.cli("token", "create", "--role", "admin", "--name", "watcher")
	w := dialWS(t, ts.url, key, false)
	w.ack()
	w.subscribe("1", stockChangedSub, nil)
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-x", ttlSeconds: 2) { token } }`, nil), "issueCheckoutToken", &tok)
	c := dialWS(t, ts.url, tok.Token, false)
	c.ack()
	c.subscribe("1", `subscription { reservationChanged(checkoutId: "cart-x") { id status } }`, nil)
	// Another socket of another key stays open throughout.
	other := dialWS(t, ts.url, ts.admin, false)
	other.ack()
	other.subscribe("1", stockChangedSub, nil)

	revoked := time.Now()
	ts.cli("token", "revoke", "watcher")
	if code, reason := w.closeCode(5 * time.Second); code != 4401 {
		t.Fatalf("socket of a revoked key: closed with %d %q, want 4401", code, reason)
	}
	t.Logf("revoked key's socket closed %s after the revocation", time.Since(revoked).Round(10*time.Millisecond))
	if code, reason := c.closeCode(6 * time.Second); code != 4401 || !strings.Contains(reason, "expired") {
		t.Fatalf("socket of an expired checkout token: closed with %d %q, want 4401 (expired)", code, reason)
	}
	ts.seed("PING", 1)
	var e struct{ Seq json.Number }
	other.data("stockChanged", &e, 5*time.Second)
}
