package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// createDatabase makes a database of its own next to whatever DATABASE_URL
// names (the role has CREATEDB), so the bench never touches anyone's rows.
// It returns the new database's URL and a function that drops it.
func createDatabase(ctx context.Context, adminURL string) (string, func(), error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "inventory_bench_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	drop := func() {
		// A fresh context: dropping must also work after ctrl-C.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			conn.Close(ctx)
		}
		if err != nil {
			logf("could not drop database %s: %v", name, err)
			return
		}
		logf("dropped database %s", name)
	}
	return u.String(), drop, nil
}

// catalog names the rows the scenarios use. Ours and pgbench's are separate
// SKUs with the same shape, so neither side's holds slow the other down.
type catalog struct {
	loc                    int64 // the one location, "L1"
	pgMinSKU, pgMaxSKU     int64 // pgbench's 10,000 spread SKUs
	pgHotSKU, pgCodesSKU   int64
	pgCodesLine            int64 // the reservation line pgbench's held codes point at
	spread                 []string
	hot, codesSKU, locCode string
}

const spreadSKUs = 10_000

// The stock of every spread SKU and of the hot SKU, ours and the baselines'
// alike: enough that no cell runs out.
const (
	spreadOnHand = 1_000_000
	hotOnHand    = 1_000_000_000
)

// seed loads the catalog in one transaction with plain SQL: 20,000 SKUs
// through the API would take longer than the benchmark. Every balance gets
// a matching "received" ledger row, so reconciliation stays empty.
func seed(ctx context.Context, pool *pgxpool.Pool) (catalog, error) {
	c := catalog{hot: "HOT", codesSKU: "CODES", locCode: "L1"}
	for i := range spreadSKUs {
		c.spread = append(c.spread, fmt.Sprintf("S%05d", i))
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		steps := []string{
			`INSERT INTO locations (code, name, priority) VALUES ('L1', 'Bench warehouse', 0)`,
			`INSERT INTO skus (code, name, kind) SELECT 'S' || lpad(g::text, 5, '0'), 'bench spread', 'quantity' FROM generate_series(0, 9999) g`,
			`INSERT INTO skus (code, name, kind) SELECT 'PGB-S' || lpad(g::text, 5, '0'), 'pgbench spread', 'quantity' FROM generate_series(0, 9999) g`,
			`INSERT INTO skus (code, name, kind) VALUES ('HOT', 'bench hot', 'quantity'), ('PGB-HOT', 'pgbench hot', 'quantity'),
				('CODES', 'bench codes', 'codes'), ('PGB-CODES', 'pgbench codes', 'codes')`,
			`INSERT INTO balances (sku_id, location_id, on_hand)
				SELECT s.id, l.id, CASE WHEN s.code IN ('HOT', 'PGB-HOT') THEN ` + strconv.Itoa(hotOnHand) + ` ELSE ` + strconv.Itoa(spreadOnHand) + ` END
				FROM skus s CROSS JOIN locations l WHERE s.kind = 'quantity'`,
			`INSERT INTO stock_movements (sku_id, location_id, on_hand_delta, cause, reference, actor)
				SELECT sku_id, location_id, on_hand, 'received', 'bench seed', 'bench' FROM balances`,
		}
		for _, q := range steps {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("seed: %w", err)
			}
		}
		return tx.QueryRow(ctx, `SELECT (SELECT id FROM locations WHERE code = 'L1'),
			(SELECT min(id) FROM skus WHERE code LIKE 'PGB-S%'), (SELECT max(id) FROM skus WHERE code LIKE 'PGB-S%'),
			(SELECT id FROM skus WHERE code = 'PGB-HOT'), (SELECT id FROM skus WHERE code = 'PGB-CODES')`).
			Scan(&c.loc, &c.pgMinSKU, &c.pgMaxSKU, &c.pgHotSKU, &c.pgCodesSKU)
	})
	if err != nil {
		return c, err
	}
	if c.pgMaxSKU-c.pgMinSKU != spreadSKUs-1 {
		return c, fmt.Errorf("pgbench SKU ids are not contiguous (%d..%d)", c.pgMinSKU, c.pgMaxSKU)
	}
	return c, nil
}

// seedPgbenchCodes stocks pgbench's CODES SKU with n dummy code rows (the
// baseline claim never decrypts them) and a released reservation line for
// held rows to point at, as the codes table's checks require. It must run
// after the server has started: the start-up key check would refuse the
// dummy rows' key id.
func seedPgbenchCodes(ctx context.Context, pool *pgxpool.Pool, c *catalog, n int) error {
	line, err := seedDummyCodes(ctx, pool, c.pgCodesSKU, c.loc, n, "pgbench")
	c.pgCodesLine = line
	return err
}

// seedDummyCodes gives a CODES SKU of a baseline's (pgbench's, the naive
// server's) its balance of n dummy code rows, with their ledger row and
// batch, and a released reservation line named ref that held rows point
// at; it returns the line's id.
func seedDummyCodes(ctx context.Context, pool *pgxpool.Pool, sku, loc int64, n int, ref string) (line int64, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var batch int64
		if err := tx.QueryRow(ctx, `
			WITH b AS (INSERT INTO balances (sku_id, location_id, on_hand) VALUES ($1, $2, $3) RETURNING sku_id, location_id),
			m AS (INSERT INTO stock_movements (sku_id, location_id, on_hand_delta, cause, reference, actor)
				SELECT sku_id, location_id, $3, 'imported', $4::text || ' codes', 'bench' FROM b)
			INSERT INTO code_batches (sku_id, location_id, batch_ref, received, inserted, actor)
			VALUES ($1, $2, $4, $3, $3, 'bench') RETURNING id`, sku, loc, n, ref).Scan(&batch); err != nil {
			return fmt.Errorf("%s codes balance: %w", ref, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO codes (sku_id, location_id, batch_id, ciphertext, key_id, fingerprint)
			SELECT $1, $2, $3, '\x00'::bytea, $5::text || '-dummy', int8send(g) FROM generate_series(1, $4::int) g`,
			sku, loc, batch, n, ref); err != nil {
			return fmt.Errorf("%s codes: %w", ref, err)
		}
		return tx.QueryRow(ctx, `
			WITH r AS (INSERT INTO reservations (checkout_id, request_key, fingerprint, status, expires_at, ended_at, release_reason)
				VALUES ($3, $3, '\x00', 'released', now(), now(), 'other') RETURNING id)
			INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity)
			SELECT id, 0, $1, $2, 1 FROM r RETURNING id`, sku, loc, ref).Scan(&line)
	})
	return line, err
}

// resetPgbenchRows gives back what a baseline cell claimed, outside the
// ledger (pgbench writes none), so the correctness checks that follow see
// consistent rows and the next cell starts from the same state.
func resetPgbenchRows(ctx context.Context, pool *pgxpool.Pool, c catalog) error {
	if _, err := pool.Exec(ctx, `UPDATE balances SET reserved = 0
		WHERE (sku_id BETWEEN $1 AND $2 OR sku_id = $3) AND reserved <> 0`, c.pgMinSKU, c.pgMaxSKU, c.pgHotSKU); err != nil {
		return fmt.Errorf("reset pgbench balances: %w", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE codes SET status = 'available', reservation_line_id = NULL
		WHERE sku_id = $1 AND status = 'held'`, c.pgCodesSKU); err != nil {
		return fmt.Errorf("reset pgbench codes: %w", err)
	}
	return nil
}
