package store_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/domain"
	"inventory/testkit"
)

// refSeq numbers the references of test receipts and adjustments: each is
// its own act, and receipts are idempotent per (sku, location, reference).
var refSeq atomic.Int64

// nextRef is a reference no other act of this test binary uses.
func nextRef(prefix string) string { return prefix + "-" + strconv.FormatInt(refSeq.Add(1), 10) }

// tb is the part of testing.T and rapid.T the helpers below need, so the
// property test can share them.
type tb = testkit.TB

func mustLocation(t tb, b *testBundle, code string, priority int) domain.Location {
	t.Helper()
	loc, err := b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: code, Name: "Location " + code, Priority: priority})
	if err != nil {
		t.Fatalf("LocationCreate(%q): %v", code, err)
	}
	return loc
}

func mustSKU(t tb, b *testBundle, code string, kind domain.StockKind) domain.SKU {
	t.Helper()
	sku, err := b.Store.SKUCreate(b.Ctx, domain.CreateSKUInput{Code: code, Name: "SKU " + code, Kind: kind})
	if err != nil {
		t.Fatalf("SKUCreate(%q): %v", code, err)
	}
	return sku
}

func mustReceive(t tb, b *testBundle, sku, loc string, qty int) domain.Balance {
	t.Helper()
	bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: qty, Reference: nextRef("PO-setup")})
	if err != nil {
		t.Fatalf("StockReceive(%s@%s, %d): %v", sku, loc, qty, err)
	}
	return bal.Balance
}

// expectCode is requireCode for any tb (rapid.T included).
func expectCode(t tb, err error, code domain.ErrorCode) *domain.Error {
	t.Helper()
	e, ok := domain.AsError(err)
	if !ok {
		t.Fatalf("want a %s business error, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want %s, got %s (%s)", code, e.Code, e.Message)
	}
	return e
}

// setReserved stands in for reservations, which do not exist yet: it sets a
// balance's reserved column to n and writes the matching ledger row (cause
// 'reserved', actor 'test'), in one transaction, so the ledger still balances.
func setReserved(t tb, b *testBundle, sku, loc string, n int) {
	t.Helper()
	err := pgx.BeginFunc(b.Ctx, b.Pool, func(tx pgx.Tx) error {
		var skuID, locID int64
		var old int
		if err := tx.QueryRow(b.Ctx, `
			SELECT b.sku_id, b.location_id, b.reserved
			FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
			WHERE s.code = $1 AND l.code = $2 FOR UPDATE OF b`, sku, loc).Scan(&skuID, &locID, &old); err != nil {
			return err
		}
		if _, err := tx.Exec(b.Ctx, `UPDATE balances SET reserved = $3 WHERE sku_id = $1 AND location_id = $2`, skuID, locID, n); err != nil {
			return err
		}
		// A held reservation line of n units stands behind the count, so
		// reconciliation (reserved = held lines) still holds.
		var id string
		if err := tx.QueryRow(b.Ctx, `
			INSERT INTO reservations (checkout_id, request_key, fingerprint, expires_at)
			VALUES ('test-fake', $1 || '@' || $2, '\x00', now() + interval '1 day')
			ON CONFLICT (checkout_id, request_key) DO UPDATE SET updated_at = now()
			RETURNING id`, sku, loc).Scan(&id); err != nil {
			return err
		}
		if _, err := tx.Exec(b.Ctx, `DELETE FROM reservation_lines WHERE reservation_id = $1`, id); err != nil {
			return err
		}
		if n > 0 {
			if _, err := tx.Exec(b.Ctx, `INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity) VALUES ($1, 0, $2, $3, $4)`,
				id, skuID, locID, n); err != nil {
				return err
			}
		}
		_, err := tx.Exec(b.Ctx, `
			INSERT INTO stock_movements (sku_id, location_id, reserved_delta, cause, actor)
			VALUES ($1, $2, $3, 'reserved', 'test')`, skuID, locID, n-old)
		return err
	})
	if err != nil {
		t.Fatalf("setReserved(%s@%s, %d): %v", sku, loc, n, err)
	}
}

// dbState fingerprints everything a stock call may change: the number of
// balance and ledger rows and the full contents of balances.
type dbState struct {
	balances, movements int
	contents            string
}

func stateOf(t tb, ctx context.Context, pool *pgxpool.Pool) dbState {
	t.Helper()
	var s dbState
	err := pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM balances), (SELECT count(*) FROM stock_movements),
		       coalesce((SELECT string_agg(concat_ws(',', sku_id, location_id, on_hand, reserved,
		                   pending_supply, preordered, updated_at), ';' ORDER BY sku_id, location_id)
		                 FROM balances), '')`).Scan(&s.balances, &s.movements, &s.contents)
	if err != nil {
		t.Fatalf("reading database state: %v", err)
	}
	return s
}

func (b *testBundle) state(t tb) dbState {
	t.Helper()
	return stateOf(t, b.Ctx, b.Pool)
}

// requireUnchanged fails when the database differs from before.
func (b *testBundle) requireUnchanged(t tb, before dbState, what string) {
	t.Helper()
	if after := b.state(t); after != before {
		t.Fatalf("%s changed the database: before %d balances / %d movements, after %d / %d (%q -> %q)",
			what, before.balances, before.movements, after.balances, after.movements, before.contents, after.contents)
	}
}

// movementRow is one stock_movements row as stored.
type movementRow struct {
	OnHandDelta, ReservedDelta, PendingSupplyDelta, PreorderedDelta int
	Cause                                                           string
	Reason, Reference                                               *string
	Actor                                                           string
	ReservationID                                                   *string // read as text, whatever the column's type
}

// movementsOf returns a balance's ledger rows in the order they were written.
func movementsOf(t tb, b *testBundle, sku, loc string) []movementRow {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT m.on_hand_delta, m.reserved_delta, m.pending_supply_delta, m.preordered_delta,
		       m.cause, m.reason, m.reference, m.actor, m.reservation_id::text
		FROM stock_movements m JOIN skus s ON s.id = m.sku_id JOIN locations l ON l.id = m.location_id
		WHERE s.code = $1 AND l.code = $2
		ORDER BY m.id`, sku, loc)
	if err != nil {
		t.Fatalf("reading movements of %s@%s: %v", sku, loc, err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (movementRow, error) {
		var m movementRow
		err := r.Scan(&m.OnHandDelta, &m.ReservedDelta, &m.PendingSupplyDelta, &m.PreorderedDelta,
			&m.Cause, &m.Reason, &m.Reference, &m.Actor, &m.ReservationID)
		return m, err
	})
	if err != nil {
		t.Fatalf("reading movements of %s@%s: %v", sku, loc, err)
	}
	return ms
}

func strPtr(s string) *string { return &s }

func intPtr(i int) *int { return &i }

func deref(s *string) string {
	if s == nil {
		return "<NULL>"
	}
	return *s
}

var _ tb = (*testing.T)(nil)

// optInt prints an optional int for failure messages.
func optInt(p *int) string {
	if p == nil {
		return "<nil>"
	}
	return strconv.Itoa(*p)
}
