package store_test

import (
	"testing"
	"time"

	"inventory/domain"
)

// Offer tests: every path that frees units hands them to the line in the
// same transaction, first-fit in join order.

// offeredTo reads the entries' status and the reservation each was offered,
// checking in SQL that an offered entry's reservation is HELD for its
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
