package store

import (
	"cmp"
	"context"
	"errors"
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
	kind       domain.StockKind
	locationID int64 // 0: source from locations by priority
	location   string
	quantity   int
}

// heldLine is what one claim took at one location: one reservation_lines row.
// quantity includes preorder, the part sold against expected supply.
type heldLine struct {
	index      int
	skuID      int64
	sku        string
	kind       domain.StockKind
	locationID int64
	location   string
	quantity   int
	preorder   int
}

// claimBasket claims every line of a basket for reservation id, or returns the
// first refusal (UNKNOWN_SKU, UNKNOWN_LOCATION, OUT_OF_STOCK) naming its line.
//
// Lock order: lines are processed by (sku id, location id), and a SKU with a
// line to be sourced first locks all its balance rows in location id order.
// Every writer takes balance locks in that one global order, so baskets never
// deadlock on each other (the retry in inTx remains for anything else). Code
// rows are claimed after their balance row is locked, so claimers of one
// balance never compete for the same codes.
func claimBasket(ctx context.Context, tx pgx.Tx, r reservationRef, lines []domain.ReserveLine) ([]domain.ReservationLine, error) {
	basket, err := resolveBasket(ctx, tx, lines)
	if err != nil {
		return nil, err
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
		h, err := claimSKU(ctx, tx, r, basket[start:end])
		if err != nil {
			return nil, err
		}
		held = append(held, h...)
		start = end
	}
	if err := insertHeldLines(ctx, tx, r.id, held); err != nil {
		return nil, err
	}
	// What was held, in input line order (a sourced line's parts in sourcing
	// order), as reads of the reservation return it.
	slices.SortStableFunc(held, func(a, b heldLine) int { return cmp.Compare(a.index, b.index) })
	out := make([]domain.ReservationLine, len(held))
	for i, h := range held {
		out[i] = domain.ReservationLine{InputLine: h.index, SKU: h.sku, Location: h.location, Quantity: h.quantity, PreorderQuantity: h.preorder}
	}
	return out, nil
}

// reservationRef names the reservation a claim is for, and its checkout, which
// the claim's stock event carries.
type reservationRef struct{ id, checkoutID string }

// claimSKU claims one SKU's lines; they are sorted with sourced lines last.
func claimSKU(ctx context.Context, tx pgx.Tx, r reservationRef, lines []basketLine) ([]heldLine, error) {
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
			h, err := claimAt(ctx, tx, r, l)
			if err != nil {
				return nil, err
			}
			held = append(held, h)
			continue
		}
		h, err := claimSourced(ctx, tx, r, l, sources)
		if err != nil {
			return nil, err
		}
		held = append(held, h...)
	}
	return held, nil
}

// claimAt claims a line at its location: from stock if there is enough (the
// seeds' single conditional UPDATE), else from stock plus what can still be
// pre-ordered against expected supply.
func claimAt(ctx context.Context, tx pgx.Tx, r reservationRef, l basketLine) (heldLine, error) {
	h := heldLine{index: l.index, skuID: l.skuID, sku: l.sku, kind: l.kind, locationID: l.locationID, location: l.location, quantity: l.quantity}
	err := claim(ctx, tx, r, l.skuID, l.locationID, l.quantity, 0)
	if !errors.Is(err, errNotAvailable) {
		return h, err
	}
	// The failed UPDATE locked nothing; lock now, so the split below is
	// computed on the values the claim will change.
	c, err := readCapacity(ctx, tx, l.skuID, l.locationID, true)
	if err != nil {
		return h, err
	}
	if c.stock+c.preorder < l.quantity {
		return h, outOfStockError(l, c.stock+c.preorder)
	}
	stock := min(l.quantity, c.stock)
	h.preorder = l.quantity - stock
	return h, claim(ctx, tx, r, l.skuID, l.locationID, stock, h.preorder)
}

