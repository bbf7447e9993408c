package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

var _ domain.Orders = (*Store)(nil)

// commitsSQL says whether sold units of SKU s at location l are committed
// until they ship (an on-shipment location; codes never commit: the code is
// the goods). The query must alias skus s and locations l.
const commitsSQL = `(l.fulfillment = 'on_shipment' AND s.kind = 'quantity')`

// unshippedSQL selects the order lines (alias ol) with committed units
// waiting to ship (order_lines_unshipped_idx).
const unshippedSQL = `ol.commits AND ol.pending + ol.fulfilled + ol.cancelled < ol.quantity`

// inHandSQL is an order line's (alias ol) units in hand for the order:
// neither pending (pre-ordered, not yet allocated), shipped nor cancelled.
// Where the line commits, the balance's committed counts exactly these.
const inHandSQL = `(ol.quantity - ol.pending - ol.fulfilled - ol.cancelled)`

// OrderFulfill ships units in hand for the order: all of them, or the given
// quantities per (SKU, location) (a partial shipment). Where the line
// commits, committed and on_hand fall together with a ledger row and a
// FULFILLED event; elsewhere the units left on_hand at confirm, and the
// shipment is recorded (a ledger row and an event that move nothing).
func (s *Store) OrderFulfill(ctx context.Context, in domain.OrderChangeInput) (domain.OrderChange, error) {
	out, err := s.orderChange(ctx, in, false)
	return out, wrap("OrderFulfill", err)
}

// OrderCancel gives back what has not shipped: pre-ordered units not yet
// allocated first (their claim on pending supply), then units in hand —
// committed ones back to available, ones an on-confirm location already
// took off on_hand back onto it — which are offered to the waiting entries
// of their balances in this transaction, before any reserve can take them.
// A cancelled code is void: never sold again, still in the reveal audit.
func (s *Store) OrderCancel(ctx context.Context, in domain.OrderChangeInput) (domain.OrderChange, error) {
	out, err := s.orderChange(ctx, in, true)
	return out, wrap("OrderCancel", err)
}

// orderLineState is an order line locked for a fulfil or a cancel.
type orderLineState struct {
	id                int64
	key               balanceKey
	sku, location     string
	commits           bool
	quantity, pending int
	fulfilled         int
	cancelled         int
}

func (l orderLineState) inHand() int { return l.quantity - l.pending - l.fulfilled - l.cancelled }
func (l orderLineState) open() int   { return l.quantity - l.fulfilled - l.cancelled }

// lineMove is what one action does to one order line: units taken from
// pending (a cancel only) and from the units in hand.
type lineMove struct {
	line               *orderLineState
	fromPending, units int
}

// orderChange runs a fulfil or a cancel in one transaction. Lock order: the
// order row (which serializes every action on the order, so two of them
// never move one unit twice), then the balances of its lines in (sku,
// location) order as every writer takes them, then its lines, read under
// those locks: a pre-order allocation, which holds the balance, may have
// just changed pending (lockOrderLines).
func (s *Store) orderChange(ctx context.Context, in domain.OrderChangeInput, cancel bool) (domain.OrderChange, error) {
	if err := in.Validate(cancel); err != nil {
		return domain.OrderChange{}, err
	}
	fp := orderChangeFingerprint(in, cancel)
	var out domain.OrderChange
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = domain.OrderChange{}
		var orderID int64
		err := tx.QueryRow(ctx, `SELECT id FROM orders WHERE ref = $1 FOR NO KEY UPDATE`, in.OrderRef).Scan(&orderID)
		if errors.Is(err, pgx.ErrNoRows) {
			return &domain.Error{Code: domain.CodeNotFound, Field: []string{"input", "orderRef"}, Message: "no order " + strconv.Quote(in.OrderRef)}
		}
		if err != nil {
			return err
		}
		var prior []byte
		err = tx.QueryRow(ctx, `SELECT fingerprint FROM order_actions WHERE order_id = $1 AND reference = $2`, orderID, in.Reference).Scan(&prior)
		switch {
		case err == nil && bytes.Equal(prior, fp):
			out.Replayed = true
			out.Order, err = loadOrder(ctx, tx, orderID)
			return err
		case err == nil:
			return &domain.Error{Code: domain.CodeIdempotencyKeyReused, Field: []string{"input", "reference"},
				Message: "reference " + strconv.Quote(in.Reference) + " already named another change of this order"}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		lines, err := lockOrderLines(ctx, tx, orderID, in.Lines, cancel)
		if err != nil {
			return err
		}
		moves, err := planOrderChange(lines, in, cancel)
		if err != nil {
			return err
		}
		freed, err := applyOrderChange(ctx, tx, orderID, in, fp, cancel, moves)
		if err != nil {
			return err
		}
		if len(freed) > 0 {
			if _, err := s.offerFreed(ctx, tx, freedAt(freed...)); err != nil {
				return err
			}
		}
		out.Order, err = loadOrder(ctx, tx, orderID)
		return err
	})
	return out, err
}

