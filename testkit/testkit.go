// Package testkit is what the store, jobs and events tests share: a store on a
// database of its own, wired as the server wires it, with a context acting
// as an admin; catalog and stock seeding; balance and event reads. Only
// tests import it.
package testkit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/codecrypt"
	"inventory/domain"
	"inventory/jobs"
	"inventory/pgtest"
	"inventory/store"
)

// TB is the part of testing.T (and rapid.T) the helpers need.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Kit is a store on a database of its own and a context acting as an admin.
type Kit struct {
	Ctx   context.Context
	Pool  *pgxpool.Pool
	Store *store.Store
}

// New returns a Kit on a new test database, acting as the admin called
// actor. Its store seals webhook secrets (and codes) with a fresh key ring,
// id "test", as the server's does; code tests replace it with their own.
func New(t testing.TB, actor string) Kit {
	t.Helper()
	pool := pgtest.NewPool(t)
	st := NewStore(t, pool)
	keys, err := codecrypt.ParseKeyring("test:"+codecrypt.NewKey(), codecrypt.NewKey())
	if err != nil {
		t.Fatalf("codecrypt.ParseKeyring: %v", err)
	}
	st.Keyring = keys
	return Kit{Ctx: AdminContext(actor), Pool: pool, Store: st}
}

// AdminContext is a background context acting as the admin called name.
func AdminContext(name string) context.Context {
	return domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleAdmin, Name: name})
}

// NewStore returns a store on pool that schedules expiry jobs through River,
// as every store the server builds does; it has no key ring (Kit's has).
func NewStore(t TB, pool *pgxpool.Pool) *store.Store {
	t.Helper()
	expiry, err := jobs.NewScheduler(pool, nil)
	if err != nil {
		t.Fatalf("jobs.NewScheduler: %v", err)
	}
	st := store.New(pool)
	st.Expiry = expiry
	return st
}

// refSeq numbers Ref's references.
var refSeq atomic.Int64

// Ref is a stock reference no other act in this test binary uses: receipts
// are idempotent per (sku, location, reference), so each distinct receipt a
// test means needs its own (an adjustment's reference is free text; a
// distinct one keeps its ledger row easy to find).
func Ref(prefix string) string { return prefix + "-" + strconv.FormatInt(refSeq.Add(1), 10) }

// Catalog creates locations and SKUs of one kind; existing ones are fine.
func (k Kit) Catalog(t TB, kind domain.StockKind, skus []string, locations ...string) {
	t.Helper()
	for _, loc := range locations {
		if _, err := k.Store.LocationCreate(k.Ctx, domain.CreateLocationInput{Code: loc, Name: loc}); err != nil && !isCode(err, domain.CodeAlreadyExists) {
			t.Fatalf("LocationCreate(%s): %v", loc, err)
		}
	}
	for _, sku := range skus {
		if _, err := k.Store.SKUCreate(k.Ctx, domain.CreateSKUInput{Code: sku, Name: sku, Kind: kind}); err != nil && !isCode(err, domain.CodeAlreadyExists) {
			t.Fatalf("SKUCreate(%s): %v", sku, err)
		}
	}
}

// Stock creates the location and a QUANTITY SKU as needed and receives
// onHand units of it there.
func (k Kit) Stock(t TB, sku, location string, onHand int) {
	t.Helper()
	k.Catalog(t, domain.KindQuantity, []string{sku}, location)
	if onHand > 0 {
		if _, err := k.Store.StockReceive(k.Ctx, domain.ReceiveStockInput{SKU: sku, Location: location, Quantity: onHand, Reference: Ref("test")}); err != nil {
			t.Fatalf("StockReceive(%s@%s, %d): %v", sku, location, onHand, err)
		}
	}
}

// BalanceRow reads on_hand and reserved of one balance in SQL; ok is false
// when there is no such row.
func (k Kit) BalanceRow(t TB, sku, location string) (onHand, reserved int, ok bool) {
	t.Helper()
	err := k.Pool.QueryRow(k.Ctx, `
		SELECT b.on_hand, b.reserved
		FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
		WHERE s.code = $1 AND l.code = $2`, sku, location).Scan(&onHand, &reserved)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false
	}
	if err != nil {
		t.Fatalf("reading balance %s@%s: %v", sku, location, err)
	}
	return onHand, reserved, true
}

// Balance is BalanceRow for a balance that must exist.
func (k Kit) Balance(t TB, sku, location string) (onHand, reserved int) {
	t.Helper()
	onHand, reserved, ok := k.BalanceRow(t, sku, location)
	if !ok {
		t.Fatalf("reading balance %s@%s: no such balance", sku, location)
	}
	return onHand, reserved
}

// RequireReconciled fails unless Reconciliation finds nothing.
func (k Kit) RequireReconciled(t TB) {
	t.Helper()
	issues, err := k.Store.Reconciliation(k.Ctx)
	if err != nil || len(issues) != 0 {
		t.Fatalf("Reconciliation: %+v %v", issues, err)
	}
}

// Published reads every published event with seq > after, page by page.
func (k Kit) Published(t TB, after int64) []domain.StockEvent {
	t.Helper()
	var out []domain.StockEvent
	for {
		page, err := k.Store.StockEventsAfter(k.Ctx, after, domain.MaxStockEventsPage)
		if err != nil {
			t.Fatalf("StockEventsAfter(%d): %v", after, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

func isCode(err error, code domain.ErrorCode) bool {
	e, ok := domain.AsError(err)
	return ok && e.Code == code
}

// LogBuffer collects slog output written from other goroutines (workers,
// River, the broker); the mutex makes reading it while they write safe.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Reset empties the buffer.
func (l *LogBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

// Writers runs write(0) … write(n-1) at once and fails the test with the first
// error any of them returned, once all have ended: the shape of every
// randomized concurrent workload (each writer its own seed stream).
func Writers(t TB, n int, write func(g int) error) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			if err := write(g); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v", err)
	}
}

// TestLogger is a debug-level logger into a buffer the test can read, printed
// with the test's output if the test fails.
func TestLogger(t interface {
	Cleanup(func())
	Failed() bool
	Logf(string, ...any)
}) (*LogBuffer, *slog.Logger) {
	logs := &LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", logs.String())
		}
	})
	return logs, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