// claimSourced takes a line without a location from stock at locations in
// priority order, then, if that is not enough, from what can be pre-ordered,
// again in priority order. The balance rows are locked, so what is read is
// what the claims find.
func claimSourced(ctx context.Context, tx pgx.Tx, r reservationRef, l basketLine, sources []source) ([]heldLine, error) {
	caps := make([]capacity, len(sources))
	total := 0
	for i, src := range sources {
		var err error
		if caps[i], err = readCapacity(ctx, tx, l.skuID, src.id, false); err != nil { // locked by lockSources
			return nil, err
		}
		total += caps[i].stock + caps[i].preorder
	}
	if total < l.quantity {
		return nil, outOfStockError(l, total)
	}
	plan := make([]heldLine, len(sources))
	remaining := l.quantity
	for _, fromPreorder := range []bool{false, true} {
		for i, c := range caps {
			take := min(remaining, c.stock)
			if fromPreorder {
				take = min(remaining, c.preorder)
				plan[i].preorder += take
			}
			plan[i].quantity += take
			remaining -= take
		}
	}
	var held []heldLine
	for i, p := range plan {
		if p.quantity == 0 {
			continue
		}
		p.index, p.skuID, p.sku, p.kind, p.locationID, p.location = l.index, l.skuID, l.sku, l.kind, sources[i].id, sources[i].code
		if err := claim(ctx, tx, r, l.skuID, p.locationID, p.quantity-p.preorder, p.preorder); err != nil {
			return nil, err // cannot be errNotAvailable: the row is locked and was just read
		}
		held = append(held, p)
	}
	return held, nil
}

// capacity is what a balance can give a new line now: stock, and units that
// can still be pre-ordered against expected supply.
type capacity struct{ stock, preorder int }

func readCapacity(ctx context.Context, tx pgx.Tx, skuID, locationID int64, lock bool) (capacity, error) {
	c := capacity{}
	query := `SELECT on_hand - reserved - committed, pending_supply - preordered FROM balances WHERE sku_id = $1 AND location_id = $2`
	if lock {
		query += ` FOR NO KEY UPDATE`
	}
	err := tx.QueryRow(ctx, query, skuID, locationID).Scan(&c.stock, &c.preorder)
	if errors.Is(err, pgx.ErrNoRows) {
		return capacity{}, nil // never stocked here
	}
	return c, err
}

// source is a location a sourced line may take from.
type source struct {
	id   int64
	code string
}

// lockSources locks every balance row of a SKU in location id order and
// returns their locations in sourcing order (priority, then code).
func lockSources(ctx context.Context, tx pgx.Tx, skuID int64) ([]source, error) {
	rows, err := tx.Query(ctx, `
		SELECT b.location_id, l.code, l.priority
		FROM balances b JOIN locations l ON l.id = b.location_id
		WHERE b.sku_id = $1
		ORDER BY b.location_id
		FOR NO KEY UPDATE OF b`, skuID)
	if err != nil {
		return nil, err
	}
	type row struct {
		source
		priority int
	}
	locked, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.id, &x.code, &x.priority)
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

