package store_test

import (
	"context"
	"testing"
	"time"

	"inventory/domain"
)

// The deadline is checked after the reservation's row lock is granted (docs/design.md,
// "The hold state machine"): a confirm or extend that started before the
// deadline but had to wait for the lock until after it is RESERVATION_EXPIRED.
//
// The lock here is held by a transaction that then changes nothing, as the
// expiry job does when it runs a moment early and finds the hold not yet due,
// or as a confirm does that is refused (an orderRef taken by another order, a
// snapshot for a SKU not in the basket) after locking the row.
func TestReservationDeadlineCheckedAfterLockWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		call func(b *testBundle, id string) (domain.Reservation, error)
	}{
		{"confirm", func(b *testBundle, id string) (domain.Reservation, error) {
			return b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: id, OrderRef: "ORD-after-wait"})
		}},
		{"extend", func(b *testBundle, id string) (domain.Reservation, error) {
			return b.Store.ReservationExtend(b.Ctx, domain.Scope{}, domain.ExtendInput{ID: id, TTLSeconds: 900})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.Stock(t, "WAIT", "AMS", 5)
			res := b.reserve(t, "cart-wait", "k", "WAIT", ptr("AMS"), 1, 2)

			// Another transaction locks the hold and keeps it past the deadline.
			locker, err := b.Pool.Begin(b.Ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer locker.Rollback(context.Background()) //nolint:errcheck
			if _, err := locker.Exec(b.Ctx, `SELECT FROM reservations WHERE id = $1 FOR UPDATE`, res.ID); err != nil {
				t.Fatal(err)
			}

			type outcome struct {
				res domain.Reservation
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				r, err := tc.call(b, res.ID)
				done <- outcome{r, err}
			}()
			// The call is waiting for the row lock, well before the deadline.
			waitForLockWait(t, b, res.ExpiresAt)

			time.Sleep(time.Until(res.ExpiresAt) + 300*time.Millisecond)
			if err := locker.Rollback(b.Ctx); err != nil { // changed nothing
				t.Fatal(err)
			}
			got := <-done
			if got.err == nil {
				t.Fatalf("%s got the row lock 300 ms after the deadline %s and still succeeded: status %s, expires_at now %s",
					tc.name, res.ExpiresAt.Format(time.RFC3339Nano), got.res.Status, got.res.ExpiresAt.Format(time.RFC3339Nano))
			}
			requireCode(t, got.err, domain.CodeReservationExpired)
			if s, _ := b.statusOf(res.ID); s != "held" {
				t.Fatalf("status %s, want held until the expiry job runs", s)
			}
			if on, rsv := b.Balance(t, "WAIT", "AMS"); on != 5 || rsv != 1 {
				t.Fatalf("on_hand %d reserved %d, want 5 and 1", on, rsv)
			}
			b.requireInvariants(t)
		})
	}
}

// waitForLockWait waits until some session of the test's database waits for a
// lock, failing the test if that does not happen before by.
func waitForLockWait(t *testing.T, b *testBundle, by time.Time) {
	t.Helper()
	for {
		var waiting int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			if time.Until(by) < 200*time.Millisecond {
				t.Fatalf("the call only started waiting for the lock %s before the deadline", time.Until(by))
			}
			return
		}
		if time.Now().After(by) {
			t.Fatal("the call did not wait for the row lock before the deadline")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
