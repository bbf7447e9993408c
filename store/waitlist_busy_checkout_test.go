package store_test

import (
	"sync"
	"testing"
	"time"

	"inventory/codefile"
	"inventory/domain"
	"inventory/store"
)

// holdCheckoutLock takes checkout's lock in a transaction of its own, as a
// reserve of that checkout in flight holds it, until the returned func
// commits it.
func (b *testBundle) holdCheckoutLock(t *testing.T, checkout string) (release func()) {
	t.Helper()
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(b.Ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, store.CheckoutLockSpace, checkout); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := tx.Commit(b.Ctx); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// TestWaitlistOfferWaitsForABusyCheckout: the checkout first in line is
// busy (another transaction, say its own reserve, holds its lock) when a
// release frees the unit. The release cannot count that checkout's holds
// exactly, and must not wait for its lock while holding the balance (the
// reserve may be waiting for the balance): it runs again, taking the
// checkout's lock first, so it waits until the checkout is free, offers
// nothing past it meanwhile, and then offers the unit to it, first in line.
func TestWaitlistOfferWaitsForABusyCheckout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sold := b.soldOut(t, "W-BUSY", "L1", 1)
	first, err := b.capJoin("busy", "k", "W-BUSY", "L1", 1, capLimits)
	if err != nil {
		t.Fatal(err)
	}
	next := b.mustJoin(t, "next", "k", "W-BUSY", "L1", 1)
	free := b.holdCheckoutLock(t, "busy")
	done := make(chan error, 1)
	go func() {
		_, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: sold.ID, Reason: domain.ReasonOther})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the release finished while the checkout first in line was busy: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries WHERE status = 'offered'`); n != 0 {
		t.Fatalf("%d offers made while the first in line was busy", n)
	}
	free()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the release did not finish once the checkout was free")
	}
	b.requireOffered(t, "L1", first)
	b.requireWaiting(t, next)
	b.requireInvariants(t)
}

// TestWaitlistCodeImportPassesOverABusyCheckout: a code import cannot run
// again (its lines are read once), so when the checkout first in line is
// busy it neither waits for that checkout's lock (a possible cycle) nor
// guesses its holds: it passes the entry over — without a reason, as no cap
// was found broken — and offers the codes to the next in line. The busy
// checkout gets no hold.
func TestWaitlistCodeImportPassesOverABusyCheckout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "W-CBUSY", "L1")
	b.codesImport(t, "W-CBUSY", "L1", "b1", codeName("A", 1))
	b.mustCreate(t, "buyer", "all", 600, line("W-CBUSY", "L1", 1))
	first, err := b.capJoin("busy", "k", "W-CBUSY", "L1", 1, capLimits)
	if err != nil {
		t.Fatal(err)
	}
	next := b.mustJoin(t, "next", "k", "W-CBUSY", "L1", 1)
	free := b.holdCheckoutLock(t, "busy")
	done := make(chan error, 1)
	go func() {
		_, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "W-CBUSY", Location: "L1", BatchRef: "b2"}, codefile.List([]string{codeName("B", 1)}))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the import waited for the busy checkout")
	}
	free()
	b.requireOffered(t, "L1", next)
	if got := b.entry(t, first.ID); got.Status != domain.WaitlistWaiting || *got.Position != 0 || got.SkippedReason != nil {
		t.Fatalf("the busy checkout's entry: %+v", got)
	}
	if n := b.sqlInt(t, liveHolds, "busy"); n != 0 {
		t.Fatalf("the busy checkout has %d holds", n)
	}
	b.requireCodeInvariants(t)
	b.requireInvariants(t)
}
