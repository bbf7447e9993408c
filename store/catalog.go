package store

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

var _ domain.Catalog = (*Store)(nil)

// LocationCreate creates a location; ALREADY_EXISTS if the code is taken.
func (s *Store) LocationCreate(ctx context.Context, in domain.CreateLocationInput) (domain.Location, error) {
	if err := in.Validate(); err != nil {
		return domain.Location{}, err
	}
	var loc domain.Location
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Creators queue here so that two of them at MaxLocations-1 do not
		// both pass the count. Locations are created rarely.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, locationsLockSpace); err != nil {
			return err
		}
		var exists bool
		var n int
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM locations WHERE code = $1), (SELECT count(*) FROM locations)`, in.Code).
			Scan(&exists, &n); err != nil {
			return err
		}
		switch {
		case exists:
			return alreadyExists("location", in.Code)
		case n >= domain.MaxLocations:
			return domain.Errorf(domain.CodeLimitExceeded, "there are already %d locations, the most there may be", n)
		}
		mode := in.Fulfillment
		if mode == "" {
			mode = domain.FulfillOnConfirm
		}
		var stored string
		err := tx.QueryRow(ctx, `INSERT INTO locations (code, name, priority, fulfillment) VALUES ($1, $2, $3, $4) RETURNING code, name, priority, fulfillment`,
			in.Code, in.Name, in.Priority, strings.ToLower(string(mode))).Scan(&loc.Code, &loc.Name, &loc.Priority, &stored)
		loc.Fulfillment = domain.FulfillmentMode(strings.ToUpper(stored))
		return err
	})
	return loc, wrap("LocationCreate", err)
}

// locationsLockSpace is the advisory lock that serializes LocationCreate.
const locationsLockSpace = 0x1f8b

// LocationList returns every location in sourcing order.
func (s *Store) LocationList(ctx context.Context) ([]domain.Location, error) {
	rows, err := s.pool.Query(ctx, `SELECT code, name, priority, upper(fulfillment) FROM locations ORDER BY priority, code`)
	if err != nil {
		return nil, wrap("LocationList", err)
	}
	locs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Location, error) {
		var l domain.Location
		return l, r.Scan(&l.Code, &l.Name, &l.Priority, &l.Fulfillment)
	})
	return locs, wrap("LocationList", err)
}

// SKUCreate creates a SKU; ALREADY_EXISTS if the code is taken.
func (s *Store) SKUCreate(ctx context.Context, in domain.CreateSKUInput) (domain.SKU, error) {
	if err := in.Validate(); err != nil {
		return domain.SKU{}, err
	}
	var sku domain.SKU
	var kind string
	err := s.pool.QueryRow(ctx, `
		INSERT INTO skus (code, name, kind, low_stock_threshold) VALUES ($1, $2, $3, $4)
		ON CONFLICT (code) DO NOTHING
		RETURNING code, name, kind, low_stock_threshold`, in.Code, in.Name, kindToDB(in.Kind), in.LowStockThreshold).
		Scan(&sku.Code, &sku.Name, &kind, &sku.LowStockThreshold)
	if errors.Is(err, pgx.ErrNoRows) {
		return sku, alreadyExists("SKU", in.Code)
	}
	sku.Kind = kindFromDB(kind)
	sku.Balances = []domain.Balance{}
	return sku, wrap("SKUCreate", err)
}

// SKUGetByCode returns a SKU with its balances in sourcing order, or nil.
func (s *Store) SKUGetByCode(ctx context.Context, code string) (*domain.SKU, error) {
	var sku *domain.SKU
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) (err error) {
		sku, err = skuByCode(ctx, tx, code)
		return err
	})
	return sku, wrap("SKUGetByCode", err)
}

// SKULowStockThresholdSet sets (nil: clears) the SKU's own stock.low
// threshold and returns the SKU as it is then.
func (s *Store) SKULowStockThresholdSet(ctx context.Context, code string, threshold *int) (domain.SKU, error) {
	if err := domain.CheckIdentifier([]string{"sku"}, code); err != nil {
		return domain.SKU{}, err
	}
	if err := domain.CheckLowStockThreshold([]string{"threshold"}, threshold); err != nil {
		return domain.SKU{}, err
	}
	var sku *domain.SKU
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE skus SET low_stock_threshold = $2 WHERE code = $1`, code, threshold)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &domain.Error{Code: domain.CodeUnknownSKU, Message: "unknown SKU " + strconv.Quote(code), Field: []string{"sku"}, SKU: code}
		}
		sku, err = skuByCode(ctx, tx, code)
		return err
	})
	if err != nil {
		return domain.SKU{}, wrap("SKULowStockThresholdSet", err)
	}
	return *sku, nil
}

// skuByCode reads a SKU with its balances in sourcing order, or nil.
func skuByCode(ctx context.Context, tx pgx.Tx, code string) (*domain.SKU, error) {
	var got domain.SKU
	var kind string
	var id int64
	err := tx.QueryRow(ctx, `SELECT id, code, name, kind, low_stock_threshold FROM skus WHERE code = $1`, code).
		Scan(&id, &got.Code, &got.Name, &kind, &got.LowStockThreshold)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	got.Kind = kindFromDB(kind)
	rows, err := tx.Query(ctx, `
		SELECT `+balanceColumns+`
		FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
		WHERE b.sku_id = $1
		ORDER BY l.priority, l.code`, id)
	if err != nil {
		return nil, err
	}
	got.Balances, err = pgx.CollectRows(rows, scanBalance)
	return &got, err
}

func alreadyExists(what, code string) error {
	return &domain.Error{Code: domain.CodeAlreadyExists, Message: what + " " + strconv.Quote(code) + " already exists", Field: []string{"input", "code"}}
}

func kindToDB(k domain.StockKind) string { return strings.ToLower(string(k)) }

func kindFromDB(k string) domain.StockKind { return domain.StockKind(strings.ToUpper(k)) }
