package store_test

import (
	"fmt"
	"testing"
	"time"

	"inventory/domain"
	"inventory/store"
)

// Offer tests: every path that frees units hands them to the line in the
// same transaction, first-fit in join order.

// requireOffered checks that the entries were offered, and in SQL that an offered entry's reservation is HELD for its
// checkout with one line of its quantity at loc.
func (b *testBundle) requireOffered(t *testing.T, loc string, entries ...domain.WaitlistEntry) {
	t.Helper()
	for _, e := range entries {
		got := b.entry(t, e.ID)
		if got.Status != domain.WaitlistOffered || got.ReservationID == nil || got.Position != nil {
			t.Fatalf("entry %s (%s x%d): %+v, want OFFERED with a reservation", e.ID, e.CheckoutID, e.Quantity, got)
		}
		res, err := b.Store.ReservationGetByID(b.Ctx, domain.Scope{CheckoutID: e.CheckoutID}, *got.ReservationID)
		if err != nil || res == nil {
			t.Fatalf("offer of %s: %+v %v", e.ID, res, err)
		}
		if res.Status != domain.StatusHeld || res.RequestKey != domain.WaitlistOfferKeyPrefix+e.ID || len(res.Lines) != 1 ||
			res.Lines[0].Quantity != e.Quantity || res.Lines[0].Location != loc || res.Lines[0].SKU != e.SKU {
			t.Fatalf("offer of %s: %+v", e.ID, res)
		}
		if d := time.Until(res.ExpiresAt); d <= 0 || d > time.Duration(got.OfferTTLSeconds)*time.Second {
			t.Fatalf("offer of %s expires in %s, want within its %d s", e.ID, d, got.OfferTTLSeconds)
		}
		if n := b.sqlInt(t, `SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND args->>'reservation_id' = $1`, res.ID); n != 1 {
			t.Fatalf("offer of %s has %d expiry jobs, want 1", e.ID, n)
		}
		// Its ledger row and stock event are a reserve's, by the line, for the entry's checkout.
		if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE reservation_id = $1 AND cause = 'reserved' AND actor = 'system:waitlist' AND reserved_delta = $2`,
			res.ID, e.Quantity); n != 1 {
			t.Fatalf("offer of %s has %d reserve ledger rows by system:waitlist, want 1", e.ID, n)
		}
		if n := b.sqlInt(t, `SELECT count(*) FROM stock_events WHERE reservation_id = $1 AND cause = 'reserved' AND checkout_id = $2`, res.ID, e.CheckoutID); n != 1 {
			t.Fatalf("offer of %s has %d reserve stock events for its checkout, want 1", e.ID, n)
		}
	}
}

// requireWaiting checks that the entries still wait.
func (b *testBundle) requireWaiting(t *testing.T, entries ...domain.WaitlistEntry) {
	t.Helper()
	for _, e := range entries {
		if got := b.entry(t, e.ID); got.Status != domain.WaitlistWaiting || got.ReservationID != nil {
			t.Fatalf("entry %s (%s x%d): %+v, want still WAITING", e.ID, e.CheckoutID, e.Quantity, got)
		}
	}
}

// line3 joins three checkouts for 3, 1 and 2 units, in that order.
func (b *testBundle) line3(t *testing.T, sku, loc string) (big, one, two domain.WaitlistEntry) {
	t.Helper()
	return b.mustJoin(t, "w-big", "k", sku, loc, 3), b.mustJoin(t, "w-one", "k", sku, loc, 1), b.mustJoin(t, "w-two", "k", sku, loc, 2)
}

func TestWaitlistReleaseOffersFirstFit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-REL", "L1", 2)
	hold := b.mustCreate(t, "buyer", "r", 600, line("W-REL", "L1", 2))
	big, one, two := b.line3(t, "W-REL", "L1")
	// Two units back: the 3 does not fit and keeps its place; the 1 fits,
	// then one unit is left, which the 2 does not fit.
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: hold.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}
	b.requireOffered(t, "L1", one)
	b.requireWaiting(t, big, two)
	if got := b.entry(t, big.ID); *got.Position != 0 {
		t.Fatalf("the skipped entry lost its place: %+v", got)
	}
	if onHand, reserved := b.Balance(t, "W-REL", "L1"); onHand != 2 || reserved != 1 {
		t.Fatalf("balance %d/%d, want 2 on hand, 1 reserved (the offer)", onHand, reserved)
	}
	b.requireInvariants(t)
}

// shortHold holds all n units of sku at loc for one second and returns it;
// the caller waits past its deadline (pastDeadline) before expiring it.
func (b *testBundle) shortHold(t *testing.T, key, sku, loc string, n int) domain.Reservation {
	t.Helper()
	return b.mustCreate(t, "buyer", key, 1, line(sku, loc, n))
}

// pastDeadline waits until every hold made so far with a 1 s TTL is due.
func pastDeadline() { time.Sleep(1100 * time.Millisecond) }

func TestWaitlistExpiryJobOffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-EXP", "L1", 2)
	hold := b.shortHold(t, "r", "W-EXP", "L1", 2)
	big, one, two := b.line3(t, "W-EXP", "L1")
	pastDeadline()
	if _, expired, err := b.Store.ReservationExpire(b.Ctx, hold.ID); err != nil || !expired {
		t.Fatalf("ReservationExpire: expired=%v %v", expired, err)
	}
	b.requireOffered(t, "L1", one)
	b.requireWaiting(t, big, two)
	b.requireInvariants(t)
}

func TestWaitlistSetExpiryOffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-SET", "L1", 4)
	b.shortHold(t, "r1", "W-SET", "L1", 1)
	b.shortHold(t, "r2", "W-SET", "L1", 3)
	big, one, two := b.line3(t, "W-SET", "L1")
	pastDeadline()
	if n, err := b.Store.ReservationExpireDue(b.Ctx, 100); err != nil || n != 2 {
		t.Fatalf("ReservationExpireDue: %d %v", n, err)
	}
	// Four units back at once: the 3, then the 1; the 2 no longer fits.
	b.requireOffered(t, "L1", big, one)
	b.requireWaiting(t, two)
	b.requireInvariants(t)
}

func TestWaitlistSweeperOffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-SWP", "L1", 3)
	b.shortHold(t, "r", "W-SWP", "L1", 3)
	big, one, two := b.line3(t, "W-SWP", "L1")
	pastDeadline()
	if n, err := b.Store.ReservationSweepOverdue(b.Ctx, 0, 100); err != nil || n != 1 {
		t.Fatalf("ReservationSweepOverdue: %d %v", n, err)
	}
	b.requireOffered(t, "L1", big)
	b.requireWaiting(t, one, two)
	b.requireInvariants(t)
}

func TestWaitlistReceiptOffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.soldOut(t, "W-RCV", "L1", 1)
	big, one, two := b.line3(t, "W-RCV", "L1")
	bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "W-RCV", Location: "L1", Quantity: 2, Reference: nextRef("PO")})
	if err != nil {
		t.Fatal(err)
	}
	// Two in: the 3 does not fit, the 1 does, then the 2 does not fit the one left.
	b.requireOffered(t, "L1", one)
	b.requireWaiting(t, big, two)
	if bal.OnHand != 3 || bal.Reserved != 2 {
		t.Fatalf("StockReceive answered %+v, want the balance after the offer (3 on hand, 2 reserved)", bal)
	}
	b.requireInvariants(t)
}

func TestWaitlistAdjustUpOffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.soldOut(t, "W-ADJ", "L1", 1)
	big, one, two := b.line3(t, "W-ADJ", "L1")
	if _, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "W-ADJ", Location: "L1", Delta: 5, Reason: "correction", Reference: nextRef("adj")}); err != nil {
		t.Fatal(err)
	}
	// Five back: the 3, then the 1 (one left: the 2 does not fit).
	b.requireOffered(t, "L1", big, one)
	b.requireWaiting(t, two)
	b.requireInvariants(t)
}

func TestWaitlistStockSyncOffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.soldOut(t, "W-SYNC", "L1", 1)
	b.soldOut(t, "W-SYNC2", "L1", 1)
	big, one, two := b.line3(t, "W-SYNC", "L1")
	other := b.mustJoin(t, "w-other", "k", "W-SYNC2", "L1", 1)
	res, err := b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: nextRef("sync"), Levels: []domain.StockLevel{
		{SKU: "W-SYNC", Location: "L1", OnHand: 4}, {SKU: "W-SYNC2", Location: "L1", OnHand: 2}}})
	if err != nil || res.Applied != 2 {
		t.Fatalf("StockLevelsSet: %+v %v", res, err)
	}
	// W-SYNC: 3 free: the 3 fits, nothing is left for the 1 and the 2.
	b.requireOffered(t, "L1", big)
	b.requireWaiting(t, one, two)
	b.requireOffered(t, "L1", other)
	for _, bal := range res.Balances {
		if bal.Reserved != bal.OnHand {
			t.Fatalf("sync answered %+v, want the balance after its offers", bal)
		}
	}
	b.requireInvariants(t)
}

func TestWaitlistCodeImportOffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "W-CODES", "L1")
	b.codesImport(t, "W-CODES", "L1", "b1", codeName("A", 1))
	b.mustCreate(t, "buyer", "all", 600, line("W-CODES", "L1", 1))
	big, one, two := b.line3(t, "W-CODES", "L1")
	b.codesImport(t, "W-CODES", "L1", "b2", codeName("B", 1), codeName("B", 2), codeName("B", 3))
	b.requireOffered(t, "L1", big)
	b.requireWaiting(t, one, two)
	// The offer holds three specific codes, as a reserve would.
	resID := *b.entry(t, big.ID).ReservationID
	if n := b.sqlInt(t, `SELECT count(*) FROM codes c JOIN reservation_lines rl ON rl.id = c.reservation_line_id
		WHERE rl.reservation_id = $1 AND c.status = 'held'`, resID); n != 3 {
		t.Fatalf("the offer holds %d codes, want 3", n)
	}
	b.requireCodeInvariants(t)
	b.requireInvariants(t)
}

func TestWaitlistPreorderDeliveryOffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-PRE", "L1", 0)
	b.preorderSet(t, "W-PRE", "L1", 1)
	pre := b.mustCreate(t, "pre-buyer", "k", 600, line("W-PRE", "L1", 1))
	b.codesConfirm(t, pre.ID, "ORD-PRE")
	big, one, two := b.line3(t, "W-PRE", "L1")
	// Three arrive: the confirmed pre-order is filled first, then the line
	// gets the two left: the 3 does not fit, the 1 does, then nothing.
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "W-PRE", Location: "L1", Quantity: 3, Reference: nextRef("PO")}); err != nil {
		t.Fatal(err)
	}
	if p := b.orderLine(t, "ORD-PRE").PendingCodes; p != 0 {
		t.Fatalf("pre-order still pending %d", p)
	}
	b.requireOffered(t, "L1", one)
	b.requireWaiting(t, big, two)
	b.requireInvariants(t)
}

func TestWaitlistOfferReturnsToTheLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-BACK", "L1", 1)
	hold := b.mustCreate(t, "buyer", "r", 600, line("W-BACK", "L1", 1))
	first := b.mustJoin(t, "w1", "k", "W-BACK", "L1", 1)
	second := b.mustJoin(t, "w2", "k", "W-BACK", "L1", 1)
	third := b.mustJoin(t, "w3", "k", "W-BACK", "L1", 1)
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: hold.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}
	b.requireOffered(t, "L1", first)
	b.requireWaiting(t, second, third)
	// The first lets its offer go: the unit passes to the second.
	offer := *b.entry(t, first.ID).ReservationID
	if _, err := b.Store.ReservationRelease(domain.WithActor(b.Ctx, domain.Actor{Role: domain.RoleCheckout, Name: "w1"}),
		domain.Scope{CheckoutID: "w1"}, domain.ReleaseInput{ID: offer, Reason: domain.ReasonCustomerCancelled}); err != nil {
		t.Fatal(err)
	}
	b.requireOffered(t, "L1", second)
	b.requireWaiting(t, third)
	// The second's offer expires unused: the unit passes to the third.
	offer = *b.entry(t, second.ID).ReservationID
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1`, offer); err != nil {
		t.Fatal(err)
	}
	if _, expired, err := b.Store.ReservationExpire(b.Ctx, offer); err != nil || !expired {
		t.Fatalf("expire the offer: %v %v", expired, err)
	}
	b.requireOffered(t, "L1", third)
	if onHand, reserved := b.Balance(t, "W-BACK", "L1"); onHand != 1 || reserved != 1 {
		t.Fatalf("balance %d/%d", onHand, reserved)
	}
	b.requireInvariants(t)
}

func TestWaitlistUnlocatedAndExpiredEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.soldOut(t, "W-ANY", "L1", 1)
	b.Stock(t, "W-ANY", "L2", 0)
	gone := b.mustJoin(t, "w-gone", "k", "W-ANY", "", 1)
	anywhere := b.mustJoin(t, "w-any", "k", "W-ANY", "", 1)
	atL1 := b.mustJoin(t, "w-l1", "k", "W-ANY", "L1", 1)
	if got := b.entry(t, atL1.ID); *got.Position != 2 {
		t.Fatalf("the L1 entry has %d ahead, want 2 (unlocated entries wait for L1 too)", *got.Position)
	}
	// The first entry's TTL passed (its expiry has not run): it is skipped.
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE waitlist_entries SET expires_at = now() - interval '1 second' WHERE id = $1`, gone.ID); err != nil {
		t.Fatal(err)
	}
	if got := b.entry(t, gone.ID); got.Status != domain.WaitlistExpired || got.Position != nil {
		t.Fatalf("entry past its TTL reads %+v", got)
	}
	b.Stock(t, "W-ANY", "L2", 1)
	b.requireOffered(t, "L2", anywhere)
	b.requireWaiting(t, atL1)
	if n, err := b.Store.WaitlistExpireDue(b.Ctx, 100); err != nil || n != 1 {
		t.Fatalf("WaitlistExpireDue: %d %v", n, err)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries WHERE status = 'expired'`); n != 1 {
		t.Fatalf("%d expired entries, want 1", n)
	}
	b.requireInvariants(t)
}