// lockOrderLines locks the balances of an order's lines — only those of
// the (SKU, location) pairs the input names, when it names some — in one
// statement, in (sku, location) order, with, for a cancel (whose units an
// entry without a location may be offered), every balance of a SKU that has
// such an entry waiting, as lockLineStatement does; then the lines, read
// under those locks. Set-based: per balance a statement each, a 10,000-line
// order's fulfil took 20 s and its cancel ran past the request timeout.
func lockOrderLines(ctx context.Context, tx pgx.Tx, orderID int64, named []domain.OrderQuantity, cancel bool) ([]orderLineState, error) {
	var skus, locs []string // nil: every line
	if named != nil {
		skus, locs = make([]string, len(named)), make([]string, len(named))
		for i, l := range named {
			skus[i], locs[i] = l.SKU, l.Location
		}
	}
	b := &pgx.Batch{}
	b.Queue(`
		WITH k AS (
			SELECT DISTINCT ol.sku_id, ol.location_id
			FROM order_lines ol JOIN skus s ON s.id = ol.sku_id JOIN locations l ON l.id = ol.location_id
			WHERE ol.order_id = $1 AND ($2::text[] IS NULL OR (s.code, l.code) IN (SELECT * FROM unnest($2::text[], $3::text[])))
		)
		SELECT FROM balances b
		WHERE b.sku_id IN (SELECT sku_id FROM k)
		  AND ((b.sku_id, b.location_id) IN (SELECT * FROM k)
		       OR $4 AND EXISTS (SELECT FROM waitlist_entries w WHERE w.sku_id = b.sku_id AND w.status = 'waiting' AND w.location_id IS NULL))
		ORDER BY b.sku_id, b.location_id
		FOR NO KEY UPDATE OF b`, orderID, skus, locs, cancel)
	var lines []orderLineState
	b.Queue(`
		SELECT ol.id, ol.sku_id, ol.location_id, s.kind, s.code, l.code, ol.commits,
		       ol.quantity, ol.pending, ol.fulfilled, ol.cancelled
		FROM order_lines ol JOIN skus s ON s.id = ol.sku_id JOIN locations l ON l.id = ol.location_id
		WHERE ol.order_id = $1 AND ($2::text[] IS NULL OR (s.code, l.code) IN (SELECT * FROM unnest($2::text[], $3::text[])))
		ORDER BY ol.id
		FOR NO KEY UPDATE OF ol`, orderID, skus, locs).Query(func(rows pgx.Rows) error {
		var err error
		lines, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (orderLineState, error) {
			var l orderLineState
			var kind string
			err := r.Scan(&l.id, &l.key.skuID, &l.key.locationID, &kind, &l.sku, &l.location, &l.commits,
				&l.quantity, &l.pending, &l.fulfilled, &l.cancelled)
			l.key.kind = kindFromDB(kind)
			return l, err
		})
		return err
	})
	return lines, tx.SendBatch(ctx, b).Close()
}

