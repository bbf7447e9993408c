package main

import (
	"context"
	"fmt"
	"strings"
)

// checkInvariants is the correctness check after every scenario: no
// balance out of range (the CHECK constraints should make that impossible;
// the bench does not take that on trust) and the admin reconciliation query,
// which compares balances with the ledger, holds and codes, returns nothing.
// It returns "" when both hold, else what failed.
func (b *bench) checkInvariants(ctx context.Context) (string, error) {
	var bad int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM balances
		WHERE reserved < 0 OR reserved > on_hand OR on_hand < 0`).Scan(&bad); err != nil {
		return "", fmt.Errorf("balance check: %w", err)
	}
	var out struct {
		Reconciliation []struct{ Kind, SKU, Location, Detail string }
	}
	if err := b.gql.do(ctx, b.adminKey, `{ reconciliation { kind sku location detail } }`, nil, &out); err != nil {
		return "", fmt.Errorf("reconciliation query: %w", err)
	}
	var problems []string
	if bad > 0 {
		problems = append(problems, fmt.Sprintf("%d balances out of range", bad))
	}
	if n := len(out.Reconciliation); n > 0 {
		i := out.Reconciliation[0]
		problems = append(problems, fmt.Sprintf("%d reconciliation issues, e.g. %s %s@%s: %s", n, i.Kind, i.SKU, i.Location, i.Detail))
	}
	return strings.Join(problems, "; "), nil
}