// TestWaitlistOfferProbesWhenNothingFits: with 10,000 entries waiting for 2
// units and one unit free, the offer statement each freeing path runs must
// not walk the line (the free unit fits nobody): it reads a handful of
// index pages, measured with EXPLAIN (ANALYZE, BUFFERS) in a transaction
// that is rolled back.
func TestWaitlistOfferProbesWhenNothingFits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-PROBE", "L1", 2)
	b.mustCreate(t, "buyer", "r", 600, line("W-PROBE", "L1", 1))
	var skuID, locID int64
	if err := b.Pool.QueryRow(b.Ctx, `SELECT s.id, l.id FROM skus s, locations l WHERE s.code = 'W-PROBE' AND l.code = 'L1'`).Scan(&skuID, &locID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool.Exec(b.Ctx, `
		INSERT INTO waitlist_entries (checkout_id, request_key, fingerprint, sku_id, location_id, quantity, offer_ttl_seconds, expires_at)
		SELECT 'w' || g, 'k', '\x00', $1, $2, 2, 900, now() + interval '1 hour' FROM generate_series(1, 10000) g`, skuID, locID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool.Exec(b.Ctx, `VACUUM ANALYZE waitlist_entries`); err != nil {
		t.Fatal(err)
	}
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.Ctx)
	for _, c := range []struct {
		name, statement string
		args            []any
	}{
		{"scope", store.ScopeStatement, []any{[]int64{skuID}, []int64{locID}, []string{}}},
		{"offer", store.OfferStatement, []any{[]int64{skuID}, []int64{locID}, "test", []string{}, []string{}}},
	} {
		var plan []map[string]any
		if err := tx.QueryRow(b.Ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+c.statement, c.args...).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		top := plan[0]["Plan"].(map[string]any)
		blocks := top["Shared Hit Blocks"].(float64) + top["Shared Read Blocks"].(float64)
		if blocks > 40 {
			t.Fatalf("the %s statement read %.0f pages with one unit free that fits none of 10,000 entries, want a probe (at most 40)", c.name, blocks)
		}
		t.Logf("%s: %.0f pages", c.name, blocks)
	}
}

