package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// StockLevelsSet sets the on-hand counts of up to domain.MaxStockLevels
// balances (the setStockLevels mutation, `inventory stock import`). Each
// level is decided on its own, under its balance row's lock, so a refused
// level (UNKNOWN_SKU, UNKNOWN_LOCATION, INVALID_INPUT for a CODES SKU or a bad
// value, STALE_QUANTITY, BELOW_RESERVED) refuses only itself; the valid ones
// are then written set-based, one ledger row ('adjusted', reason stock_sync,
// the call's reference) and one stock event per changed balance, all in one
// transaction. A level equal to the current count is unchanged: no row.
//
// The call is idempotent by reference: its stock_syncs row is inserted
// first, so a concurrent call with the same reference waits for this one
// and then answers its stored outcome (replayed), or IDEMPOTENCY_KEY_REUSED
// when its levels differ.
//
// Lock order: balance rows are locked in (sku id, location id) order, the
// order every writer takes them in (see claimBasket), and on_hand >= reserved + committed
// is checked under the lock, so concurrent reserves never oversell.
func (s *Store) StockLevelsSet(ctx context.Context, in domain.SetStockLevelsInput) (domain.StockLevelsResult, error) {
	if err := in.Validate(); err != nil {
		return domain.StockLevelsResult{}, err
	}
	fp := levelsFingerprint(in.Levels)
	var out domain.StockLevelsResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.setStockLevels(ctx, tx, in, fp)
		return err
	})
	return out, wrap("StockLevelsSet", err)
}

// levelsFingerprint identifies a call's levels, in order, unambiguously.
func levelsFingerprint(levels []domain.StockLevel) []byte {
	h := sha256.New()
	for _, l := range levels {
		expected := "-"
		if l.ExpectedOnHand != nil {
			expected = strconv.Itoa(*l.ExpectedOnHand)
		}
		fmt.Fprintf(h, "%q %q %d %s\n", l.SKU, l.Location, l.OnHand, expected)
	}
	return h.Sum(nil)
}

// levelPair is one level that passed its own checks, with its ids.
type levelPair struct {
	line              int
	skuID, locationID int64
	current, reserved int
	committed         int
	preordered        int
	kind              domain.StockKind
}

