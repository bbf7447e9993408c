package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// basketLine is one input line with its codes resolved to ids.
type basketLine struct {
	index      int // position in the request, for userErrors
	skuID      int64
	sku        string
	locationID int64 // 0: source from locations by priority
	location   string
	quantity   int
}

// heldLine is stock a claim took: one reservation_lines row.
type heldLine struct {
	index      int
	skuID      int64
	locationID int64
	quantity   int
}

// claimBasket claims every line of a basket for reservation id, or returns the
// first refusal (UNKNOWN_SKU, UNKNOWN_LOCATION, OUT_OF_STOCK) naming its line.
//
// Lock order: lines are processed by (sku id, location id), and a SKU with a
// line to be sourced first locks all its balance rows in location id order.
// Every writer takes balance locks in that one global order, so baskets never
// deadlock on each other (the retry in inTx remains for anything else).
func claimBasket(ctx context.Context, tx pgx.Tx, reservationID string, lines []domain.ReserveLine) error {
	basket, err := resolveBasket(ctx, tx, lines)
	if err != nil {
		return err
	}
	slices.SortStableFunc(basket, func(a, b basketLine) int {
		return cmp.Or(cmp.Compare(a.skuID, b.skuID), cmp.Compare(sourcedLast(a), sourcedLast(b)))
	})
	var held []heldLine
	for start := 0; start < len(basket); {
		end := start
		for end < len(basket) && basket[end].skuID == basket[start].skuID {
			end++
		}
		h, err := claimSKU(ctx, tx, reservationID, basket[start:end])
		if err != nil {
			return err
		}
		held = append(held, h...)
		start = end
	}
	return insertHeldLines(ctx, tx, reservationID, held)
}

// claimSKU claims one SKU's lines; they are sorted with sourced lines last.
func claimSKU(ctx context.Context, tx pgx.Tx, reservationID string, lines []basketLine) ([]heldLine, error) {
	var sources []source
	if lines[len(lines)-1].locationID == 0 {
		var err error
		if sources, err = lockSources(ctx, tx, lines[0].skuID); err != nil {
			return nil, err
		}
	}
	var held []heldLine
	for _, l := range lines {
		if l.locationID != 0 {
			if err := claim(ctx, tx, reservationID, l.skuID, l.locationID, l.quantity); err != nil {
				return nil, outOfStock(ctx, tx, l, err)
			}
			held = append(held, heldLine{l.index, l.skuID, l.locationID, l.quantity})
			continue
		}
		// Sourced: take from locations in priority order until satisfied. The
		// rows are locked, so what we read is what the claims will find.
		total := 0
		for i := range sources {
			if err := tx.QueryRow(ctx, `SELECT on_hand - reserved FROM balances WHERE sku_id = $1 AND location_id = $2`,
				l.skuID, sources[i].locationID).Scan(&sources[i].available); err != nil {
				return nil, err
			}
			total += sources[i].available
		}
		if total < l.quantity {
			return nil, outOfStockError(l, total)
		}
		remaining := l.quantity
		for _, src := range sources {
			take := min(remaining, src.available)
			if take <= 0 {
				continue
			}
			if err := claim(ctx, tx, reservationID, l.skuID, src.locationID, take); err != nil {
				return nil, err // cannot happen: the row is locked and was just read
			}
			held = append(held, heldLine{l.index, l.skuID, src.locationID, take})
			remaining -= take
			if remaining == 0 {
				break
			}
		}
	}
	return held, nil
}

// source is a location a sourced line may take stock from.
type source struct {
	locationID int64
	available  int
}

// lockSources locks every balance row of a SKU in location id order and
// returns them in sourcing order (priority, then code).
func lockSources(ctx context.Context, tx pgx.Tx, skuID int64) ([]source, error) {
	rows, err := tx.Query(ctx, `
		SELECT b.location_id, l.priority, l.code, b.on_hand - b.reserved
		FROM balances b JOIN locations l ON l.id = b.location_id
		WHERE b.sku_id = $1
		ORDER BY b.location_id
		FOR UPDATE OF b`, skuID)
	if err != nil {
		return nil, err
	}
	type row struct {
		source
		priority int
		code     string
	}
	locked, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.locationID, &x.priority, &x.code, &x.available)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(locked, func(a, b row) int { return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(a.code, b.code)) })
	out := make([]source, len(locked))
	for i, r := range locked {
		out[i] = r.source
	}
	return out, nil
}

