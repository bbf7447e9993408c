package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
	"inventory/pgtest"
)

// listenWaitlist LISTENs on the waitlist channel on a connection of its own.
func (b *testBundle) listenWaitlist(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(b.Ctx, pgtest.DirectURL(t, b.Pool.Config().ConnConfig.ConnString())) // LISTEN needs a session
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(b.Ctx, "LISTEN "+domain.WaitlistChannel); err != nil {
		t.Fatal(err)
	}
	return conn
}

// requireNotified waits for the next notification on conn and fails unless
// it names checkout.
func requireNotified(t *testing.T, conn *pgx.Conn, checkout, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("%s: no notification for %s: %v", what, checkout, err)
	}
	if n.Channel != domain.WaitlistChannel || n.Payload != checkout {
		t.Fatalf("%s: notification %s %q, want %s %q", what, n.Channel, n.Payload, domain.WaitlistChannel, checkout)
	}
}

// TestWaitlistStatusChangesNotify: every transaction that changes an entry's
// status — join, offer (here by a release), leave, expiry by its job and
// set-based — notifies the entry's checkout on domain.WaitlistChannel, which
// waitlistChanged subscribers are woken by; WaitlistEntriesForCheckout then
// reads the change.
func TestWaitlistStatusChangesNotify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn := b.listenWaitlist(t)
	hold := b.soldOut(t, "W-NOTE", "L1", 1)

	offered := b.mustJoin(t, "n-offer", "k", "W-NOTE", "L1", 1)
	requireNotified(t, conn, "n-offer", "join")
	left := b.mustJoin(t, "n-leave", "k", "W-NOTE", "L1", 1)
	requireNotified(t, conn, "n-leave", "join")
	byJob := b.mustJoin(t, "n-job", "k", "W-NOTE", "L1", 1)
	requireNotified(t, conn, "n-job", "join")
	bySet := b.mustJoin(t, "n-set", "k", "W-NOTE", "L1", 1)
	requireNotified(t, conn, "n-set", "join")

	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: hold.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}
	requireNotified(t, conn, "n-offer", "offer by release")
	if e := b.entry(t, offered.ID); e.Status != domain.WaitlistOffered {
		t.Fatalf("first entry after the release: %+v", e)
	}

	if _, err := b.Store.WaitlistLeave(b.Ctx, domain.Scope{}, left.ID); err != nil {
		t.Fatal(err)
	}
	requireNotified(t, conn, "n-leave", "leave")

	if _, err := b.Pool.Exec(b.Ctx, `UPDATE waitlist_entries SET expires_at = now() - interval '1 second' WHERE id = ANY($1)`, []string{byJob.ID, bySet.ID}); err != nil {
		t.Fatal(err)
	}
	if _, expired, err := b.Store.WaitlistExpire(b.Ctx, byJob.ID); err != nil || !expired {
		t.Fatalf("WaitlistExpire: %v %v", expired, err)
	}
	requireNotified(t, conn, "n-job", "expiry by job")
	if n, err := b.Store.WaitlistExpireDue(b.Ctx, 100); err != nil || n != 1 {
		t.Fatalf("WaitlistExpireDue: %d %v", n, err)
	}
	requireNotified(t, conn, "n-set", "set-based expiry")

	// The feed reads each checkout's changed entries in its window.
	for checkout, want := range map[string]domain.WaitlistStatus{"n-offer": domain.WaitlistOffered, "n-leave": domain.WaitlistLeft,
		"n-job": domain.WaitlistExpired, "n-set": domain.WaitlistExpired} {
		got, _, err := b.Store.WaitlistEntriesForCheckout(b.Ctx, checkout, nil)
		if err != nil || len(got) != 1 || got[0].Status != want || got[0].CheckoutID != checkout {
			t.Fatalf("feed of %s: %+v %v, want one %s", checkout, got, err, want)
		}
	}
	// Outside the window an ended entry is no longer read; a waiting one is.
	future := time.Now().Add(time.Hour)
	if got, _, err := b.Store.WaitlistEntriesForCheckout(b.Ctx, "n-leave", &future); err != nil || len(got) != 0 {
		t.Fatalf("feed of n-leave since an hour ahead: %+v %v", got, err)
	}
	b.Stock(t, "W-NOTE2", "L1", 0)
	waiting := b.mustJoin(t, "n-leave", "k2", "W-NOTE2", "L1", 1)
	if got, _, err := b.Store.WaitlistEntriesForCheckout(b.Ctx, "n-leave", &future); err != nil || len(got) != 1 || got[0].ID != waiting.ID || got[0].Status != domain.WaitlistWaiting || got[0].Position != nil {
		t.Fatalf("feed of n-leave's waiting entry: %+v %v", got, err)
	}
	// Nothing else was notified.
	ctx, cancel := context.WithTimeout(b.Ctx, 300*time.Millisecond)
	defer cancel()
	requireNotified(t, conn, "n-leave", "second join")
	if n, err := conn.WaitForNotification(ctx); err == nil {
		t.Fatalf("unexpected notification %q", n.Payload)
	}
}
