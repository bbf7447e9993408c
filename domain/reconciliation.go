package domain

import "context"

// ReconciliationIssue is one invariant that does not hold. Nothing corrects it
// automatically: a person decides, because the cause may be a bug upstream.
type ReconciliationIssue struct {
	Kind     string // e.g. "on_hand_ledger_mismatch"
	SKU      string
	Location string
	Detail   string
}

// Reconciler checks the stock invariants. Implemented by store.Store.
type Reconciler interface {
	Reconciliation(ctx context.Context) ([]ReconciliationIssue, error)
}
