package store

import (
	"cmp"
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// The keyset pages the Relay connections read (domain.ListPages). Each
// reads first+1 rows strictly after the position, in one transaction, so
// that the extra row says whether more follow without a count; no page
// skips rows with OFFSET, so a deep page costs what the first does.

var _ domain.ListPages = (*Store)(nil)

// pageOf trims rows read with a limit of first+1 to a page.
func pageOf[T any](rows []T, first int) domain.Page[T] {
	if len(rows) > first {
		return domain.Page[T]{Items: rows[:first], More: true}
	}
	return domain.Page[T]{Items: rows}
}

func checkFirst(first, most int) error {
	if first < 1 || first > most {
		return domain.Limitf("first must be between 1 and %d", most)
	}
	return nil
}

// ReservationsPage is a checkout's reservations, newest first (created_at,
// then id, both descending) after the position.
func (s *Store) ReservationsPage(ctx context.Context, checkoutID string, after *domain.ReservationKey, first int) (domain.Page[domain.Reservation], error) {
	if err := domain.CheckIdentifier([]string{"checkoutId"}, checkoutID); err != nil {
		return domain.Page[domain.Reservation]{}, domain.Limitf("%s", err.(*domain.Error).Message)
	}
	if err := checkFirst(first, domain.MaxReservationPage); err != nil {
		return domain.Page[domain.Reservation]{}, err
	}
	var afterAt, afterID any // NULL: the first page
	if after != nil {
		id, ok := canonicalUUID(after.ID)
		if !ok {
			return domain.Page[domain.Reservation]{}, domain.InvalidCursor()
		}
		afterAt, afterID = after.CreatedAt, id
	}
	var out []domain.Reservation
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+reservationColumns+` FROM reservations r
			WHERE r.checkout_id = $1 AND ($2::timestamptz IS NULL OR (r.created_at, r.id) < ($2, $3::uuid))
			ORDER BY r.created_at DESC, r.id DESC LIMIT $4`, checkoutID, afterAt, afterID, first+1)
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Reservation, error) { return scanReservation(r) }); err != nil {
			return err
		}
		return loadDetails(ctx, tx, out)
	})
	return pageOf(out, first), wrap("ReservationsPage", err)
}

// BalancesPage is every balance by SKU then location code after the
// position, and the newest event seq, in one snapshot (as BalanceList).
func (s *Store) BalancesPage(ctx context.Context, after *domain.BalanceKey, first int) (domain.BalancesRead, error) {
	if err := checkFirst(first, domain.MaxBalancesPage); err != nil {
		return domain.BalancesRead{}, err
	}
	var sku, loc string // ("", "") sorts before every balance
	if after != nil {
		sku, loc = after.SKU, after.Location
	}
	list, seq, err := s.readBalances(ctx, sku, loc, first+1)
	if err != nil {
		return domain.BalancesRead{}, wrap("BalancesPage", err)
	}
	return domain.BalancesRead{Page: pageOf(list, first), Seq: seq}, nil
}

// WebhookDeliveriesPage is an endpoint's delivery log, newest first (by
// id), below afterID (0: from the newest).
func (s *Store) WebhookDeliveriesPage(ctx context.Context, endpointID string, afterID int64, first int) (domain.Page[domain.WebhookDelivery], error) {
	if err := checkFirst(first, domain.MaxWebhookDeliveries); err != nil {
		return domain.Page[domain.WebhookDelivery]{}, err
	}
	list, err := s.webhookDeliveries(ctx, endpointID, first+1, afterID)
	return pageOf(list, first), wrap("WebhookDeliveriesPage", err)
}

// ReconciliationPage checks every balance in one snapshot, as
// Reconciliation, and answers the issues after the position by SKU,
// location, kind and detail. The issues are computed, not stored: the check
// is whole on every page, and only its answer is cut at the position.
func (s *Store) ReconciliationPage(ctx context.Context, after *domain.ReconciliationKey, first int) (domain.Page[domain.ReconciliationIssue], error) {
	if err := checkFirst(first, domain.MaxReconciliationPage); err != nil {
		return domain.Page[domain.ReconciliationIssue]{}, err
	}
	var issues []domain.ReconciliationIssue
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) (err error) {
		issues, err = reconcile(ctx, tx)
		return err
	})
	if err != nil {
		return domain.Page[domain.ReconciliationIssue]{}, wrap("ReconciliationPage", err)
	}
	slices.SortFunc(issues, func(a, b domain.ReconciliationIssue) int { return compareIssueKeys(issueKey(a), issueKey(b)) })
	start := 0
	if after != nil {
		start, _ = slices.BinarySearchFunc(issues, *after, func(i domain.ReconciliationIssue, k domain.ReconciliationKey) int {
			if compareIssueKeys(issueKey(i), k) <= 0 {
				return -1 // at or before the position: not on this page
			}
			return 1
		})
	}
	issues = issues[start:]
	return pageOf(issues[:min(len(issues), first+1)], first), nil
}

// issueKey is an issue's keyset position in ReconciliationPage's order.
func issueKey(i domain.ReconciliationIssue) domain.ReconciliationKey {
	return domain.ReconciliationKey{SKU: i.SKU, Location: i.Location, Kind: i.Kind, Detail: i.Detail}
}

func compareIssueKeys(a, b domain.ReconciliationKey) int {
	return cmp.Or(cmp.Compare(a.SKU, b.SKU), cmp.Compare(a.Location, b.Location), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Detail, b.Detail))
}

// WaitlistLinesPage is the waitlists by entries waiting, most first, then
// SKU code, after the position. Lines are counted afresh for each page.
func (s *Store) WaitlistLinesPage(ctx context.Context, after *domain.WaitlistLineKey, first int) (domain.Page[domain.WaitlistLine], error) {
	if err := checkFirst(first, domain.MaxWaitlistLines); err != nil {
		return domain.Page[domain.WaitlistLine]{}, err
	}
	lines, err := s.waitlistLines(ctx, first+1, after)
	return pageOf(lines, first), err
}
