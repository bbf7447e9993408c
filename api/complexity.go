package api

import (
	"inventory/domain"
	"inventory/graph"
)

// Complexity is what a query costs before it runs: each field 1 plus its
// children (gqlgen's default), except that a list field costs its children
// once per row it asks for. Without that, 330 aliases of
// availability(skus: <500 SKUs>) would cost 330 × 2 and pass, each asking
// the database for 500 rows: 165,000 rows for a cost of 660.
//
// The rows a list asks for are its list argument's length (availability:
// len(skus)) or its page size (first, with the schema's default when
// omitted). Lists with neither count their documented bound:
// locations (domain.MaxLocations) and webhooks (domain.MaxWebhookEndpoints). A SKU's
// balances inside availability (Availability.locations) are not multiplied:
// a SKU is stocked at a few locations, and multiplying by the bound would
// refuse every honest availability query.
//
// At the default INVENTORY_MAX_COMPLEXITY of 20,000: an availability of 500
// SKUs with every field and every balance field costs 500 × 15 = 7,500; the
// dashboard's balances(first: 1000) page 11,000; 330 aliases of an
// availability of 500 SKUs 330,000 (refused).

// maxCost caps a field's cost so that a product of large factors cannot
// overflow; anything that large is refused anyway.
const maxCost = 1 << 40

// perRow is the cost of rows rows of a field whose selection costs child.
func perRow(rows, child int) int {
	rows = max(rows, 1)
	if child+1 > maxCost/rows {
		return maxCost
	}
	return rows * (child + 1)
}

// page is the rows a page argument asks for, def when it is omitted.
func page(first *int, def int) int {
	if first == nil {
		return def
	}
	return *first
}

// ReconciliationCost is the least a reconciliation field costs, whatever
// rows it asks for: each runs the whole check (every balance against the
// ledger, 320-360 ms at 50,000 balances) to answer even one row, so forty
// aliases of reconciliationConnection(first: 1), at 2 each, were 10 s of
// database CPU in one request. At the default INVENTORY_MAX_COMPLEXITY of
// 20,000 an operation runs it twice at most.
const ReconciliationCost = 10_000

// reconciliationCost is a reconciliation field's cost: its rows', at least
// ReconciliationCost.
func reconciliationCost(rows int) int { return max(rows, ReconciliationCost) }

// WaitlistLinesCost is the least a waitlist lines field costs, whatever
// lines it asks for: lines are ordered by entries waiting, so each page
// counts every waiting entry (75 ms at 200,000 waiting), and 700 aliases of
// waitlistLinesConnection(first: 1), at 3 each, were 6.7 s of wall time
// and 8.9 s of database CPU in one request. At the default
// INVENTORY_MAX_COMPLEXITY of 20,000 an operation counts them ten times at
// most.
const WaitlistLinesCost = 2_000

// waitlistLinesCost is a waitlist lines field's cost: its rows', at least
// WaitlistLinesCost.
func waitlistLinesCost(rows int) int { return max(rows, WaitlistLinesCost) }

// complexity fills the generated schema's complexity functions.
func complexity() graph.ComplexityRoot {
	var c graph.ComplexityRoot
	c.Query.Availability = func(child int, skus []string, _ []string) int { return perRow(len(skus), child) }
	c.Query.Locations = func(child int) int { return perRow(domain.MaxLocations, child) }
	c.Query.Webhooks = func(child int) int { return perRow(domain.MaxWebhookEndpoints, child) }
	c.Query.Balances = func(child int, first *int, _ *string) int { return perRow(page(first, 500), child) }
	c.Query.CheckoutReservations = func(child int, _ string, first *int, _ *string) int { return perRow(page(first, 50), child) }
	c.Query.Reconciliation = func(child int, first *int) int { return reconciliationCost(perRow(page(first, 100), child)) }
	c.Query.StockEvents = func(child int, _ *int64, first *int) int { return perRow(page(first, 100), child) }
	c.Query.WebhookDeliveries = func(child int, _ string, first *int, _ *string) int { return perRow(page(first, 50), child) }
	// A Relay connection costs what the list it replaces costs for the same
	// rows: edges and node pass their selection's cost through, so
	// xConnection(first: n) { edges { node { F } } } costs x(first: n) { F }'s
	// n × (F + 1); a cursor per edge adds its 1 per row, pageInfo its fields.
	// balances' rows sit in a page object (balances { balances { F } }):
	// there edges costs its 1, as BalancePage.balances does.
	c.Query.CheckoutReservationsConnection = func(child int, _ string, first *int, _ *string) int { return perRow(page(first, 50), child) }
	c.Query.BalancesConnection = func(child int, first *int, _ *string) int { return perRow(page(first, 500), child) }
	c.Query.WebhookDeliveriesConnection = func(child int, _ string, first *int, _ *string) int { return perRow(page(first, 50), child) }
	c.Query.ReconciliationConnection = func(child int, first *int, _ *string) int {
		return reconciliationCost(perRow(page(first, 100), child))
	}
	c.Query.WaitlistLines = func(child int, first *int) int {
		return waitlistLinesCost(perRow(page(first, domain.DefaultWaitlistLines), child))
	}
	c.Query.WaitlistLinesConnection = func(child int, first *int, _ *string) int {
		return waitlistLinesCost(perRow(page(first, domain.DefaultWaitlistLines), child))
	}
	through := func(child int) int { return child }
	c.ReservationConnection.Edges, c.ReservationEdge.Node = through, through
	c.BalanceEdge.Node = through
	c.WebhookDeliveryConnection.Edges, c.WebhookDeliveryEdge.Node = through, through
	c.ReconciliationIssueConnection.Edges, c.ReconciliationIssueEdge.Node = through, through
	c.WaitlistLineConnection.Edges, c.WaitlistLineEdge.Node = through, through
	return c
}
