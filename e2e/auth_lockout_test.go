package e2e

import (
	"fmt"
	"net/http"
	"testing"
)

// TestGarbageKeysDoNotLockOutValidCredentials is the second attack
// against the real binary: 30 requests with garbage `Bearer inv_…` keys from
// one address spent its failed-authentication budget (20), and from then on,
// for the whole window, the service key and every checkout token from that
// address got 429 too, reserve and confirm included. Behind a load balancer
// not listed in INVENTORY_TRUSTED_PROXIES every client is that one address.
// Now the budget bounds only what costs a lookup of something unknown: a
// valid service or admin key, and a valid checkout token (a signature check,
// no database), are served from the spent address; a new garbage key from
// it is refused without a lookup, as before, and so is a forged checkout
// token (after its signature check).
func TestGarbageKeysDoNotLockOutValidCredentials(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_RATE_LIMIT_WINDOW": "10m"})
	s.seed("HP", 10)
	checkout := s.checkoutToken("cart-locked")
	// The admin key has not been used on this instance yet: the instance
	// knows it from the live keys it lists, not from having served it.

	statuses := map[int]int{}
	for i := range 30 {
		statuses[request(t, http.MethodPost, s.url+"/graphql", fmt.Sprintf("inv_garbage%d", i), "", "application/json", []byte(`{"query":"{ locations { code } }"}`))]++
	}
	t.Logf("30 garbage keys from 127.0.0.1: %v", statuses)
	if statuses[http.StatusTooManyRequests] == 0 {
		t.Fatalf("30 garbage keys with 20 failures allowed: no 429 (%v)", statuses)
	}
	keyReads := func() float64 { return s.metricValue(`inventory_api_key_reads_total\{result="unknown"\}`) }
	before := keyReads()
	if st := request(t, http.MethodPost, s.url+"/graphql", "inv_garbage-more", "", "application/json", []byte(`{"query":"{ locations { code } }"}`)); st != http.StatusTooManyRequests {
		t.Fatalf("a new garbage key from the spent address: %d, want 429", st)
	}
	if st := request(t, http.MethodPost, s.url+"/graphql", "not.a.token", "", "application/json", []byte(`{"query":"{ locations { code } }"}`)); st != http.StatusTooManyRequests {
		t.Fatalf("a forged checkout token from the spent address: %d, want 429", st)
	}
	if d := keyReads() - before; d != 0 {
		t.Fatalf("refusals from the spent address read api_keys %v times", d)
	}

	// The shopper reserves with its checkout token, the backend confirms
	// with its service key, the admin reads: all from the spent address.
	p := reserveAs(t, s.url, checkout, "cart-locked", "k1", "HP", 2, 0)
	if p.Reservation == nil || len(p.UserErrors) > 0 {
		t.Fatalf("reserve with a valid checkout token from the spent address: %+v", p)
	}
	r := s.gql(s.service, `mutation($id: ID!) { confirmReservation(input: {id: $id, orderRef: "order-locked"}) { reservation { status } userErrors { code } } }`, map[string]any{"id": p.Reservation.ID})
	var c struct {
		Reservation struct{ Status string }
		UserErrors  []struct{ Code string }
	}
	s.mustData(r, "confirmReservation", &c)
	if c.Reservation.Status != "CONFIRMED" {
		t.Fatalf("confirm with the service key from the spent address: %+v", c)
	}
	if r := s.gql(s.admin, `{ reconciliation { __typename } }`, nil); len(r.Errors) > 0 {
		t.Fatalf("the admin key from the spent address: %+v", r.Errors)
	}
	// Over WebSocket too: the service key's connection_init is accepted.
	dialWS(t, s.url, s.service, false).ack()
	if got := s.count(`SELECT on_hand FROM balances b JOIN skus k ON k.id = b.sku_id WHERE k.code = 'HP'`); got != 8 {
		t.Fatalf("on hand after the confirmed sale of 2 of 10: %d", got)
	}
}
