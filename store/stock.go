package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

var _ domain.Stock = (*Store)(nil)

// StockReceive adds delivered stock to a QUANTITY SKU's balance. CODES SKUs are
// stocked by importing codes, so their count always equals their code rows.
//
// It is idempotent per (sku, location, reference) (claimReceipt): the
// reference names one receipt, so a warehouse system retrying after a lost
// answer gets the balance back, Replayed, and the delivery is counted once,
// however many instances the retries reach.
func (s *Store) StockReceive(ctx context.Context, in domain.ReceiveStockInput) (domain.StockChange, error) {
	if err := in.Validate(); err != nil {
		return domain.StockChange{}, err
	}
	var replayed bool
	b, err := s.balanceChange(ctx, in.SKU, in.Location, true, func(tx pgx.Tx, k balanceKey) (domain.Balance, error) {
		var err error
		if replayed, err = claimReceipt(ctx, tx, k, in); err != nil || replayed {
			if err != nil {
				return domain.Balance{}, err
			}
			return readBalance(ctx, tx, k)
		}
		out, err := applyMovement(ctx, tx, k, movement{onHand: in.Quantity, cause: "received", reference: in.Reference})
		if err != nil {
			return out, err
		}
		// Pre-orders were promised first; what is left goes to the line.
		if out.PendingSupply > 0 {
			if _, err := supplyArrived(ctx, tx, k, in.Quantity); err != nil {
				return out, err
			}
			if out, err = readBalance(ctx, tx, k); err != nil {
				return out, err
			}
		}
		return s.offerAndRead(ctx, tx, k, out)
	})
	return domain.StockChange{Balance: b, Replayed: replayed && err == nil}, wrap("StockReceive", err)
}

// balanceChange runs change on one balance in one transaction, after
// resolving its codes (UNKNOWN_SKU, UNKNOWN_LOCATION) and, when quantityOnly,
// refusing CODES SKUs, whose counts only move with their code rows.
func (s *Store) balanceChange(ctx context.Context, sku, location string, quantityOnly bool, change func(pgx.Tx, balanceKey) (domain.Balance, error)) (domain.Balance, error) {
	var out domain.Balance
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		k, err := resolveBalance(ctx, tx, sku, location)
		if err != nil {
			return err
		}
		if quantityOnly && k.kind != domain.KindQuantity {
			return codesNeedImport(sku)
		}
		// The balance first, with the others of its SKU if units it frees
		// may go to an entry without a location (see lockLineStatement).
		if err := lockLine(ctx, tx, k); err != nil {
			return err
		}
		out, err = change(tx, k)
		return err
	})
	return out, err
}

// StockAdjust corrects on-hand stock. The balance row is locked first, so the
// checks below see the value the update will change: a decrease never takes
// on_hand below reserved + committed (holds and unshipped orders are resolved
// explicitly, never silently), and
// ExpectedOnHand is an exact compare-and-swap.
//
// Every call applies: the reference is free text for the ledger, and two
// damaged units booked under one RMA are two adjustments. A call with a
// RequestKey is idempotent per (sku, location, requestKey)
// (claimAdjustment): the same inputs again answer the balance, Replayed,
// without re-checking ExpectedOnHand (the first call moved on hand past it);
// a refused call leaves its key free.
func (s *Store) StockAdjust(ctx context.Context, in domain.AdjustStockInput) (domain.StockChange, error) {
	if err := in.Validate(); err != nil {
		return domain.StockChange{}, err
	}
	var replayed bool
	b, err := s.balanceChange(ctx, in.SKU, in.Location, true, func(tx pgx.Tx, k balanceKey) (domain.Balance, error) {
		if in.RequestKey != nil {
			var err error
			if replayed, err = claimAdjustment(ctx, tx, k, in); err != nil || replayed {
				if err != nil {
					return domain.Balance{}, err
				}
				return readBalance(ctx, tx, k)
			}
		}
		var onHand, reserved, committed int
		if err := tx.QueryRow(ctx, `SELECT on_hand, reserved, committed FROM balances WHERE sku_id = $1 AND location_id = $2 FOR NO KEY UPDATE`,
			k.skuID, k.locationID).Scan(&onHand, &reserved, &committed); err != nil {
			return domain.Balance{}, err
		}
		if in.ExpectedOnHand != nil && *in.ExpectedOnHand != onHand {
			return domain.Balance{}, &domain.Error{Code: domain.CodeStaleQuantity, SKU: in.SKU, Field: []string{"input", "expectedOnHand"},
				Message: fmt.Sprintf("on hand is %d, not the expected %d; re-read and retry", onHand, *in.ExpectedOnHand)}
		}
		if onHand+in.Delta < reserved+committed {
			removable := onHand - reserved - committed
			return domain.Balance{}, &domain.Error{Code: domain.CodeBelowReserved, SKU: in.SKU, Field: []string{"input", "delta"}, Available: &removable,
				Message: belowHeld(onHand, reserved, committed, fmt.Sprintf("at most %d can be removed", removable))}
		}
		out, err := applyMovement(ctx, tx, k, movement{onHand: in.Delta, cause: "adjusted", reason: in.Reason, reference: in.Reference})
		if err != nil || in.Delta < 0 {
			return out, err
		}
		if out, err = fillPreorders(ctx, tx, k, out); err != nil {
			return out, err
		}
		return s.offerAndRead(ctx, tx, k, out)
	})
	return domain.StockChange{Balance: b, Replayed: replayed && err == nil}, wrap("StockAdjust", err)
}

