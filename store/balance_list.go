package store

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// BalanceList pages through every balance in (SKU code, location code)
// order, keyset-paginated so a page costs the same however deep it is. The
// page and the newest event seq come from one snapshot: every change after
// it has a later seq, so the dashboard misses nothing by subscribing from it.
func (s *Store) BalanceList(ctx context.Context, after string, limit int) (domain.BalancePage, error) {
	if limit < 1 || limit > domain.MaxBalancesPage {
		return domain.BalancePage{}, domain.Limitf("first must be between 1 and %d", domain.MaxBalancesPage)
	}
	afterSKU, afterLoc, err := decodeBalanceCursor(after)
	if err != nil {
		return domain.BalancePage{}, err
	}
	var page domain.BalancePage
	page.Balances, page.Seq, err = s.readBalances(ctx, afterSKU, afterLoc, limit+1)
	if err != nil {
		return domain.BalancePage{}, err
	}
	if len(page.Balances) > limit {
		page.Balances = page.Balances[:limit]
		last := page.Balances[limit-1]
		next := base64.RawURLEncoding.EncodeToString([]byte(last.SKU + "\x00" + last.Location))
		page.Next = &next
	}
	return page, nil
}

// decodeBalanceCursor reads BalanceList's cursor: base64url("sku\x00location").
func decodeBalanceCursor(after string) (sku, location string, err error) {
	if after == "" {
		return "", "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(after)
	if err != nil {
		return "", "", domain.Limitf("after is not a cursor from a previous page")
	}
	sku, location, ok := strings.Cut(string(raw), "\x00")
	// Both parts are identifiers (printable UTF-8, no NUL): anything else
	// was not made here, and PostgreSQL would refuse it as text.
	if !ok || domain.CheckIdentifier(nil, sku) != nil || domain.CheckIdentifier(nil, location) != nil {
		return "", "", domain.Limitf("after is not a cursor from a previous page")
	}
	return sku, location, nil
}

// readBalances reads up to limit balances after (afterSKU, afterLoc) and
// the newest event seq in one snapshot.
func (s *Store) readBalances(ctx context.Context, afterSKU, afterLoc string, limit int) (list []domain.Balance, seq int64, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT greatest(coalesce(max(seq), 0), (SELECT through_seq FROM stock_events_pruned)) FROM stock_events`).Scan(&seq); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			SELECT `+balanceColumns+`
			FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
			WHERE (s.code, l.code) > ($1, $2)
			ORDER BY s.code, l.code LIMIT $3`, afterSKU, afterLoc, limit)
		if err != nil {
			return err
		}
		list, err = pgx.CollectRows(rows, scanBalance)
		return err
	})
	return list, seq, err
}
