package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"inventory/graphiql"
)

// starterExamples are the operations commented out in graphiql.Starter, by
// name, with their leading "# " removed as the document tells the reader to.
func starterExamples(t *testing.T) map[string]string {
	t.Helper()
	ops := map[string]string{}
	var cur []string
	for _, line := range strings.Split(graphiql.Starter, "\n") {
		switch {
		case strings.HasPrefix(line, "# mutation "):
			cur = []string{line[2:]}
		case cur != nil && strings.HasPrefix(line, "# "):
			cur = append(cur, line[2:])
			if line == "# }" {
				op := strings.Join(cur, "\n")
				ops[regexp.MustCompile(`^mutation (\w+)`).FindStringSubmatch(op)[1]] = op
				cur = nil
			}
		case cur != nil:
			t.Fatalf("an example ends without its closing brace: %q", cur)
		}
	}
	return ops
}

// TestGraphiQLStarterExamples runs the reserve and confirmReservation calls
// that GraphiQL's starter document has commented out, uncommented and
// unchanged but for the id in Variables, with the headers its note says: a
// checkout token for the example's checkout reserves, the same token cannot
// confirm (FORBIDDEN, nothing sold), the service key confirms; the service
// key reserving again with the same requestKey gets the same reservation
// back. Counted in SQL afterwards.
func TestGraphiQLStarterExamples(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.cli("demo")
	ops := starterExamples(t)
	if len(ops) != 2 || ops["Reserve"] == "" || ops["Confirm"] == "" {
		t.Fatalf("the starter's examples: %v", ops)
	}
	checkout := regexp.MustCompile(`checkoutId: "([^"]+)"`).FindStringSubmatch(ops["Reserve"])[1]
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation($c: String!) { issueCheckoutToken(checkoutId: $c) { token } }`, map[string]any{"c": checkout}),
		"issueCheckoutToken", &tok)

	type reservation struct {
		ID     string
		Status string
	}
	var held struct {
		Reservation *reservation
		Replayed    bool
		UserErrors  []struct{ Code string }
	}
	ts.mustData(ts.gql(tok.Token, ops["Reserve"], nil), "reserve", &held)
	if held.Reservation == nil || held.Reservation.Status != "HELD" || len(held.UserErrors) > 0 {
		t.Fatalf("Reserve with the checkout token: %+v", held)
	}
	vars := map[string]any{"id": held.Reservation.ID}
	if r := ts.gql(tok.Token, ops["Confirm"], vars); r.errorCode() != "FORBIDDEN" {
		t.Fatalf("Confirm with the checkout token: %q %+v %s", r.errorCode(), r.Errors, r.Data["confirmReservation"])
	}
	if n := ts.count(`SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders after the checkout token's confirm", n)
	}
	var confirmed struct {
		Reservation *reservation
		Order       *struct{ Ref string }
		UserErrors  []struct{ Code string }
	}
	ts.mustData(ts.gql(ts.service, ops["Confirm"], vars), "confirmReservation", &confirmed)
	if confirmed.Reservation == nil || confirmed.Reservation.Status != "CONFIRMED" || confirmed.Order == nil || len(confirmed.UserErrors) > 0 {
		t.Fatalf("Confirm with the service key: %+v", confirmed)
	}
	ts.mustData(ts.gql(ts.service, ops["Reserve"], nil), "reserve", &held)
	if !held.Replayed || held.Reservation == nil || held.Reservation.ID != vars["id"] {
		b, _ := json.Marshal(held)
		t.Fatalf("Reserve again with the same requestKey: %s", b)
	}
	if n := ts.count(`SELECT count(*) FROM reservations`); n != 1 {
		t.Fatalf("%d reservations, want 1", n)
	}
	if n := ts.count(`SELECT count(*) FROM orders o WHERE o.ref = '` + confirmed.Order.Ref + `'`); n != 1 {
		t.Fatalf("%d orders %s, want 1", n, confirmed.Order.Ref)
	}
}