// planOrderChange decides what the action moves on each line, or refuses it
// whole: a line of the input the order does not have, or asking for more
// than the order's lines for it can give, is INVALID_INPUT and nothing
// changes. A fulfil ships units in hand; a cancel takes pending units first,
// then units in hand. Without lines it takes everything it can, and is
// INVALID_INPUT when that is nothing.
func planOrderChange(lines []orderLineState, in domain.OrderChangeInput, cancel bool) ([]lineMove, error) {
	verb, room := "ship", orderLineState.inHand
	if cancel {
		verb, room = "cancel", orderLineState.open
	}
	take := func(l *orderLineState, n int) lineMove {
		m := lineMove{line: l}
		if cancel {
			m.fromPending = min(n, l.pending)
		}
		m.units = n - m.fromPending
		return m
	}
	var moves []lineMove
	if in.Lines == nil {
		for i := range lines {
			if n := room(lines[i]); n > 0 {
				moves = append(moves, take(&lines[i], n))
			}
		}
		if len(moves) == 0 {
			return nil, domain.InvalidInput([]string{"input"}, "order %s has nothing left to %s", in.OrderRef, verb)
		}
		return moves, nil
	}
	for i, want := range in.Lines {
		at := i
		var matching []*orderLineState
		total := 0
		for j := range lines {
			if lines[j].sku == want.SKU && lines[j].location == want.Location {
				matching = append(matching, &lines[j])
				total += room(lines[j])
			}
		}
		if len(matching) == 0 {
			return nil, &domain.Error{Code: domain.CodeInvalidInput, Line: &at, SKU: want.SKU, Field: []string{"input", "lines", strconv.Itoa(i), "sku"},
				Message: fmt.Sprintf("order %s has no line for SKU %s at %s", in.OrderRef, want.SKU, want.Location)}
		}
		if want.Quantity > total {
			return nil, &domain.Error{Code: domain.CodeInvalidInput, Line: &at, SKU: want.SKU, Available: &total,
				Field:   []string{"input", "lines", strconv.Itoa(i), "quantity"},
				Message: fmt.Sprintf("only %d of SKU %s at %s can be %s on order %s", total, want.SKU, want.Location, pastTense(verb), in.OrderRef)}
		}
		left := want.Quantity
		for _, l := range matching {
			if n := min(left, room(*l)); n > 0 {
				moves = append(moves, take(l, n))
				left -= n
			}
		}
	}
	return moves, nil
}

func pastTense(verb string) string {
	if verb == "ship" {
		return "shipped"
	}
	return "cancelled"
}

// actionLine is one (SKU, location) of an action as webhooks show it.
type actionLine struct {
	SKU      string `json:"sku"`
	Location string `json:"location"`
	Quantity int    `json:"quantity"`
}

