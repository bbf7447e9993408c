package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/domain"
)

// lockBalance holds sku@loc's balance row FOR UPDATE in a transaction of its
// own, as a slow writer would, until the returned func is called.
func (b *testBundle) lockBalance(t *testing.T, sku, loc string) (unlock func()) {
	t.Helper()
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(b.Ctx, `SELECT FROM balances WHERE (sku_id, location_id) =
		((SELECT id FROM skus WHERE code = $1), (SELECT id FROM locations WHERE code = $2)) FOR UPDATE`, sku, loc); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unlock = func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(unlock)
	return unlock
}

// waitLockWaiters waits until n backends of this database wait for a lock.
func (b *testBundle) waitLockWaiters(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := b.sqlInt(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends wait for a lock after 10 s, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reserveOne is a coalescable reserve of one unit of sku@AMS.
func reserveOne(checkout, key, sku string) domain.ReserveInput {
	ams := "AMS"
	return domain.ReserveInput{CheckoutID: checkout, RequestKey: key, TTLSeconds: 600,
		Lines: []domain.ReserveLine{{SKU: sku, Location: &ams, Quantity: 1}}}
}

type reserveAnswer struct {
	res      domain.Reservation
	replayed bool
	err      error
	took     time.Duration
}

// reserveAsync starts a reserve with ctx and answers on the channel.
func (b *testBundle) reserveAsync(ctx context.Context, in domain.ReserveInput) <-chan reserveAnswer {
	ch := make(chan reserveAnswer, 1)
	go func() {
		start := time.Now()
		res, replayed, err := b.Store.ReservationCreate(ctx, in)
		ch <- reserveAnswer{res, replayed, err, time.Since(start)}
	}()
	return ch
}

// TestCoalescedReserveHonoursItsDeadline: a hot balance is held locked while
// a reserve with a 300 ms deadline waits in the coalescer. It must return in
// about its deadline, not when the lock is freed (batches ran on
// context.Background() with a 30 s timeout, and submit waited with no
// context), and afterwards SQL must agree with its answer: a request that gave
// up alone in its batch left nothing (the batch was cancelled), one that gave
// up while queued left nothing, and one that gave up in a batch that went on
// for others was decided by it — the retry with the same key says so
// (replayed).
func TestCoalescedReserveHonoursItsDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HOT", domain.KindQuantity)
	mustSKU(t, b, "COLD", domain.KindQuantity)
	mustReceive(t, b, "HOT", "AMS", 100)
	mustReceive(t, b, "COLD", "AMS", 100)
	const patience = 300 * time.Millisecond
	const holdFor = 3 * time.Second
	requireGaveUp := func(what string, a reserveAnswer) {
		t.Helper()
		if !errors.Is(a.err, context.DeadlineExceeded) || a.took > patience+time.Second {
			t.Fatalf("%s: answered %+v, %v after %v; want its deadline exceeded after about %v (the lock was held %v)",
				what, a.res, a.err, a.took, patience, holdFor)
		}
	}
	keyRows := func(checkout, key string) int {
		return b.sqlInt(t, `SELECT count(*) FROM reservations WHERE checkout_id = $1 AND request_key = $2`, checkout, key)
	}

	// 1. Alone in its batch, behind the lock.
	unlock := b.lockBalance(t, "HOT", "AMS")
	time.AfterFunc(holdFor, unlock)
	ctx, cancel := context.WithTimeout(b.Ctx, patience)
	a := <-b.reserveAsync(ctx, reserveOne("cart-1", "k", "HOT"))
	cancel()
	requireGaveUp("alone in its batch", a)
	// A reserve with no deadline queues behind the same lock and is held
	// once it is freed: the coalescer is not stuck.
	if res, _, err := b.Store.ReservationCreate(b.Ctx, reserveOne("cart-2", "k", "HOT")); err != nil || res.Status != domain.StatusHeld {
		t.Fatalf("reserve after the lock: %+v, %v", res, err)
	}
	if n := keyRows("cart-1", "k"); n != 0 {
		t.Fatalf("the request that gave up alone left %d reservation rows", n)
	}
	if _, reserved := b.Balance(t, "HOT", "AMS"); reserved != 1 {
		t.Fatalf("reserved %d after one hold and one abandoned request, want 1", reserved)
	}
	if res, replayed, err := b.Store.ReservationCreate(b.Ctx, reserveOne("cart-1", "k", "HOT")); err != nil || replayed || res.Status != domain.StatusHeld {
		t.Fatalf("retry of the abandoned request: %+v replayed=%v, %v; want a fresh hold", res, replayed, err)
	}

	// 2. Queued: every leader slot is busy behind the lock.
	unlock = b.lockBalance(t, "HOT", "AMS")
	var busy []<-chan reserveAnswer
	for i := range 4 {
		busy = append(busy, b.reserveAsync(b.Ctx, reserveOne(fmt.Sprint("busy-", i), "k", "HOT")))
		b.waitLockWaiters(t, i+1) // each its own batch, one leader slot each
	}
	ctx, cancel = context.WithTimeout(b.Ctx, patience)
	a = <-b.reserveAsync(ctx, reserveOne("cart-3", "k", "COLD"))
	cancel()
	requireGaveUp("queued", a)
	unlock()
	for i, ch := range busy {
		if a := <-ch; a.err != nil {
			t.Fatalf("busy reserve %d: %v", i, a.err)
		}
	}
	if n := keyRows("cart-3", "k"); n != 0 {
		t.Fatalf("the request that gave up queued left %d reservation rows", n)
	}

	// 3. In a batch that goes on for another request: decided by the batch.
	unlockHot := b.lockBalance(t, "HOT", "AMS")
	busy = busy[:0]
	for i := range 4 {
		busy = append(busy, b.reserveAsync(b.Ctx, reserveOne(fmt.Sprint("busy-", i), "k2", "HOT")))
		b.waitLockWaiters(t, i+1)
	}
	unlockCold := b.lockBalance(t, "COLD", "AMS")
	ctx, cancel = context.WithTimeout(b.Ctx, 2*time.Second)
	defer cancel()
	impatient := b.reserveAsync(ctx, reserveOne("cart-4", "k", "COLD"))
	patient := b.reserveAsync(b.Ctx, reserveOne("cart-5", "k", "COLD"))
	time.Sleep(100 * time.Millisecond) // both queued
	unlockHot()                        // a leader takes both into one batch, behind the COLD lock
	for i, ch := range busy {
		if a := <-ch; a.err != nil {
			t.Fatalf("busy reserve %d: %v", i, a.err)
		}
	}
	if a := <-impatient; !errors.Is(a.err, context.DeadlineExceeded) || a.took > 3*time.Second {
		t.Fatalf("impatient reserve in a running batch: %+v, %v after %v", a.res, a.err, a.took)
	}
	unlockCold()
	if a := <-patient; a.err != nil || a.res.Status != domain.StatusHeld {
		t.Fatalf("patient reserve in the same batch: %+v, %v", a.res, a.err)
	}
	if n := keyRows("cart-4", "k"); n != 1 {
		t.Fatalf("the request that gave up in a batch that went on: %d reservation rows, want 1", n)
	}
	if res, replayed, err := b.Store.ReservationCreate(b.Ctx, reserveOne("cart-4", "k", "COLD")); err != nil || !replayed || res.Status != domain.StatusHeld {
		t.Fatalf("retry of the request its batch decided: %+v replayed=%v, %v; want the hold, replayed", res, replayed, err)
	}
	b.requireInvariants(t)
}

// syncBuffer is a bytes.Buffer safe for a logger shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBatchPanicFailsItsRequestsOnly: a panic inside a reserve batch (here
// injected in its transaction, after the reservation rows were inserted)
// fails that batch's requests with an error that is no business error
// (INTERNAL), is logged with its stack, rolls the batch back and returns the
// leader slot. Before, the panic unwound into the leader's caller, its
// followers waited forever and the slot was never returned: four panics
// ended coalescing. After six panicking rounds, reserves still coalesce.
func TestBatchPanicFailsItsRequestsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HOT", domain.KindQuantity)
	mustReceive(t, b, "HOT", "AMS", 1000)
	logs := &syncBuffer{}
	b.Store.Logger = slog.New(slog.NewTextHandler(logs, nil))
	var panics atomic.Int64
	var panicking atomic.Bool
	b.Store.SetBatchHook(func(kind string, n int) {
		if panicking.Load() {
			panics.Add(1)
			panic(fmt.Sprintf("injected fault in a %s batch of %d", kind, n))
		}
	})

	// run sends n concurrent reserves and waits at most 10 s for them.
	run := func(round string, n int) []error {
		t.Helper()
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						errs[i] = fmt.Errorf("the panic unwound into the caller: %v", p)
					}
				}()
				_, _, errs[i] = b.Store.ReservationCreate(b.Ctx, reserveOne(fmt.Sprintf("%s-%d", round, i), "k", "HOT"))
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %s: reserves still waiting after 10 s (%d panics so far)", round, panics.Load())
		}
		return errs
	}

	panicking.Store(true)
	for round := range 6 {
		for i, err := range run(fmt.Sprint("panic", round), 8) {
			if _, business := domain.AsError(err); err == nil || business || strings.Contains(err.Error(), "unwound") {
				t.Fatalf("round %d, reserve %d: %v; want a batch failure (INTERNAL)", round, i, err)
			}
		}
	}
	panicking.Store(false)
	if panics.Load() < 6 {
		t.Fatalf("%d batches panicked, want at least 6", panics.Load())
	}
	if _, _, failed := b.Store.ReservationBatchStats(); failed != panics.Load() {
		t.Fatalf("%d batch failures counted for %d panicked batches", failed, panics.Load())
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM reservations`); n != 0 {
		t.Fatalf("%d reservation rows left by panicking batches, want 0", n)
	}
	log := logs.String()
	if !strings.Contains(log, "batch panicked") || !strings.Contains(log, "injected fault") || !strings.Contains(log, "reserveBatch") {
		t.Fatalf("panic log lacks the message or the stack:\n%.2000s", log)
	}

	batches0, requests0, _ := b.Store.ReservationBatchStats()
	for i, err := range run("after", 64) {
		if err != nil {
			t.Fatalf("reserve %d after the panics: %v", i, err)
		}
	}
	batches, requests, _ := b.Store.ReservationBatchStats()
	if requests-requests0 != 64 || batches-batches0 >= 64 {
		t.Fatalf("after the panics: %d requests in %d batches; want 64 coalesced into fewer batches", requests-requests0, batches-batches0)
	}
	t.Logf("after %d panics: 64 reserves in %d batches", panics.Load(), batches-batches0)
	if _, reserved := b.Balance(t, "HOT", "AMS"); reserved != 64 {
		t.Fatalf("reserved %d, want 64", reserved)
	}
	b.requireInvariants(t)
}

// TestCoalescedConfirmHonoursItsDeadlineAndPanics: the confirm coalescer
// shares the reserve coalescer's guarantees. A confirm with a 300 ms
// deadline whose reservation row is held locked returns in about its
// deadline and leaves the hold as it was (its batch, awaited by no one,
// rolled back), so the retry with the same orderRef confirms it; a panic in
// a confirm batch fails its confirms with an error that is no business
// error, writes no order, and confirms work after it.
func TestCoalescedConfirmHonoursItsDeadlineAndPanics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HP", domain.KindQuantity)
	mustReceive(t, b, "HP", "AMS", 10)
	res := b.reserve(t, "cart-1", "k", "HP", ptr("AMS"), 1, 600)

	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(b.Ctx, `SELECT FROM reservations WHERE id = $1 FOR UPDATE`, res.ID); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(3*time.Second, func() { _ = tx.Rollback(context.Background()) })
	ctx, cancel := context.WithTimeout(b.Ctx, 300*time.Millisecond)
	start := time.Now()
	got, err := b.Store.ReservationConfirm(ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: "ORD-1"})
	took := time.Since(start)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || took > 1300*time.Millisecond {
		t.Fatalf("confirm behind a locked reservation: %+v, %v after %v; want its deadline exceeded after about 300 ms (the lock was held 3 s)", got, err, took)
	}
	_ = tx.Rollback(context.Background())
	if status, err := b.statusOf(res.ID); err != nil || status != "held" {
		t.Fatalf("after the abandoned confirm: status %q, %v; want held", status, err)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders after the abandoned confirm, want 0", n)
	}

	// A panic in the confirm batch.
	b.Store.Logger = slog.New(slog.DiscardHandler)
	b.Store.SetBatchHook(func(kind string, n int) {
		if kind == "confirm" {
			panic("injected fault in a confirm batch")
		}
	})
	_, err = b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: "ORD-1"})
	if _, business := domain.AsError(err); err == nil || business {
		t.Fatalf("confirm in a panicking batch: %v; want a batch failure (INTERNAL)", err)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders after the panicking batch, want 0", n)
	}
	b.Store.SetBatchHook(nil)
	if got, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: "ORD-1"}); err != nil || got.Status != domain.StatusConfirmed {
		t.Fatalf("the retry with the same orderRef: %+v, %v", got, err)
	}
	b.requireInvariants(t)
}
