package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestRequestTimeoutAbandonsCoalescedReserve: INVENTORY_REQUEST_TIMEOUT holds
// on the coalesced path too. A single-line reserve (which joins a batch)
// behind a balance row held locked is abandoned after about the timeout, not
// when the lock is freed, and leaves nothing: its batch, awaited by no one,
// rolls back. The same key afterwards is a fresh hold.
func TestRequestTimeoutAbandonsCoalescedReserve(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_REQUEST_TIMEOUT": "1s"})
	ts.seed("HP", 5)
	tx, err := ts.db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	if _, err := tx.Exec(t.Context(), `SELECT FROM balances FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	freed := time.AfterFunc(6*time.Second, func() { _ = tx.Rollback(t.Context()) })
	defer freed.Stop()
	start := time.Now()
	r := ts.gql(ts.service, reserveMutation, reserveVars("cart-1", "k1", "HP", 1))
	took := time.Since(start)
	if r.errorCode() != "INTERNAL" || !strings.Contains(r.Errors[0].Message, "took too long") || took > 3*time.Second {
		t.Fatalf("after %v: %+v, want the reserve abandoned after about 1 s (the lock was held 6 s)", took, r)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The abandoned batch has rolled back once a later reserve is served.
	if p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-2", "k1", "HP", 1))); err != nil || p.Reservation == nil {
		t.Fatalf("reserve after the lock: %+v %v", p, err)
	}
	if n := ts.count(`SELECT count(*) FROM reservations WHERE checkout_id = 'cart-1'`); n != 0 {
		t.Fatalf("%d reservations left by the abandoned reserve, want 0", n)
	}
	if n := ts.count(`SELECT reserved FROM balances`); n != 1 {
		t.Fatalf("reserved %d, want 1", n)
	}
	p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-1", "k1", "HP", 1)))
	if err != nil || p.Reservation == nil || p.Replayed {
		t.Fatalf("the abandoned key again: %+v %v; want a fresh hold", p, err)
	}
}