// claim is the conditional claim of q units at one balance, with its ledger row.
func claim(ctx context.Context, tx pgx.Tx, reservationID string, skuID, locationID int64, q int) error {
	_, err := applyMovement(ctx, tx, balanceKey{skuID: skuID, locationID: locationID},
		movement{reserved: q, cause: "reserved", reservationID: &reservationID, claim: true})
	return err
}

// outOfStock turns a failed claim into OUT_OF_STOCK saying what was available.
func outOfStock(ctx context.Context, tx pgx.Tx, l basketLine, err error) error {
	if err != errNotAvailable {
		return err
	}
	available := 0
	if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT on_hand - reserved FROM balances WHERE sku_id = $1 AND location_id = $2), 0)`,
		l.skuID, l.locationID).Scan(&available); err != nil {
		return err
	}
	return outOfStockError(l, available)
}

func outOfStockError(l basketLine, available int) error {
	where := "across all locations"
	if l.locationID != 0 {
		where = "at " + l.location
	}
	return &domain.Error{Code: domain.CodeOutOfStock, Line: &l.index, SKU: l.sku, Available: &available,
		Field:   []string{"input", "lines", strconv.Itoa(l.index), "quantity"},
		Message: fmt.Sprintf("line %d: %d of %s requested, %d available %s", l.index, l.quantity, l.sku, available, where)}
}

func sourcedLast(l basketLine) int64 {
	if l.locationID == 0 {
		return math.MaxInt64
	}
	return l.locationID
}

// resolveBasket looks up every SKU and location code of the basket in two
// queries, answering UNKNOWN_SKU / UNKNOWN_LOCATION for the first line that
// names one that does not exist.
func resolveBasket(ctx context.Context, tx pgx.Tx, lines []domain.ReserveLine) ([]basketLine, error) {
	var skuCodes, locCodes []string
	for _, l := range lines {
		skuCodes = append(skuCodes, l.SKU)
		if l.Location != nil {
			locCodes = append(locCodes, *l.Location)
		}
	}
	skus, err := idsByCode(ctx, tx, `SELECT code, id FROM skus WHERE code = ANY($1)`, skuCodes)
	if err != nil {
		return nil, err
	}
	locs, err := idsByCode(ctx, tx, `SELECT code, id FROM locations WHERE code = ANY($1)`, locCodes)
	if err != nil {
		return nil, err
	}
	out := make([]basketLine, len(lines))
	for i, l := range lines {
		field := func(name string) []string { return []string{"input", "lines", strconv.Itoa(i), name} }
		skuID, ok := skus[l.SKU]
		if !ok {
			return nil, &domain.Error{Code: domain.CodeUnknownSKU, Line: &i, SKU: l.SKU, Field: field("sku"), Message: "unknown SKU " + strconv.Quote(l.SKU)}
		}
		out[i] = basketLine{index: i, skuID: skuID, sku: l.SKU, quantity: l.Quantity}
		if l.Location != nil {
			locID, ok := locs[*l.Location]
			if !ok {
				return nil, &domain.Error{Code: domain.CodeUnknownLocation, Line: &i, SKU: l.SKU, Field: field("location"), Message: "unknown location " + strconv.Quote(*l.Location)}
			}
			out[i].locationID, out[i].location = locID, *l.Location
		}
	}
	return out, nil
}

func idsByCode(ctx context.Context, tx pgx.Tx, query string, codes []string) (map[string]int64, error) {
	out := map[string]int64{}
	if len(codes) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, query, codes)
	if err != nil {
		return nil, err
	}
	var code string
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&code, &id}, func() error { out[code] = id; return nil })
	return out, err
}

// insertHeldLines writes the reservation's lines in one statement.
func insertHeldLines(ctx context.Context, tx pgx.Tx, reservationID string, held []heldLine) error {
	idx := make([]int32, len(held))
	skus := make([]int64, len(held))
	locs := make([]int64, len(held))
	qty := make([]int32, len(held))
	for i, h := range held {
		idx[i], skus[i], locs[i], qty[i] = int32(h.index), h.skuID, h.locationID, int32(h.quantity)
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity)
		SELECT $1, * FROM unnest($2::int[], $3::bigint[], $4::bigint[], $5::int[])`,
		reservationID, idx, skus, locs, qty)
	return err
}
