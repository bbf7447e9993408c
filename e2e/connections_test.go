package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The Relay connections (docs/api-paging.md), each paged over real HTTP
// against 250 rows written as fixtures: pages of 100, 100 and 50, every row
// once and in the list's order, hasNextPage true, true, false, each page
// asked for after the previous page's endCursor.

// connPage is one page of any connection, its nodes left raw.
type connPage struct {
	Edges []struct {
		Node   json.RawMessage
		Cursor string
	}
	PageInfo struct {
		HasNextPage     bool
		HasPreviousPage bool
		StartCursor     *string
		EndCursor       *string
	}
	Seq *int64
}

// pageThrough reads field (a connection; query takes $first: Int and
// $after: String besides vars) in pages of 100 as token, checks the pages
// are 100, 100 and 50 long with hasNextPage true, true, false, and returns
// the nodes in the order received.
func pageThrough(t *testing.T, ts *testServer, token, query, field string, vars map[string]any) []json.RawMessage {
	t.Helper()
	var nodes []json.RawMessage
	var after any // null on the first page
	for i, want := range []int{100, 100, 50} {
		v := map[string]any{"first": 100, "after": after}
		for k, x := range vars {
			v[k] = x
		}
		var p connPage
		ts.mustData(ts.gql(token, query, v), field, &p)
		if len(p.Edges) != want || p.PageInfo.HasNextPage != (i < 2) || p.PageInfo.HasPreviousPage {
			t.Fatalf("%s page %d: %d edges, hasNextPage %v, hasPreviousPage %v; want %d, %v, false",
				field, i+1, len(p.Edges), p.PageInfo.HasNextPage, p.PageInfo.HasPreviousPage, want, i < 2)
		}
		if p.PageInfo.StartCursor == nil || *p.PageInfo.StartCursor != p.Edges[0].Cursor ||
			p.PageInfo.EndCursor == nil || *p.PageInfo.EndCursor != p.Edges[len(p.Edges)-1].Cursor {
			t.Fatalf("%s page %d: startCursor/endCursor are not the first and last edges' cursors", field, i+1)
		}
		for _, e := range p.Edges {
			nodes = append(nodes, e.Node)
		}
		after = *p.PageInfo.EndCursor
	}
	return nodes
}

// pluck decodes one string field of every node.
func pluck(t *testing.T, nodes []json.RawMessage, fields ...string) []string {
	t.Helper()
	out := make([]string, len(nodes))
	for i, n := range nodes {
		var m map[string]any
		if err := json.Unmarshal(n, &m); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, f := range fields {
			parts = append(parts, fmt.Sprint(m[f]))
		}
		out[i] = strings.Join(parts, "/")
	}
	return out
}

// mustMatch fails unless got is exactly want: every row once, in order.
func mustMatch(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d is %s, want %s (order or duplicates wrong)", what, i, got[i], want[i])
		}
	}
}

