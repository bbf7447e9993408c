package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/domain"
	"inventory/store"
	"inventory/testkit"
)

// Helpers for the reservation concurrency and edge-case tests. The ones that
// return errors instead of failing the test are for goroutines, which must not
// call t.Fatal; they report with t.Errorf.

// sqlInt runs a query returning one integer (typically a count).
func (b *testBundle) sqlInt(t *testing.T, query string, args ...any) int {
	t.Helper()
	n, err := b.queryInt(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// queryInt is sqlInt for goroutines.
func (b *testBundle) queryInt(query string, args ...any) (int, error) {
	var n int
	err := b.Pool.QueryRow(b.Ctx, query, args...).Scan(&n)
	return n, err
}

// balanceOf reads on_hand and reserved of one balance, for goroutines.
func (b *testBundle) balanceOf(sku, location string) (onHand, reserved int, err error) {
	err = b.Pool.QueryRow(b.Ctx, `SELECT on_hand, reserved FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
		WHERE s.code = $1 AND l.code = $2`, sku, location).Scan(&onHand, &reserved)
	return onHand, reserved, err
}

// statusOf reads a reservation's status as stored ('held', 'confirmed', ...).
func (b *testBundle) statusOf(id string) (string, error) {
	var status string
	err := b.Pool.QueryRow(b.Ctx, `SELECT status FROM reservations WHERE id = $1`, id).Scan(&status)
	return status, err
}

// create calls ReservationCreate with a basket.
func (b *testBundle) create(checkout, key string, ttl int, lines ...domain.ReserveLine) (domain.Reservation, bool, error) {
	return b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: checkout, RequestKey: key, TTLSeconds: ttl, Lines: lines})
}

// mustCreate is create failing the test on any error.
func (b *testBundle) mustCreate(t *testing.T, checkout, key string, ttl int, lines ...domain.ReserveLine) domain.Reservation {
	t.Helper()
	res, _, err := b.create(checkout, key, ttl, lines...)
	if err != nil {
		t.Fatalf("reserve %s/%s: %v", checkout, key, err)
	}
	return res
}

// line builds a reserve line; location "" means "source it".
func line(sku, location string, q int) domain.ReserveLine {
	l := domain.ReserveLine{SKU: sku, Quantity: q}
	if location != "" {
		l.Location = ptr(location)
	}
	return l
}

// allowedErr returns nil when err is nil or a *domain.Error whose code is one
// of allowed, and a description of the problem otherwise. Anything that is not
// a business error (a raw database error, a wrapped deadlock) is never allowed.
func allowedErr(op string, err error, allowed ...domain.ErrorCode) error {
	if err == nil {
		return nil
	}
	e, ok := domain.AsError(err)
	if !ok {
		return fmt.Errorf("%s: not a business error: %v", op, err)
	}
	if !slices.Contains(allowed, e.Code) {
		return fmt.Errorf("%s: code %s is not one of %v: %v", op, e.Code, allowed, err)
	}
	return nil
}

// isCode reports whether err is a business error with code.
func isCode(err error, code domain.ErrorCode) bool {
	e, ok := domain.AsError(err)
	return ok && e.Code == code
}

// expireLikeWorker does what the River expiry worker does with a job for id:
// ReservationExpire, and while that answers "not yet due", snooze until the
// deadline (plus the worker's 10 ms) and run again.
func (b *testBundle) expireLikeWorker(ctx context.Context, id string) (snoozes int, err error) {
	for {
		notBefore, _, err := b.Store.ReservationExpire(ctx, id)
		if err != nil || notBefore == nil {
			return snoozes, err
		}
		snoozes++
		if snoozes > 5 {
			return snoozes, fmt.Errorf("expiry of %s snoozed %d times (notBefore %s)", id, snoozes, notBefore)
		}
		time.Sleep(max(time.Until(*notBefore), 0) + 10*time.Millisecond)
	}
}

// ledgerCauses counts a reservation's stock_movements rows by cause.
func (b *testBundle) ledgerCauses(id string) (map[string]int, error) {
	rows, err := b.Pool.Query(b.Ctx, `SELECT cause, count(*)::int FROM stock_movements WHERE reservation_id = $1 GROUP BY cause`, id)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var cause string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&cause, &n}, func() error { out[cause] = n; return nil })
	return out, err
}

// deadlocksSoFar reads pg_stat_database.deadlocks for this test's database.
//
// The counter is best-effort: a backend keeps its statistics in local memory and
// flushes them to shared memory at most once a second while busy (PostgreSQL
// 15+), and always when it exits. So that deadlocks detected by the pool's own
// backends are counted, this closes the pool's connections (the pool reconnects
// on its next use), waits until those backends have left pg_stat_activity (in
// PostgreSQL 15 a backend flushes its statistics before it leaves it), and
// reads the counter on a connection of its own after pg_stat_clear_snapshot().
func (b *testBundle) deadlocksSoFar(t *testing.T) int64 {
	t.Helper()
	b.Pool.Reset()
	conn, err := pgx.ConnectConfig(b.Ctx, b.Pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for {
		var others int
		if err := conn.QueryRow(b.Ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).
			Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("deadlock counter: %d other backends still connected; reading it anyway", others)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var n int64
	if _, err := conn.Exec(b.Ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(b.Ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// secondInstance is another Store on b's database with a pool of its own, as
// a second server instance has: its coalescers batch apart from b.Store's.
func (b *testBundle) secondInstance(t *testing.T) *store.Store {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(b.Ctx, b.Pool.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return testkit.NewStore(t, pool)
}
