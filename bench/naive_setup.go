package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// naiveHoldsTable is the naive server's one table of its own, what a team
// would add next to the seeds' schema: a hold's SKU, location, quantity,
// the codes it claimed, its status. No foreign keys: every hold on the hot
// SKU would take a KEY SHARE lock on the same skus row, a cost ours does
// not pay either.
const naiveHoldsTable = `CREATE TABLE naive_holds (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	sku_id      bigint NOT NULL,
	location_id bigint NOT NULL,
	quantity    integer NOT NULL CHECK (quantity > 0),
	code_ids    bigint[],
	status      text NOT NULL DEFAULT 'held' CHECK (status IN ('held', 'confirmed')),
	created_at  timestamptz NOT NULL DEFAULT now()
)`

// naiveStock is what the naive server's SKUs are stocked with: in the
// bench exactly ours (spreadSKUs at spreadOnHand, the hot SKU at hotOnHand,
// as many codes as ours imports), so it cannot run out earlier or later
// than we do; smaller in the test.
type naiveStock struct {
	spread, spreadOnHand, hotOnHand, codes int
}

// naiveCatalog names the naive server's rows: separate SKUs of the same
// shape as ours and pgbench's (NAIVE-S00000…, NAIVE-HOT, NAIVE-CODES), so
// no side's holds slow another's down.
type naiveCatalog struct {
	stock            naiveStock
	loc              int64
	spread           []string
	hot, codes       string
	minSKU, maxSKU   int64 // the spread SKUs' ids
	hotSKU, codesSKU int64
	codeLine         int64 // the reservation line held codes point at
}

// seedNaive creates naive_holds and the naive server's SKUs at location
// loc, each balance with its "received" ledger row (reconciliation stays
// empty), and the CODES SKU's dummy codes (seedDummyCodes: it must run
// after our server has started, like pgbench's).
func seedNaive(ctx context.Context, pool *pgxpool.Pool, loc int64, st naiveStock) (naiveCatalog, error) {
	c := naiveCatalog{stock: st, loc: loc, hot: "NAIVE-HOT", codes: "NAIVE-CODES"}
	for i := range st.spread {
		c.spread = append(c.spread, fmt.Sprintf("NAIVE-S%05d", i))
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		steps := []struct {
			sql  string
			args []any
		}{
			{naiveHoldsTable, nil},
			{`INSERT INTO skus (code, name, kind) SELECT 'NAIVE-S' || lpad(g::text, 5, '0'), 'naive spread', 'quantity' FROM generate_series(0, $1::int - 1) g`, []any{st.spread}},
			{`INSERT INTO skus (code, name, kind) VALUES ('NAIVE-HOT', 'naive hot', 'quantity'), ('NAIVE-CODES', 'naive codes', 'codes')`, nil},
			{`INSERT INTO balances (sku_id, location_id, on_hand)
				SELECT id, $1, CASE WHEN code = 'NAIVE-HOT' THEN $2::int ELSE $3::int END FROM skus WHERE code LIKE 'NAIVE-%' AND kind = 'quantity'`,
				[]any{loc, st.hotOnHand, st.spreadOnHand}},
			{`INSERT INTO stock_movements (sku_id, location_id, on_hand_delta, cause, reference, actor)
				SELECT b.sku_id, b.location_id, b.on_hand, 'received', 'naive seed', 'bench'
				FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code LIKE 'NAIVE-%'`, nil},
		}
		for _, s := range steps {
			if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
				return fmt.Errorf("seed the naive server's rows: %w", err)
			}
		}
		return tx.QueryRow(ctx, `SELECT (SELECT min(id) FROM skus WHERE code LIKE 'NAIVE-S%'), (SELECT max(id) FROM skus WHERE code LIKE 'NAIVE-S%'),
			(SELECT id FROM skus WHERE code = 'NAIVE-HOT'), (SELECT id FROM skus WHERE code = 'NAIVE-CODES')`).
			Scan(&c.minSKU, &c.maxSKU, &c.hotSKU, &c.codesSKU)
	})
	if err != nil {
		return c, err
	}
	if c.maxSKU-c.minSKU != int64(st.spread)-1 {
		return c, fmt.Errorf("the naive server's SKU ids are not contiguous (%d..%d)", c.minSKU, c.maxSKU)
	}
	if c.codeLine, err = seedDummyCodes(ctx, pool, c.codesSKU, loc, st.codes, "naive"); err != nil {
		return c, err
	}
	return c, nil
}

// resetNaive restocks the naive server's rows after a cell, as
// resetPgbenchRows does pgbench's: balances back to their seeded stock
// (confirms took units off on_hand) with nothing reserved, codes available
// again, no holds. Our correctness checks, which follow, then see
// consistent rows (the naive server writes no ledger), and every naive cell
// starts from the same stock.
func resetNaive(ctx context.Context, pool *pgxpool.Pool, c naiveCatalog) error {
	if _, err := pool.Exec(ctx, `UPDATE balances SET reserved = 0, on_hand = CASE WHEN sku_id = $3 THEN $4::int ELSE $5::int END
		WHERE (sku_id BETWEEN $1 AND $2 OR sku_id = $3) AND location_id = $6
		  AND (reserved <> 0 OR on_hand <> CASE WHEN sku_id = $3 THEN $4::int ELSE $5::int END)`,
		c.minSKU, c.maxSKU, c.hotSKU, c.stock.hotOnHand, c.stock.spreadOnHand, c.loc); err != nil {
		return fmt.Errorf("reset the naive server's balances: %w", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE codes SET status = 'available', reservation_line_id = NULL, updated_at = now()
		WHERE sku_id = $1 AND status = 'held'`, c.codesSKU); err != nil {
		return fmt.Errorf("reset the naive server's codes: %w", err)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE naive_holds`); err != nil {
		return fmt.Errorf("reset the naive server's holds: %w", err)
	}
	return nil
}