func (s *Store) setStockLevels(ctx context.Context, tx pgx.Tx, in domain.SetStockLevelsInput, fp []byte) (domain.StockLevelsResult, error) {
	var res domain.StockLevelsResult
	tag, err := tx.Exec(ctx, `INSERT INTO stock_syncs (reference, fingerprint, outcome) VALUES ($1, $2, 'null')
		ON CONFLICT (reference) DO NOTHING`, in.Reference, fp)
	if err != nil {
		return res, err
	}
	if tag.RowsAffected() == 0 {
		return replayStockLevels(ctx, tx, in.Reference, fp)
	}

	errs := make([]*domain.Error, len(in.Levels))
	seen := make(map[[2]string]int, len(in.Levels))
	skus, locs := make([]string, len(in.Levels)), make([]string, len(in.Levels))
	for i, l := range in.Levels {
		skus[i], locs[i] = l.SKU, l.Location
		if errs[i] = l.Check(i); errs[i] != nil {
			continue
		}
		if first, dup := seen[[2]string{l.SKU, l.Location}]; dup {
			errs[i] = levelError(domain.CodeInvalidInput, i, l.SKU, "location", nil,
				"%s at %s is set by an earlier level of this call (index %d); set each balance at most once per call", l.SKU, l.Location, first)
			continue
		}
		seen[[2]string{l.SKU, l.Location}] = i
	}

	// Resolve codes to ids in one statement.
	rows, err := tx.Query(ctx, `
		SELECT u.i - 1, s.id, s.kind, l.id
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(sku, loc, i)
		LEFT JOIN skus s ON s.code = u.sku LEFT JOIN locations l ON l.code = u.loc`, skus, locs)
	if err != nil {
		return res, err
	}
	var pairs []levelPair
	var line int
	var skuID, locID *int64
	var kind *string
	if _, err := pgx.ForEachRow(rows, []any{&line, &skuID, &kind, &locID}, func() error {
		l := in.Levels[line]
		switch {
		case errs[line] != nil:
		case skuID == nil:
			errs[line] = levelError(domain.CodeUnknownSKU, line, l.SKU, "sku", nil, "unknown SKU %s", strconv.Quote(l.SKU))
		case locID == nil:
			errs[line] = levelError(domain.CodeUnknownLocation, line, l.SKU, "location", nil, "unknown location %s", strconv.Quote(l.Location))
		case kindFromDB(*kind) != domain.KindQuantity:
			errs[line] = levelError(domain.CodeInvalidInput, line, l.SKU, "sku", nil,
				"SKU %s is a CODES SKU: its stock changes by importing codes, not by count", l.SKU)
		default:
			pairs = append(pairs, levelPair{line: line, skuID: *skuID, locationID: *locID, kind: domain.KindQuantity})
		}
		return nil
	}); err != nil {
		return res, err
	}
	slices.SortFunc(pairs, func(a, b levelPair) int {
		return cmp.Or(cmp.Compare(a.skuID, b.skuID), cmp.Compare(a.locationID, b.locationID))
	})

	// Make sure every balance that may change has a row, then lock them all
	// in the one global order and read them under the locks — with every
	// other balance of a SKU that has an entry without a location waiting:
	// units that arrive may be offered to it from all of them (see
	// lockLineStatement).
	var newSKUs, newLocs, allSKUs, allLocs []int64
	for _, p := range pairs {
		allSKUs, allLocs = append(allSKUs, p.skuID), append(allLocs, p.locationID)
		if in.Levels[p.line].OnHand > 0 {
			newSKUs, newLocs = append(newSKUs, p.skuID), append(newLocs, p.locationID)
		}
	}
	if len(newSKUs) > 0 {
		if _, err := tx.Exec(ctx, `
			INSERT INTO balances (sku_id, location_id)
			SELECT s, l FROM unnest($1::bigint[], $2::bigint[]) AS u(s, l) ORDER BY s, l
			ON CONFLICT DO NOTHING`, newSKUs, newLocs); err != nil {
			return res, err
		}
	}
	type rowKey struct{ sku, loc int64 }
	locked := make(map[rowKey][4]int, len(pairs))
	if len(pairs) > 0 {
		rows, err := tx.Query(ctx, `
			SELECT b.sku_id, b.location_id, b.on_hand, b.reserved, b.preordered, b.committed
			FROM balances b
			WHERE b.sku_id = ANY($1::bigint[])
			  AND ((b.sku_id, b.location_id) IN (SELECT * FROM unnest($1::bigint[], $2::bigint[]))
			       OR EXISTS (SELECT FROM waitlist_entries w WHERE w.sku_id = b.sku_id AND w.status = 'waiting' AND w.location_id IS NULL))
			ORDER BY b.sku_id, b.location_id
			FOR NO KEY UPDATE OF b`, allSKUs, allLocs)
		if err != nil {
			return res, err
		}
		var k rowKey
		var onHand, reserved, preordered, committed int
		if _, err := pgx.ForEachRow(rows, []any{&k.sku, &k.loc, &onHand, &reserved, &preordered, &committed}, func() error {
			locked[k] = [4]int{onHand, reserved, preordered, committed}
			return nil
		}); err != nil {
			return res, err
		}
	}

	// Decide each level under the locks.
	var apply []levelPair
	var applySKUs, applyLocs []int64
	var deltas []int32
	for _, p := range pairs {
		l := in.Levels[p.line]
		row := locked[rowKey{p.skuID, p.locationID}] // no row: all zero
		p.current, p.reserved, p.preordered, p.committed = row[0], row[1], row[2], row[3]
		switch {
		case l.ExpectedOnHand != nil && *l.ExpectedOnHand != p.current:
			errs[p.line] = levelError(domain.CodeStaleQuantity, p.line, l.SKU, "expectedOnHand", nil,
				"on hand is %d, not the expected %d; re-read and retry", p.current, *l.ExpectedOnHand)
		case l.OnHand < p.reserved+p.committed:
			lowest := p.reserved + p.committed
			errs[p.line] = levelError(domain.CodeBelowReserved, p.line, l.SKU, "onHand", &lowest, "%s",
				belowHeld(p.current, p.reserved, p.committed, fmt.Sprintf("onHand cannot go below %d", lowest)))
		case l.OnHand == p.current:
			res.Unchanged++
		default:
			apply = append(apply, p)
			applySKUs, applyLocs = append(applySKUs, p.skuID), append(applyLocs, p.locationID)
			deltas = append(deltas, int32(l.OnHand-p.current))
		}
	}

	// Write the changes: balances, ledger and events in one statement.
	changed := make(map[rowKey]domain.Balance, len(apply))
	if len(apply) > 0 {
		rows, err := tx.Query(ctx, `
			WITH b AS (
				UPDATE balances b SET on_hand = b.on_hand + u.d, updated_at = now()
				FROM unnest($1::bigint[], $2::bigint[], $3::int[]) AS u(s, l, d)
				WHERE b.sku_id = u.s AND b.location_id = u.l
				RETURNING b.*, u.d
			), ledger AS (
				INSERT INTO stock_movements (sku_id, location_id, on_hand_delta, cause, reason, reference, actor)
				SELECT sku_id, location_id, d, 'adjusted', $4, $5, $6 FROM b ORDER BY sku_id, location_id
			), event AS (
				INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved, committed)
				SELECT sku_id, location_id, 'adjusted', on_hand, reserved, committed FROM b ORDER BY sku_id, location_id
			)
			SELECT b.sku_id, b.location_id, `+balanceColumns+`
			FROM b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id`,
			applySKUs, applyLocs, deltas, domain.StockReasonSync, in.Reference, domain.ActorFrom(ctx).Name)
		if err != nil {
			return res, err
		}
		var k rowKey
		var b domain.Balance
		if _, err := pgx.ForEachRow(rows, []any{&k.sku, &k.loc, &b.SKU, &b.Location, &b.OnHand, &b.Reserved, &b.Committed, &b.PendingSupply, &b.Preordered, &b.UpdatedAt}, func() error {
			changed[k] = b
			return nil
		}); err != nil {
			if pgCode(err) == pgCheckViolation {
				return res, fmt.Errorf("balance check refused a stock level decided under its lock: %w", err)
			}
			return res, err
		}
		if len(changed) != len(apply) {
			return res, fmt.Errorf("stock levels: %d of %d locked balances changed", len(changed), len(apply))
		}
		// Stock that arrives goes to waiting pre-orders first, as with
		// adjustStock; rare, so one balance at a time.
		for _, p := range apply {
			k := rowKey{p.skuID, p.locationID}
			if b := changed[k]; b.Preordered > 0 && b.OnHand > p.current {
				if changed[k], err = fillPreorders(ctx, tx, balanceKey{p.skuID, p.locationID, p.kind}, b); err != nil {
					return res, err
				}
			}
		}
		// Then what is left goes to the waitlists' lines, in one statement
		// for every balance that rose.
		var rose []balanceKey
		for _, p := range apply {
			if in.Levels[p.line].OnHand > p.current {
				rose = append(rose, balanceKey{p.skuID, p.locationID, p.kind})
			}
		}
		if len(rose) > 0 {
			offered, err := s.offerFreed(ctx, tx, freedAt(rose...))
			if err != nil {
				return res, err
			}
			for _, k := range rose {
				if offered == 0 {
					break
				}
				if changed[rowKey{k.skuID, k.locationID}], err = readBalance(ctx, tx, k); err != nil {
					return res, err
				}
			}
		}
	}

	slices.SortFunc(apply, func(a, b levelPair) int { return cmp.Compare(a.line, b.line) })
	res.Applied = len(apply)
	res.Balances = make([]domain.Balance, 0, len(apply))
	for _, p := range apply {
		res.Balances = append(res.Balances, changed[rowKey{p.skuID, p.locationID}])
	}
	res.Errors = []domain.Error{}
	for _, e := range errs {
		if e != nil {
			res.Errors = append(res.Errors, *e)
		}
	}
	res.Failed = len(res.Errors)
	outcome, err := json.Marshal(res)
	if err != nil {
		return res, err
	}
	_, err = tx.Exec(ctx, `UPDATE stock_syncs SET outcome = $2 WHERE reference = $1`, in.Reference, outcome)
	return res, err
}

