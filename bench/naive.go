package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The naive server is the write rows' second baseline: what a team writes in
// an afternoon from the seeds, measured end to end like ours. It is this
// binary run as `bench -naive-serve` (child.go): net/http, encoding/json and
// a pgxpool, one transaction per request running the seeds' claim (the
// conditional-claim CTE on the balance for a QUANTITY SKU, the FOR UPDATE
// SKIP LOCKED code claim for a CODES SKU, exactly bench/sql's statements)
// and an insert of the hold into a table of its own, naive_holds
// (naive_setup.go). No GraphQL, no authentication, no coalescing, no
// ledger, no events, no expiry jobs.

// naiveConfig is what the parent sends the naive child on stdin.
type naiveConfig struct {
	DatabaseURL string `json:"databaseURL"`
	// MaxConns is the pool's size: the bench gives it ours
	// (INVENTORY_DB_MAX_CONNS), so the pool is not the difference.
	MaxConns int32 `json:"maxConns"`
	// CodeLine is the reservation line held codes point at, as the seeds'
	// code claim needs one (the codes table's checks); naive_holds says
	// which hold holds which code.
	CodeLine int64 `json:"codeLine"`
}

// The seeds' statements (bench/sql/claim_spread.sql, claim_code.sql) with
// parameters for pgbench's variables.
const (
	naiveClaimQuantity = `WITH c AS (UPDATE balances SET reserved = reserved + $3 WHERE sku_id = $1 AND location_id = $2 AND on_hand - reserved >= $3 RETURNING sku_id, location_id, reserved) SELECT * FROM c`
	naiveClaimCode     = `UPDATE codes SET status = 'held', reservation_line_id = $3, updated_at = now() WHERE id = (SELECT id FROM codes WHERE sku_id = $1 AND location_id = $2 AND status = 'available' ORDER BY batch_id, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id`
	naiveInsertHold    = `INSERT INTO naive_holds (sku_id, location_id, quantity, code_ids) VALUES ($1, $2, $3, $4) RETURNING id`
	naiveConfirmHold   = `UPDATE naive_holds SET status = 'confirmed' WHERE id = $1 AND status = 'held' RETURNING sku_id, location_id, quantity, code_ids IS NOT NULL`
	naiveTakeStock     = `UPDATE balances SET on_hand = on_hand - $3, reserved = reserved - $3 WHERE sku_id = $1 AND location_id = $2`
)

// errNaiveOutOfStock ends a reserve's transaction with 409.
var errNaiveOutOfStock = errors.New("out of stock")

// naiveSKU is what the naive server needs to know of a SKU.
type naiveSKU struct {
	id    int64
	codes bool
}

// naiveServer is the naive server's state: the pool and the SKU and
// location ids by code, looked up once each.
type naiveServer struct {
	pool     *pgxpool.Pool
	codeLine int64
	mu       sync.RWMutex
	skus     map[string]naiveSKU
	locs     map[string]int64
}

// naiveHoldRequest is POST /reserve's body.
type naiveHoldRequest struct {
	SKU      string `json:"sku"`
	Location string `json:"location"`
	Quantity int    `json:"quantity"`
}

// naiveHoldID is POST /reserve's answer and POST /confirm's body. The id
// is a string in JSON, so the load generator reads it without decoding.
type naiveHoldID struct {
	ID int64 `json:"id,string"`
}