// TestWaitlistSetExpiryOffersManyAtOnce: one set-based expiry of 300 holds
// offers 300 units to a line of 400 single-unit entries in the same
// transaction: the first 300 in join order, each with its own hold and
// expiry job, the last 100 still waiting.
func TestWaitlistSetExpiryOffersManyAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const holds, line = 300, 400
	b.Stock(t, "W-MANY", "L1", holds)
	if _, err := b.Pool.Exec(b.Ctx, `
		WITH r AS (
			INSERT INTO reservations (checkout_id, request_key, fingerprint, expires_at)
			SELECT 'seed', 'k' || g, '\x00', now() - interval '1 second' FROM generate_series(1, $1) g RETURNING id
		), l AS (
			INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity)
			SELECT r.id, 0, b.sku_id, b.location_id, 1 FROM r, balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = 'W-MANY'
		), m AS (
			INSERT INTO stock_movements (sku_id, location_id, reserved_delta, cause, actor)
			SELECT b.sku_id, b.location_id, $1, 'reserved', 'test' FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = 'W-MANY'
		)
		UPDATE balances b SET reserved = $1 FROM skus s WHERE s.id = b.sku_id AND s.code = 'W-MANY'`, holds); err != nil {
		t.Fatal(err)
	}
	for i := range line {
		b.mustJoin(t, fmt.Sprintf("w-%03d", i), "k", "W-MANY", "L1", 1)
	}
	start := time.Now()
	if n, err := b.Store.ReservationExpireDue(b.Ctx, 1000); err != nil || n != holds {
		t.Fatalf("ReservationExpireDue: %d %v", n, err)
	}
	t.Logf("one set: %d holds expired and %d offers made in %s", holds, holds, time.Since(start))
	if n := b.sqlInt(t, `
		SELECT count(*) FROM waitlist_entries w
		JOIN river_job j ON j.kind = 'reservation_expiry' AND j.args->>'reservation_id' = w.reservation_id::text
		WHERE w.status = 'offered' AND w.checkout_id < 'w-300'`); n != holds {
		t.Fatalf("%d of the first %d entries offered with an expiry job", n, holds)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries WHERE status = 'waiting' AND checkout_id >= 'w-300'`); n != line-holds {
		t.Fatalf("%d of the last %d entries still waiting", n, line-holds)
	}
	b.requireInvariants(t)
}