// replayStockLevels answers a reference that is already taken: its stored
// outcome when the levels are the same, else IDEMPOTENCY_KEY_REUSED.
func replayStockLevels(ctx context.Context, tx pgx.Tx, reference string, fp []byte) (domain.StockLevelsResult, error) {
	var res domain.StockLevelsResult
	var stored, outcome []byte
	if err := tx.QueryRow(ctx, `SELECT fingerprint, outcome FROM stock_syncs WHERE reference = $1`, reference).Scan(&stored, &outcome); err != nil {
		return res, err
	}
	if !bytes.Equal(stored, fp) {
		return res, &domain.Error{Code: domain.CodeIdempotencyKeyReused, Field: []string{"input", "reference"},
			Message: "reference " + strconv.Quote(reference) + " was already used with different levels; use a new reference"}
	}
	if err := json.Unmarshal(outcome, &res); err != nil {
		return res, fmt.Errorf("stored outcome of stock sync %q: %w", reference, err)
	}
	res.Replayed = true
	return res, nil
}

// levelError is a refusal of one level, naming its line and field.
func levelError(code domain.ErrorCode, line int, sku, field string, available *int, format string, args ...any) *domain.Error {
	return &domain.Error{Code: code, Message: fmt.Sprintf(format, args...), Line: &line, SKU: sku, Available: available,
		Field: []string{"input", "levels", strconv.Itoa(line), field}}
}
