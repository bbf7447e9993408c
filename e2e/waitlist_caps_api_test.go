package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

const waitlistSkipQuery = `query($id: ID!) { waitlistEntry(id: $id) { id status position skippedReason reservation { id status } } }`

type skipView struct {
	ID            string
	Status        string
	Position      *int
	SkippedReason *string
	Reservation   *struct{ ID, Status string }
}

// entryAs reads a waitlist entry with its skippedReason as bearer.
func (ts *testServer) entryAs(bearer, id string) skipView {
	ts.t.Helper()
	var v *skipView
	ts.mustData(ts.gql(bearer, waitlistSkipQuery, map[string]any{"id": id}), "waitlistEntry", &v)
	if v == nil {
		ts.t.Fatalf("entry %s: null", id)
	}
	return *v
}

// releaseAs releases a hold as bearer and fails the test on any error.
func (ts *testServer) releaseAs(bearer, id string) {
	ts.t.Helper()
	var p struct{ UserErrors []struct{ Code string } }
	ts.mustData(ts.gql(bearer, `mutation($id: ID!) { releaseReservation(input: {id: $id}) { userErrors { code } } }`, map[string]any{"id": id}), "releaseReservation", &p)
	if len(p.UserErrors) > 0 {
		ts.t.Fatalf("release %s: %+v", id, p.UserErrors)
	}
}

const liveHoldsOf = `SELECT count(*) FROM reservations WHERE checkout_id = '%s' AND status = 'held' AND expires_at > clock_timestamp()`

// TestWaitlistOfferIsAHoldOverHTTP is the shopper row, over the
// real binary with the default caps: a checkout token at its cap of 20
// live holds joins a waitlist (accepted) and another checkout joins behind
// it. The unit comes back: no 21st hold (in SQL); the capped entry stays
// WAITING first in line with a skippedReason naming
// INVENTORY_CHECKOUT_MAX_LIVE_HOLDS, and the other checkout is offered the
// unit. When the capped checkout releases a hold and the unit comes back
// again, it is offered, and still has 20 live holds.
func TestWaitlistOfferIsAHoldOverHTTP(t *testing.T) {
	t.Parallel()
	ts := setupBinary(t, nil).testServer // the real binary
	sold := ts.soldOutHTTP("DROP", 1)
	ts.seed("TEE", 100)
	ts.seed("CAP", 100)
	tok := ts.checkoutToken("cart-cap")
	var holds []string
	for i := range 20 {
		// Two SKUs: 10 units of one is its own cap.
		p := reserveAs(t, ts.url, tok, "cart-cap", fmt.Sprintf("k%d", i), []string{"TEE", "CAP"}[i%2], 1, 0)
		if p.Reservation == nil {
			t.Fatalf("hold %d: %+v", i, p)
		}
		holds = append(holds, p.Reservation.ID)
	}
	if p := reserveAs(t, ts.url, tok, "cart-cap", "k20", "TEE", 1, 0); codeOf(p) != "LIMIT_EXCEEDED" {
		t.Fatalf("a 21st hold: %+v", p)
	}
	capped := mustJoinAs(t, ts.url, tok, joinVars("cart-cap", "w", "DROP", 1))
	other := ts.checkoutToken("cart-next")
	next := mustJoinAs(t, ts.url, other, joinVars("cart-next", "w", "DROP", 1))

	ts.releaseAs(ts.service, sold)
	if n := ts.count(fmt.Sprintf(liveHoldsOf, "cart-cap")); n != 20 {
		t.Fatalf("cart-cap has %d live holds after the unit came back; the cap is 20", n)
	}
	got := ts.entryAs(tok, capped.ID)
	if got.Status != "WAITING" || got.Position == nil || *got.Position != 0 || got.Reservation != nil ||
		got.SkippedReason == nil || !strings.Contains(*got.SkippedReason, "INVENTORY_CHECKOUT_MAX_LIVE_HOLDS") {
		t.Fatalf("the capped entry: %+v, want WAITING first with a reason naming the cap", got)
	}
	t.Logf("skippedReason: %s", *got.SkippedReason)
	offer := ts.entryAs(other, next.ID)
	if offer.Status != "OFFERED" || offer.Reservation == nil || offer.Reservation.Status != "HELD" || offer.SkippedReason != nil {
		t.Fatalf("the next in line: %+v, want OFFERED", offer)
	}

	ts.releaseAs(tok, holds[0])
	ts.releaseAs(other, offer.Reservation.ID)
	got = ts.entryAs(tok, capped.ID)
	if got.Status != "OFFERED" || got.Reservation == nil || got.Reservation.Status != "HELD" || got.SkippedReason != nil {
		t.Fatalf("the capped entry after it released a hold and the unit came back: %+v, want OFFERED", got)
	}
	if n := ts.count(fmt.Sprintf(liveHoldsOf, "cart-cap")); n != 20 {
		t.Fatalf("cart-cap has %d live holds; the cap is 20", n)
	}
	if n := ts.count(`SELECT reserved FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = 'DROP'`); n != 1 {
		t.Fatalf("DROP reserved %d, want the one offer", n)
	}
}

