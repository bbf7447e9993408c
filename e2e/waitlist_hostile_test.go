package e2e

import (
	"fmt"
	"sync"
	"testing"
)

// TestWaitlistHostileCallersOnTheBinary: what the worst callers can make
// the real binary keep, measured in rows. An anonymous caller's joins are
// refused before any work (no row; after a few, its address is rate limited
// for failed authentication); a scripted checkout token that joins
// 20 sold-out SKUs at once, 8 requests in flight, gets exactly
// INVENTORY_CHECKOUT_MAX_LIVE_HOLDS entries (5 here) and LIMIT_EXCEEDED for
// the rest, cannot join for another checkout, and cannot read another's
// entry. Entries, and so the line's length, the offers they draw and their
// River jobs, are bounded per checkout, and checkouts only by the backend
// that mints their tokens.
func TestWaitlistHostileCallersOnTheBinary(t *testing.T) {
	t.Parallel()
	ts := setupBinary(t, map[string]string{"INVENTORY_CHECKOUT_MAX_LIVE_HOLDS": "5"})
	const skus = 20
	for i := range skus {
		ts.soldOutHTTP(fmt.Sprintf("HX-%02d", i), 1)
	}
	tok := ts.checkoutToken("cart-A")
	if _, r := joinAs(t, ts.url, tok, joinVars("cart-B", "k", "HX-00", 1)); r.errorCode() != "FORBIDDEN" {
		t.Fatalf("a token joining for another checkout: %+v", r)
	}
	codes := make([]string, skus)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range skus {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p, r := joinAs(t, ts.url, tok, joinVars("cart-A", fmt.Sprint("k", i), fmt.Sprintf("HX-%02d", i), 1))
			switch {
			case len(r.Errors) > 0:
				codes[i] = "error: " + r.errorCode()
			case p.Entry != nil:
				codes[i] = "WAITING"
			default:
				codes[i] = p.code()
			}
		})
	}
	wg.Wait()
	counts := map[string]int{}
	for _, c := range codes {
		counts[c]++
	}
	if counts["WAITING"] != 5 || counts["LIMIT_EXCEEDED"] != skus-5 {
		t.Fatalf("20 concurrent joins by one checkout token with a limit of 5: %v", counts)
	}
	if n := ts.count(`SELECT count(*) FROM waitlist_entries WHERE checkout_id = 'cart-A' AND status = 'waiting'`); n != 5 {
		t.Fatalf("%d waiting entries of cart-A, want 5", n)
	}
	if n := ts.count(`SELECT count(*) FROM waitlist_entries WHERE checkout_id <> 'cart-A'`); n != 0 {
		t.Fatalf("%d entries of other checkouts", n)
	}

	other := mustJoinAs(t, ts.url, ts.service, joinVars("cart-B", "k", "HX-00", 1))
	r := ts.gql(tok, waitlistEntryQuery, map[string]any{"id": other.ID})
	if len(r.Errors) > 0 || string(r.Data["waitlistEntry"]) != "null" {
		t.Fatalf("cart-A reading cart-B's entry: %s %+v", r.Data["waitlistEntry"], r.Errors)
	}

	// Anonymous joins last: after a few refusals the address is rate
	// limited for failed authentication, which would hold up the calls above.
	refused := map[string]int{}
	for i := range skus {
		_, r := joinAs(t, ts.url, "", joinVars("cart-anon", fmt.Sprint("k", i), fmt.Sprintf("HX-%02d", i), 1))
		refused[r.errorCode()]++
	}
	if refused["UNAUTHENTICATED"] == 0 || refused["UNAUTHENTICATED"]+refused["RATE_LIMITED"] != skus {
		t.Fatalf("20 anonymous joins: %v", refused)
	}
	if n := ts.count(`SELECT count(*) FROM waitlist_entries WHERE checkout_id = 'cart-anon'`); n != 0 {
		t.Fatalf("%d entries after anonymous joins", n)
	}
	t.Logf("anonymous joins: %v; one token's 20 concurrent joins: %v", refused, counts)
}
