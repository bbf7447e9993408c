package tracing

import (
	"context"
	"sync/atomic"
)

// MaxSQLSpans bounds the SQL spans one GraphQL operation makes. Root-field
// spans are capped per operation, but each of a thousand aliases of
// sku(code:) still runs its own statements: four spans each (acquire,
// BEGIN, SELECT, COMMIT), 3,500 spans and a megabyte of export from one
// 25 KB anonymous request. Past the budget, statements run untraced and the
// operation's span says how many.
const MaxSQLSpans = 64

// SQLBudget is what is left of an operation's SQL spans.
type SQLBudget struct {
	left    atomic.Int32
	dropped atomic.Int32
}

type sqlBudgetKey struct{}

// WithSQLBudget gives ctx's work a budget of MaxSQLSpans SQL spans.
func WithSQLBudget(ctx context.Context) (context.Context, *SQLBudget) {
	b := &SQLBudget{}
	b.left.Store(MaxSQLSpans)
	return context.WithValue(ctx, sqlBudgetKey{}, b), b
}

// SpendSQLSpan says whether a statement run on ctx may have a span, and
// spends one if so; work without a budget (jobs, batches) always may.
func SpendSQLSpan(ctx context.Context) bool {
	b, ok := ctx.Value(sqlBudgetKey{}).(*SQLBudget)
	if !ok {
		return true
	}
	if b.left.Add(-1) >= 0 {
		return true
	}
	b.dropped.Add(1)
	return false
}

// Dropped is how many statements ran without a span.
func (b *SQLBudget) Dropped() int { return int(b.dropped.Load()) }