// insertReservations writes n released reservations of checkout directly,
// three to a created_at (so the id breaks ties), and returns their ids
// newest first, ties by id descending: the connection's order.
func insertReservations(ts *testServer, checkout string, n int) []string {
	ts.t.Helper()
	base := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	type row struct {
		id string
		at time.Time
	}
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{uuid.NewString(), base.Add(time.Duration(i/3) * time.Second)}
		if _, err := ts.db.Exec(ts.t.Context(), `INSERT INTO reservations (id, checkout_id, request_key, fingerprint, status, expires_at, created_at, ended_at)
			VALUES ($1, $2, $3, '\x00', 'released', $4, $4, $4)`, rows[i].id, checkout, fmt.Sprintf("fixture-%d", i), rows[i].at); err != nil {
			ts.t.Fatal(err)
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	ids := make([]string, n)
	for i, r := range rows {
		ids[i] = r.id
	}
	return ids
}

const reservationsConnection = `query($c: String!, $first: Int, $after: String) {
	checkoutReservationsConnection(checkoutId: $c, first: $first, after: $after) {
		edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`

func TestCheckoutReservationsConnectionPages(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	want := insertReservations(ts, "cart-conn", 250)
	insertReservations(ts, "cart-other", 5) // not of this list
	got := pluck(t, pageThrough(t, ts, ts.service, reservationsConnection, "checkoutReservationsConnection", map[string]any{"c": "cart-conn"}), "id")
	mustMatch(t, "checkoutReservationsConnection", got, want)

	// The deprecated list answers the same rows, as before.
	var old []struct{ ID string }
	ts.mustData(ts.gql(ts.service, `{ checkoutReservations(checkoutId: "cart-conn", first: 100) { id } }`, nil), "checkoutReservations", &old)
	if len(old) != 100 || old[0].ID != want[0] || old[99].ID != want[99] {
		t.Fatalf("checkoutReservations: %d rows, want the first 100 of the connection's", len(old))
	}
}

// insertBalances writes skus SKUs (P-000, P-001, …) stocked at AMS and BER
// directly, one unit each, without a ledger (so each is also a
// reconciliation issue), and returns "sku/location" in (SKU, location)
// order.
func insertBalances(ts *testServer, skus int) []string {
	ts.t.Helper()
	ts.exec(`INSERT INTO locations (code, name) VALUES ('AMS', 'Amsterdam'), ('BER', 'Berlin')`)
	ts.exec(fmt.Sprintf(`INSERT INTO skus (code, name, kind) SELECT format('P-%%s', lpad(i::text, 3, '0')), 'Thing', 'quantity' FROM generate_series(0, %d) i`, skus-1))
	ts.exec(`INSERT INTO balances (sku_id, location_id, on_hand) SELECT s.id, l.id, 1 FROM skus s CROSS JOIN locations l`)
	var want []string
	for i := range skus {
		for _, loc := range []string{"AMS", "BER"} {
			want = append(want, fmt.Sprintf("P-%03d/%s", i, loc))
		}
	}
	return want
}

func TestBalancesConnectionPages(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	want := insertBalances(ts, 125)
	const q = `query($first: Int, $after: String) { balancesConnection(first: $first, after: $after) {
		seq edges { cursor node { sku location onHand } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`
	got := pluck(t, pageThrough(t, ts, ts.admin, q, "balancesConnection", nil), "sku", "location")
	mustMatch(t, "balancesConnection", got, want)

	var page connPage
	ts.mustData(ts.gql(ts.admin, `{ balancesConnection(first: 1) { seq pageInfo { hasNextPage } } }`, nil), "balancesConnection", &page)
	if page.Seq == nil || !page.PageInfo.HasNextPage {
		t.Fatalf("balancesConnection: seq %v, hasNextPage %v", page.Seq, page.PageInfo.HasNextPage)
	}
	var old struct {
		Balances []struct{ SKU string }
		Next     *string
	}
	ts.mustData(ts.gql(ts.admin, `{ balances(first: 250) { balances { sku } next seq } }`, nil), "balances", &old)
	if len(old.Balances) != 250 || old.Next != nil {
		t.Fatalf("balances: %d, next %v; want all 250 and no next", len(old.Balances), old.Next)
	}
}

func TestWebhookDeliveriesConnectionPages(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	var p struct{ Webhook struct{ ID string } }
	ts.mustData(ts.gql(ts.admin, `mutation { createWebhook(input: {url: "https://example.com/h", topics: [STOCK_CHANGED]}) { webhook { id } } }`, nil), "createWebhook", &p)
	id := p.Webhook.ID
	ts.mustData(ts.gql(ts.admin, `mutation($id: ID!) { pauseWebhook(id: $id) { userErrors { code } } }`, map[string]any{"id": id}), "pauseWebhook", new(map[string]any))
	ts.exec(fmt.Sprintf(`INSERT INTO webhook_deliveries (endpoint_id, webhook_id, topic, attempt, status_code, latency_ms)
		SELECT '%s', 'msg_' || i, 'stock.changed', 1, 200, i FROM generate_series(1, 250) i`, id))
	var want []string // newest first
	for i := 250; i >= 1; i-- {
		want = append(want, fmt.Sprintf("msg_%d", i))
	}
	const q = `query($e: ID!, $first: Int, $after: String) { webhookDeliveriesConnection(endpointId: $e, first: $first, after: $after) {
		edges { cursor node { id webhookId } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`
	got := pluck(t, pageThrough(t, ts, ts.admin, q, "webhookDeliveriesConnection", map[string]any{"e": id}), "webhookId")
	mustMatch(t, "webhookDeliveriesConnection", got, want)

	var empty connPage
	ts.mustData(ts.gql(ts.admin, q, map[string]any{"e": uuid.NewString()}), "webhookDeliveriesConnection", &empty)
	if len(empty.Edges) != 0 || empty.PageInfo.HasNextPage || empty.PageInfo.EndCursor != nil {
		t.Fatalf("unknown endpoint: %+v; want an empty page", empty)
	}
	var old []struct{ WebhookID string }
	ts.mustData(ts.gql(ts.admin, `query($e: ID!) { webhookDeliveries(endpointId: $e, first: 3) { webhookId } }`, map[string]any{"e": id}), "webhookDeliveries", &old)
	if len(old) != 3 || old[0].WebhookID != "msg_250" {
		t.Fatalf("webhookDeliveries: %+v", old)
	}
}

func TestReconciliationConnectionPages(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	balances := insertBalances(ts, 100) // 200 balances, each on_hand 1 without a ledger
	// 50 of them also expect supply the ledger never saw: a second issue at
	// the same balance, after the first by kind.
	ts.exec(`UPDATE balances SET pending_supply = 1 WHERE sku_id IN (SELECT id FROM skus WHERE code < 'P-025')`)
	var want []string
	for _, b := range balances {
		want = append(want, b+"/on_hand_ledger_mismatch")
		if b < "P-025" {
			want = append(want, b+"/pending_supply_ledger_mismatch")
		}
	}
	const q = `query($first: Int, $after: String) { reconciliationConnection(first: $first, after: $after) {
		edges { cursor node { sku location kind detail } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`
	got := pluck(t, pageThrough(t, ts, ts.admin, q, "reconciliationConnection", nil), "sku", "location", "kind")
	mustMatch(t, "reconciliationConnection", got, want)

	var old []struct{ SKU string }
	ts.mustData(ts.gql(ts.admin, `{ reconciliation(first: 1000) { sku } }`, nil), "reconciliation", &old)
	if len(old) != 250 {
		t.Fatalf("reconciliation: %d issues, want 250", len(old))
	}
}

func TestWaitlistLinesConnectionPages(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	// 250 SKUs; SKU i has i%4+1 entries waiting, so lines tie on their
	// count and the SKU code orders them.
	ts.exec(`INSERT INTO skus (code, name, kind) SELECT format('W-%s', lpad(i::text, 3, '0')), 'Thing', 'quantity' FROM generate_series(0, 249) i`)
	ts.exec(`INSERT INTO waitlist_entries (checkout_id, request_key, fingerprint, sku_id, quantity, offer_ttl_seconds, expires_at)
		SELECT 'cart-' || n, 'k-' || s.code, '\x00', s.id, 1, 600, now() + interval '1 day'
		FROM skus s CROSS JOIN generate_series(1, 4) n WHERE n <= substr(s.code, 3)::int % 4 + 1`)
	var want []string
	for waiting := 4; waiting >= 1; waiting-- {
		for i := range 250 {
			if i%4+1 == waiting {
				want = append(want, fmt.Sprintf("W-%03d/%d", i, waiting))
			}
		}
	}
	const q = `query($first: Int, $after: String) { waitlistLinesConnection(first: $first, after: $after) {
		edges { cursor node { sku waiting } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`
	got := pluck(t, pageThrough(t, ts, ts.admin, q, "waitlistLinesConnection", nil), "sku", "waiting")
	mustMatch(t, "waitlistLinesConnection", got, want)

	var old []struct{ SKU string }
	ts.mustData(ts.gql(ts.admin, `{ waitlistLines(first: 100) { sku } }`, nil), "waitlistLines", &old)
	if len(old) != 100 || old[0].SKU != "W-003" {
		t.Fatalf("waitlistLines: %d lines, first %+v", len(old), old[:min(1, len(old))])
	}
}