// naiveHandler serves POST /reserve and POST /confirm.
func naiveHandler(pool *pgxpool.Pool, codeLine int64) http.Handler {
	s := &naiveServer{pool: pool, codeLine: codeLine, skus: map[string]naiveSKU{}, locs: map[string]int64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /reserve", s.reserve)
	mux.HandleFunc("POST /confirm", s.confirm)
	return mux
}

// reserve holds quantity units of sku at location: 200 {"id"}, 409 when
// there are not enough, 404 for an unknown SKU or location.
func (s *naiveServer) reserve(w http.ResponseWriter, r *http.Request) {
	var req naiveHoldRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || req.Quantity < 1 {
		http.Error(w, "want {sku, location, quantity ≥ 1}", http.StatusBadRequest)
		return
	}
	sku, loc, err := s.lookup(r.Context(), req.SKU, req.Location)
	if err != nil {
		naiveError(w, err)
		return
	}
	var hold naiveHoldID
	err = pgx.BeginFunc(r.Context(), s.pool, func(tx pgx.Tx) error {
		var codeIDs []int64 // nil for a QUANTITY SKU
		if sku.codes {
			for range req.Quantity {
				var id int64
				if err := tx.QueryRow(r.Context(), naiveClaimCode, sku.id, loc, s.codeLine).Scan(&id); err != nil {
					return noRowsOutOfStock(err)
				}
				codeIDs = append(codeIDs, id)
			}
		} else {
			var skuID, locID int64
			var reserved int
			if err := tx.QueryRow(r.Context(), naiveClaimQuantity, sku.id, loc, req.Quantity).Scan(&skuID, &locID, &reserved); err != nil {
				return noRowsOutOfStock(err)
			}
		}
		return tx.QueryRow(r.Context(), naiveInsertHold, sku.id, loc, req.Quantity, codeIDs).Scan(&hold.ID)
	})
	if err != nil {
		naiveError(w, err)
		return
	}
	naiveJSON(w, hold)
}

// confirm turns a held hold into a sale: for a QUANTITY SKU its units leave
// on_hand and reserved, as our confirm does; a CODES hold keeps its codes
// (the naive server has no order lines to sell them to). 409 when the hold
// is not held.
func (s *naiveServer) confirm(w http.ResponseWriter, r *http.Request) {
	var req naiveHoldID
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		http.Error(w, "want {id}", http.StatusBadRequest)
		return
	}
	err := pgx.BeginFunc(r.Context(), s.pool, func(tx pgx.Tx) error {
		var skuID, locID int64
		var quantity int
		var codes bool
		if err := tx.QueryRow(r.Context(), naiveConfirmHold, req.ID).Scan(&skuID, &locID, &quantity, &codes); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return errNaiveNotHeld
			}
			return err
		}
		if codes {
			return nil
		}
		_, err := tx.Exec(r.Context(), naiveTakeStock, skuID, locID, quantity)
		return err
	})
	if err != nil {
		naiveError(w, err)
		return
	}
	naiveJSON(w, map[string]string{"status": "confirmed"})
}

var (
	errNaiveNotHeld = errors.New("not held")
	errNaiveUnknown = errors.New("unknown SKU or location")
)

// noRowsOutOfStock says a claim that matched no row as out of stock.
func noRowsOutOfStock(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return errNaiveOutOfStock
	}
	return err
}

// lookup returns the SKU and location of the codes, from the database the
// first time each is asked for.
func (s *naiveServer) lookup(ctx context.Context, skuCode, locCode string) (naiveSKU, int64, error) {
	s.mu.RLock()
	sku, okS := s.skus[skuCode]
	loc, okL := s.locs[locCode]
	s.mu.RUnlock()
	if okS && okL {
		return sku, loc, nil
	}
	var kind string
	err := s.pool.QueryRow(ctx, `SELECT s.id, s.kind, l.id FROM skus s, locations l WHERE s.code = $1 AND l.code = $2`, skuCode, locCode).
		Scan(&sku.id, &kind, &loc)
	if errors.Is(err, pgx.ErrNoRows) {
		return sku, 0, errNaiveUnknown
	}
	if err != nil {
		return sku, 0, fmt.Errorf("look up %s@%s: %w", skuCode, locCode, err)
	}
	sku.codes = kind == "codes"
	s.mu.Lock()
	s.skus[skuCode], s.locs[locCode] = sku, loc
	s.mu.Unlock()
	return sku, loc, nil
}

// naiveError answers err with its status: 409 out of stock or not held,
// 404 unknown, else 500.
func naiveError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, errNaiveOutOfStock), errors.Is(err, errNaiveNotHeld):
		status = http.StatusConflict
	case errors.Is(err, errNaiveUnknown):
		status = http.StatusNotFound
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func naiveJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// serveNaive is `bench -naive-serve`: it reads its naiveConfig from stdin,
// opens its pool and serves (serveChild) until stdin closes.
func serveNaive() error {
	var cfg naiveConfig
	if err := readChildConfig("naive", os.Stdin, &cfg); err != nil {
		return err
	}
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("naive: database URL: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return fmt.Errorf("naive: connect: %w", err)
	}
	defer pool.Close()
	return serveChild("naive", os.Stdin, naiveHandler(pool, cfg.CodeLine))
}