// applyOrderChange writes the action: its row, the lines' counts, voided
// codes, and one balance movement (ledger row and event) per balance it
// touched. It returns the balances whose units it made available.
func applyOrderChange(ctx context.Context, tx pgx.Tx, orderID int64, in domain.OrderChangeInput, fp []byte, cancel bool, moves []lineMove) ([]balanceKey, error) {
	kind, cause := "fulfilled", "fulfilled"
	if cancel {
		kind, cause = "cancelled", "cancelled"
	}
	type balanceMove struct {
		key                           balanceKey
		sku, location                 string
		onHand, committed, preordered int
		units                         int
		freed                         int
	}
	var order []*balanceMove
	byKey := map[balanceKey]*balanceMove{}
	total := 0
	var ids, voidLines []int64
	var done, fromPending, voidUnits []int32
	for _, m := range moves {
		l := m.line
		b := byKey[l.key]
		if b == nil {
			b = &balanceMove{key: l.key, sku: l.sku, location: l.location}
			byKey[l.key] = b
			order = append(order, b)
		}
		n := m.fromPending + m.units
		b.units += n
		total += n
		switch {
		case !cancel && l.commits:
			b.onHand, b.committed = b.onHand-m.units, b.committed-m.units
		case cancel:
			b.preordered -= m.fromPending
			switch {
			case l.commits:
				b.committed -= m.units
				b.freed += m.units
			case l.key.kind == domain.KindQuantity:
				b.onHand += m.units
				b.freed += m.units
			}
		}
		ids, done, fromPending = append(ids, l.id), append(done, int32(n)), append(fromPending, int32(m.fromPending))
		if cancel && l.key.kind == domain.KindCodes && m.units > 0 {
			voidLines, voidUnits = append(voidLines, l.id), append(voidUnits, int32(m.units))
		}
	}
	slices.SortFunc(order, func(a, b *balanceMove) int {
		return cmp.Or(cmp.Compare(a.key.skuID, b.key.skuID), cmp.Compare(a.key.locationID, b.key.locationID))
	})
	shown := make([]actionLine, len(order))
	for i, b := range order {
		shown[i] = actionLine{b.sku, b.location, b.units}
	}
	linesJSON, err := json.Marshal(shown)
	if err != nil {
		return nil, err
	}
	var reason *string
	if cancel {
		reason = &in.Reason
	}
	var actionID int64
	if err := tx.QueryRow(ctx, `
		INSERT INTO order_actions (order_id, reference, kind, fingerprint, reason, units, lines, actor)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
		orderID, in.Reference, kind, fp, reason, total, linesJSON, domain.ActorFrom(ctx).Name).Scan(&actionID); err != nil {
		return nil, err
	}
	// The lines, the codes and the balances in one round trip. Each code
	// line voids the newest of its sold codes: a cancelled line's codes
	// are not told apart by what shipped, and none is sold again either way.
	column := "fulfilled"
	if cancel {
		column = "cancelled"
	}
	batch := &pgx.Batch{}
	batch.Queue(`UPDATE order_lines ol SET `+column+` = ol.`+column+` + u.n, pending = ol.pending - u.p
		FROM unnest($1::bigint[], $2::int[], $3::int[]) AS u(id, n, p) WHERE ol.id = u.id`, ids, done, fromPending)
	if len(voidLines) > 0 {
		batch.Queue(`
			WITH v AS (
				SELECT c.id FROM unnest($1::bigint[], $2::int[]) AS u(line, n)
				CROSS JOIN LATERAL (SELECT id FROM codes WHERE order_line_id = u.line AND status = 'sold'
				                    ORDER BY id DESC LIMIT u.n FOR NO KEY UPDATE) c
			), voided AS (
				UPDATE codes SET status = 'void', updated_at = now() WHERE id IN (SELECT id FROM v) RETURNING 1
			)
			SELECT inventory_expect_count((SELECT count(*) FROM voided), $3, 'sold codes of cancelled lines')`,
			voidLines, voidUnits, sum(voidUnits))
	}
	var freed []balanceKey
	for _, b := range order {
		batch.Queue(movementStatement, movementArgs(ctx, b.key, movement{onHand: b.onHand, committed: b.committed, preordered: b.preordered,
			cause: cause, reason: in.Reason, reference: "order " + in.OrderRef + ": " + in.Reference, orderActionID: &actionID})...)
		if b.freed > 0 {
			freed = append(freed, b.key)
		}
	}
	return freed, tx.SendBatch(ctx, batch).Close()
}

func sum(xs []int32) int64 {
	var n int64
	for _, x := range xs {
		n += int64(x)
	}
	return n
}

// orderChangeFingerprint names an action's normalized input: the kind, the
// reason and the lines in (SKU, location) order, or "all of it".
func orderChangeFingerprint(in domain.OrderChangeInput, cancel bool) []byte {
	var b strings.Builder
	if cancel {
		b.WriteString("cancel\x00" + in.Reason + "\x00")
	} else {
		b.WriteString("fulfil\x00\x00")
	}
	if in.Lines == nil {
		b.WriteString("*")
	} else {
		lines := slices.Clone(in.Lines)
		slices.SortFunc(lines, func(x, y domain.OrderQuantity) int {
			return strings.Compare(x.SKU+"\x00"+x.Location, y.SKU+"\x00"+y.Location)
		})
		for _, l := range lines {
			fmt.Fprintf(&b, "%s\x00%s\x00%d\x00", l.SKU, l.Location, l.Quantity)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return sum[:]
}

// loadOrder reads one order by id inside a transaction.
func loadOrder(ctx context.Context, tx pgx.Tx, orderID int64) (domain.Order, error) {
	orders, err := loadOrders(ctx, tx, `o.id = $1`, orderID)
	if err != nil {
		return domain.Order{}, err
	}
	if len(orders) != 1 {
		return domain.Order{}, fmt.Errorf("order %d vanished inside its transaction", orderID)
	}
	return orders[0].Order, nil
}