// AvailabilityList reads balances for many SKUs in one statement (the
// storefront's hot path: no transaction around it, one round trip), answering
// in request order with nil for unknown SKUs. One statement is one snapshot,
// so the balances read are consistent with each other. It reads committed
// balances only and never counts code rows. A location filter naming an
// unknown location is refused; the same statement finds that out.
func (s *Store) AvailabilityList(ctx context.Context, q domain.AvailabilityQuery) ([]*domain.Availability, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	// Each SKU is read once however often it was asked for: the answer
	// still has one entry per requested SKU, in order (duplicates share
	// a copy), but 500 copies of one SKU are one row's work, not 500.
	distinct, at := dedupe(q.SKUs)
	got := make([]*domain.Availability, len(distinct))
	rows, err := s.pool.Query(ctx, `
		SELECT r.ord, s.code, l.code, b.on_hand, b.reserved, b.committed, b.pending_supply, b.preordered, b.updated_at,
		       (SELECT c FROM unnest($2::text[]) WITH ORDINALITY AS u(c, i)
		        WHERE NOT EXISTS (SELECT FROM locations WHERE code = c) ORDER BY i LIMIT 1)
		FROM unnest($1::text[]) WITH ORDINALITY AS r(code, ord)
		LEFT JOIN skus s ON s.code = r.code
		LEFT JOIN (balances b JOIN locations l ON l.id = b.location_id
		           AND ($2::text[] IS NULL OR l.code = ANY($2)))
		       ON b.sku_id = s.id
		ORDER BY r.ord, l.priority, l.code`, distinct, q.Locations)
	if err != nil {
		return nil, wrap("AvailabilityList", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ord int
		var sku, loc, unknownLocation *string
		var b domain.Balance
		var onHand, reserved, committed, pending, preordered *int
		var updatedAt *time.Time
		if err := rows.Scan(&ord, &sku, &loc, &onHand, &reserved, &committed, &pending, &preordered, &updatedAt, &unknownLocation); err != nil {
			return nil, wrap("AvailabilityList", err)
		}
		if unknownLocation != nil {
			return nil, domain.Limitf("unknown location %q", *unknownLocation)
		}
		if sku == nil {
			continue // unknown SKU: stays nil
		}
		a := got[ord-1]
		if a == nil {
			a = &domain.Availability{SKU: *sku, Locations: []domain.Balance{}}
			got[ord-1] = a
		}
		if loc != nil {
			b.SKU, b.Location = *sku, *loc
			b.OnHand, b.Reserved, b.Committed, b.PendingSupply, b.Preordered, b.UpdatedAt = *onHand, *reserved, *committed, *pending, *preordered, *updatedAt
			a.Locations = append(a.Locations, b)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("AvailabilityList", err)
	}
	out := make([]*domain.Availability, len(q.SKUs))
	used := make([]bool, len(got))
	for i, j := range at {
		switch a := got[j]; {
		case a == nil || !used[j]:
			out[i], used[j] = a, true
		default: // a repeat: its own copy, so no caller sees two entries alias
			c := *a
			c.Locations = slices.Clone(a.Locations)
			out[i] = &c
		}
	}
	return out, nil
}

// dedupe returns the distinct values in first-seen order and, for each
// value, its index among them.
func dedupe(values []string) (distinct []string, at []int) {
	index := make(map[string]int, len(values))
	at = make([]int, len(values))
	for i, v := range values {
		j, seen := index[v]
		if !seen {
			j = len(distinct)
			index[v] = j
			distinct = append(distinct, v)
		}
		at[i] = j
	}
	return distinct, at
}

func codesNeedImport(sku string) error {
	return &domain.Error{Code: domain.CodeInvalidInput, SKU: sku, Field: []string{"input", "sku"},
		Message: "SKU " + sku + " is a CODES SKU: its stock changes by importing codes, not by count"}
}

// fillPreorders allocates newly arrived stock to waiting pre-orders and
// returns the balance as it is afterwards (b when nothing was allocated).
func fillPreorders(ctx context.Context, tx pgx.Tx, k balanceKey, b domain.Balance) (domain.Balance, error) {
	if b.Preordered == 0 {
		return b, nil
	}
	filled, err := allocatePreorders(ctx, tx, k)
	if err != nil || filled == 0 {
		return b, err
	}
	return readBalance(ctx, tx, k)
}

// belowHeld is the message of a count refused for going below what holds
// and unshipped orders need: what is there, and what to do about it.
func belowHeld(onHand, reserved, committed int, limit string) string {
	if committed == 0 {
		return fmt.Sprintf("on hand %d with %d reserved: %s; release holds first", onHand, reserved, limit)
	}
	return fmt.Sprintf("on hand %d with %d reserved and %d committed to unshipped orders: %s; release holds or fulfil or cancel the orders first",
		onHand, reserved, committed, limit)
}