// TestWaitlistCapsConcurrentlyOverHTTP: eight checkout tokens with 4 of
// their 5 live holds wait in one line for a sold-out SKU. Then, over two
// instances at once, the service key releases the SKU's 6 holds one by
// one while each checkout takes a fifth hold (at its cap, unless an offer
// came first) and every other one lets a hold go again. Afterwards no
// checkout has more than 5 live holds (SQL); the scarce units the clients
// were offered (read back over HTTP) are no more than were stocked, and
// are what the balance says is reserved.
func TestWaitlistCapsConcurrentlyOverHTTP(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_CHECKOUT_MAX_LIVE_HOLDS": "5"})
	second, _ := ts.startInstance()
	urls := []string{ts.url, second}
	const checkouts, scarce = 8, 6
	ts.seed("DROP", scarce)
	ts.seed("TEE", 1000)
	var sold []string
	for i := range scarce {
		p := reserveAs(t, ts.url, ts.service, "cart-sold", fmt.Sprintf("s%d", i), "DROP", 1, 0)
		if p.Reservation == nil {
			t.Fatalf("reserve DROP: %+v", p)
		}
		sold = append(sold, p.Reservation.ID)
	}
	toks := make([]string, checkouts)
	holds := make([][]string, checkouts)
	for g := range checkouts {
		c := fmt.Sprintf("cart-%d", g)
		toks[g] = ts.checkoutToken(c)
		for i := range 4 {
			p := reserveAs(t, ts.url, toks[g], c, fmt.Sprintf("pre%d", i), "TEE", 1, 0)
			if p.Reservation == nil {
				t.Fatalf("hold: %+v", p)
			}
			holds[g] = append(holds[g], p.Reservation.ID)
		}
	}
	entries := make([]string, checkouts)
	var wg sync.WaitGroup
	for g := range checkouts {
		wg.Go(func() {
			c := fmt.Sprintf("cart-%d", g)
			p, r := joinAs(t, urls[g%2], toks[g], joinVars(c, "w", "DROP", 1))
			if len(r.Errors) > 0 || p.Entry == nil {
				t.Errorf("join %s: %+v %+v", c, p, r.Errors)
				return
			}
			entries[g] = p.Entry.ID
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	release := func(url, bearer, id string) {
		if _, err := gqlTo(url, bearer, `mutation($id: ID!) { releaseReservation(input: {id: $id}) { userErrors { code } } }`,
			map[string]any{"id": id}); err != nil {
			t.Error(err)
		}
	}
	for g := range checkouts {
		wg.Go(func() {
			c := fmt.Sprintf("cart-%d", g)
			url := urls[g%2]
			fifth := reserveAs(t, url, toks[g], c, "fifth", "TEE", 1, 0)
			if fifth.Reservation == nil && codeOf(fifth) != "LIMIT_EXCEEDED" {
				t.Errorf("fifth hold of %s: %+v", c, fifth)
			}
			if g%2 == 0 {
				release(url, toks[g], holds[g][0])
			}
		})
	}
	for i, id := range sold {
		wg.Go(func() { release(urls[i%2], ts.service, id) })
	}
	wg.Wait()
	if n := ts.count(`SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM reservations
		WHERE checkout_id LIKE 'cart-_' AND status = 'held' AND expires_at > clock_timestamp() GROUP BY checkout_id) h`); n > 5 {
		t.Fatalf("a checkout has %d live holds; the cap is 5", n)
	}
	offered, skipped := 0, 0
	for g, id := range entries {
		e := ts.entryAs(toks[g], id)
		switch {
		case e.Status == "OFFERED" && e.Reservation != nil && e.Reservation.Status == "HELD":
			offered++ // one unit each
		case e.Status == "WAITING" && e.SkippedReason != nil:
			skipped++
		}
	}
	t.Logf("%d of %d entries offered, %d waiting passed over for their cap", offered, checkouts, skipped)
	if offered > scarce {
		t.Fatalf("the clients were offered %d units of DROP, %d were stocked", offered, scarce)
	}
	if n := ts.count(`SELECT reserved FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = 'DROP'`); n != offered {
		t.Fatalf("DROP reserved %d, the clients count %d offered", n, offered)
	}
}