// claim is the conditional claim of stock units and preorder units at one
// balance, with its ledger row; errNotAvailable if the balance has too little.
func claim(ctx context.Context, tx pgx.Tx, r reservationRef, skuID, locationID int64, stock, preorder int) error {
	_, err := applyMovement(ctx, tx, balanceKey{skuID: skuID, locationID: locationID},
		movement{reserved: stock, preordered: preorder, cause: "reserved", reservationID: &r.id, checkoutID: r.checkoutID, claim: true})
	return err
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

// resolveBasket looks up every SKU and location code of the basket in one
// query, answering UNKNOWN_SKU / UNKNOWN_LOCATION for the first line that
// names one that does not exist.
func resolveBasket(ctx context.Context, tx pgx.Tx, lines []domain.ReserveLine) ([]basketLine, error) {
	var skuCodes, locCodes []string
	for _, l := range lines {
		skuCodes = append(skuCodes, l.SKU)
		if l.Location != nil {
			locCodes = append(locCodes, *l.Location)
		}
	}
	type sku struct {
		id   int64
		kind string
	}
	skus := map[string]sku{}
	locs := map[string]int64{}
	rows, err := tx.Query(ctx, `
		SELECT true, code, id, kind FROM skus WHERE code = ANY($1)
		UNION ALL
		SELECT false, code, id, '' FROM locations WHERE code = ANY($2)`, skuCodes, locCodes)
	if err != nil {
		return nil, err
	}
	var isSKU bool
	var code, kind string
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&isSKU, &code, &id, &kind}, func() error {
		if isSKU {
			skus[code] = sku{id, kind}
		} else {
			locs[code] = id
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]basketLine, len(lines))
	for i, l := range lines {
		field := func(name string) []string { return []string{"input", "lines", strconv.Itoa(i), name} }
		s, ok := skus[l.SKU]
		if !ok {
			return nil, &domain.Error{Code: domain.CodeUnknownSKU, Line: &i, SKU: l.SKU, Field: field("sku"), Message: "unknown SKU " + strconv.Quote(l.SKU)}
		}
		out[i] = basketLine{index: i, skuID: s.id, kind: kindFromDB(s.kind), sku: l.SKU, quantity: l.Quantity}
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

// insertHeldLines writes the reservation's lines in one statement, then
// claims specific code rows for the in-stock part of each CODES line.
func insertHeldLines(ctx context.Context, tx pgx.Tx, reservationID string, held []heldLine) error {
	idx := make([]int32, len(held))
	skus := make([]int64, len(held))
	locs := make([]int64, len(held))
	qty := make([]int32, len(held))
	pre := make([]int32, len(held))
	for i, h := range held {
		idx[i], skus[i], locs[i], qty[i], pre[i] = int32(h.index), h.skuID, h.locationID, int32(h.quantity), int32(h.preorder)
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity, preorder_quantity)
		SELECT $1, * FROM unnest($2::int[], $3::bigint[], $4::bigint[], $5::int[], $6::int[])
		RETURNING id, line_no, location_id`,
		reservationID, idx, skus, locs, qty, pre)
	if err != nil {
		return err
	}
	type key struct {
		index    int
		location int64
	}
	ids := map[key]int64{}
	var id, loc int64
	var line int
	if _, err := pgx.ForEachRow(rows, []any{&id, &line, &loc}, func() error { ids[key{line, loc}] = id; return nil }); err != nil {
		return err
	}
	for _, h := range held {
		if h.kind == domain.KindCodes && h.quantity > h.preorder {
			if err := claimCodes(ctx, tx, ids[key{h.index, h.locationID}], h); err != nil {
				return err
			}
		}
	}
	return nil
}

// claimCodes marks the oldest available codes of a balance held by a
// reservation line. The balance row is already locked and its reserved count
// raised by the same number, so exactly that many must be found; SKIP LOCKED
// only keeps a claim from waiting on rows some other statement has locked.
func claimCodes(ctx context.Context, tx pgx.Tx, lineID int64, h heldLine) error {
	want := h.quantity - h.preorder
	tag, err := tx.Exec(ctx, `
		UPDATE codes SET status = 'held', reservation_line_id = $1, updated_at = now()
		WHERE id IN (SELECT id FROM codes
		             WHERE sku_id = $2 AND location_id = $3 AND status = 'available'
		             ORDER BY batch_id, id LIMIT $4
		             FOR NO KEY UPDATE SKIP LOCKED)`, lineID, h.skuID, h.locationID, want)
	if err != nil {
		return err
	}
	if int(tag.RowsAffected()) != want {
		return fmt.Errorf("codes balance out of step: %d codes claimable for %d counted available", tag.RowsAffected(), want)
	}
	return nil
}
