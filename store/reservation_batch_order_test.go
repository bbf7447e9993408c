package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/domain"
	"inventory/testkit"
)

// TestReserveBatchesOfTwinKeysNeverDeadlock: two instances batch the same
// (checkout, requestKey) pairs (a client retrying at another instance, or a
// load balancer fanning a retry out) in opposite orders. A batch that
// inserted its reservation rows in arrival order held one key's index entry
// while waiting for the other's, and the other batch the reverse: a
// deadlock, broken only after deadlock_timeout and counted in
// pg_stat_database. Inserting in key order makes the second batch wait for
// the first and then replay. Counted in SQL: no deadlock, one hold per key.
func TestReserveBatchesOfTwinKeysNeverDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HP", domain.KindQuantity)
	const rounds, keys = 20, 16
	mustReceive(t, b, "HP", "AMS", rounds*keys)
	// A second instance, whose pool is reset before the counter is read so
	// that its backends flush their statistics too (see deadlocksSoFar).
	pool, err := pgxpool.NewWithConfig(b.Ctx, b.Pool.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	other := testkit.NewStore(t, pool)
	ams := "AMS"
	before := b.deadlocksSoFar(t)
	start := time.Now()
	held := 0
	for round := range rounds {
		var ins []domain.ReserveInput
		for k := range keys {
			ins = append(ins, domain.ReserveInput{CheckoutID: fmt.Sprintf("cart-%d", k), RequestKey: fmt.Sprintf("round-%d", round),
				TTLSeconds: 600, Lines: []domain.ReserveLine{{SKU: "HP", Location: &ams, Quantity: 1}}})
		}
		reversed := slices.Clone(ins)
		slices.Reverse(reversed)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, st := range []interface {
			ReserveBatchInOrder(ctx context.Context, ins []domain.ReserveInput) (int, error)
		}{b.Store, other} {
			wg.Go(func() {
				n, err := st.ReserveBatchInOrder(b.Ctx, [][]domain.ReserveInput{ins, reversed}[i])
				if err != nil {
					t.Errorf("round %d, instance %d: %v", round, i, err)
				}
				mu.Lock()
				held += n
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if held != rounds*keys {
		t.Errorf("%d holds made by the batches, want %d (one per key)", held, rounds*keys)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE status = 'held'`); n != rounds*keys {
		t.Errorf("%d held reservations in SQL, want %d", n, rounds*keys)
	}
	if _, reserved := b.Balance(t, "HP", "AMS"); reserved != rounds*keys {
		t.Errorf("reserved %d, want %d", reserved, rounds*keys)
	}
	took := time.Since(start)
	pool.Reset()
	d := b.deadlocksSoFar(t) - before
	t.Logf("%d rounds of twin batches of %d keys in opposite orders: %d deadlocks, %v", rounds, keys, d, took.Round(time.Millisecond))
	if d != 0 {
		t.Errorf("%d deadlocks in %d rounds of twin batches in opposite orders, want 0", d, rounds)
	}
	b.requireInvariants(t)
}

// TestConfirmBatchesOfTwinOrderRefsNeverDeadlock: two instances confirm
// different holds under the same orderRefs (a hostile or buggy payment
// backend), in opposite orders. Orders inserted in arrival order crossed:
// each batch held one ref while waiting for the other's. In ref order the
// second waits and leaves the taken refs out (ALREADY_EXISTS when decided
// alone). Counted in SQL: no deadlock, one order per ref.
func TestConfirmBatchesOfTwinOrderRefsNeverDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HP", domain.KindQuantity)
	const rounds, refs = 10, 64
	mustReceive(t, b, "HP", "AMS", 2*rounds*refs)
	pool, err := pgxpool.NewWithConfig(b.Ctx, b.Pool.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	other := testkit.NewStore(t, pool)
	before := b.deadlocksSoFar(t)
	start := time.Now()
	confirmed := 0
	for round := range rounds {
		var mine, theirs []domain.ConfirmInput
		for k := range refs {
			ref := fmt.Sprintf("ORD-%d-%d", round, k)
			a := b.reserve(t, fmt.Sprintf("cart-a%d", k), fmt.Sprint("r", round), "HP", ptr("AMS"), 1, 600)
			c := b.reserve(t, fmt.Sprintf("cart-b%d", k), fmt.Sprint("r", round), "HP", ptr("AMS"), 1, 600)
			mine = append(mine, domain.ConfirmInput{ID: a.ID, OrderRef: ref})
			theirs = append(theirs, domain.ConfirmInput{ID: c.ID, OrderRef: ref})
		}
		slices.Reverse(theirs)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, st := range []interface {
			ConfirmBatchInOrder(ctx context.Context, ins []domain.ConfirmInput) (int, error)
		}{b.Store, other} {
			wg.Go(func() {
				n, err := st.ConfirmBatchInOrder(b.Ctx, [][]domain.ConfirmInput{mine, theirs}[i])
				if err != nil {
					t.Errorf("round %d, instance %d: %v", round, i, err)
				}
				mu.Lock()
				confirmed += n
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	took := time.Since(start)
	pool.Reset()
	d := b.deadlocksSoFar(t) - before
	t.Logf("%d rounds of confirm batches of %d twin orderRefs in opposite orders: %d deadlocks, %v", rounds, refs, d, took.Round(time.Millisecond))
	if confirmed != rounds*refs {
		t.Errorf("%d confirmed by the batches, want %d (one per ref)", confirmed, rounds*refs)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM orders`); n != rounds*refs {
		t.Errorf("%d orders in SQL, want %d", n, rounds*refs)
	}
	if d != 0 {
		t.Errorf("%d deadlocks in %d rounds of twin confirm batches in opposite orders, want 0", d, rounds)
	}
	b.requireInvariants(t)
}
