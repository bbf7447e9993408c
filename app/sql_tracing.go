package app

import (
	"context"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/tracing"
)

// budgetedSQL is otelpgx's tracer within each GraphQL operation's SQL span
// budget (tracing.SpendSQLSpan): a statement past it runs untraced. Its
// end must then not reach otelpgx either, which would end whatever span the
// context holds (the resolver's), so a start that was skipped marks the
// context it returns, and the matching end sees the mark.
type budgetedSQL struct{ t *otelpgx.Tracer }

var (
	_ pgx.QueryTracer       = budgetedSQL{}
	_ pgx.BatchTracer       = budgetedSQL{}
	_ pgx.CopyFromTracer    = budgetedSQL{}
	_ pgx.PrepareTracer     = budgetedSQL{}
	_ pgx.ConnectTracer     = budgetedSQL{}
	_ pgxpool.AcquireTracer = budgetedSQL{}
)

type untracedKey struct{}

// skip spends ctx's budget; false with ctx marked when it is spent.
func skip(ctx context.Context) (context.Context, bool) {
	if tracing.SpendSQLSpan(ctx) {
		return ctx, false
	}
	return context.WithValue(ctx, untracedKey{}, true), true
}

func untraced(ctx context.Context) bool { return ctx.Value(untracedKey{}) != nil }

func (b budgetedSQL) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if ctx, s := skip(ctx); s {
		return ctx
	}
	return b.t.TraceQueryStart(ctx, c, d)
}

func (b budgetedSQL) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	if !untraced(ctx) {
		b.t.TraceQueryEnd(ctx, c, d)
	}
}

func (b budgetedSQL) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if ctx, s := skip(ctx); s {
		return ctx
	}
	return b.t.TraceBatchStart(ctx, c, d)
}

func (b budgetedSQL) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if untraced(ctx) || !tracing.SpendSQLSpan(ctx) {
		return
	}
	b.t.TraceBatchQuery(ctx, c, d)
}

func (b budgetedSQL) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	if !untraced(ctx) {
		b.t.TraceBatchEnd(ctx, c, d)
	}
}

func (b budgetedSQL) TraceCopyFromStart(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	if ctx, s := skip(ctx); s {
		return ctx
	}
	return b.t.TraceCopyFromStart(ctx, c, d)
}

func (b budgetedSQL) TraceCopyFromEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromEndData) {
	if !untraced(ctx) {
		b.t.TraceCopyFromEnd(ctx, c, d)
	}
}

func (b budgetedSQL) TracePrepareStart(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if ctx, s := skip(ctx); s {
		return ctx
	}
	return b.t.TracePrepareStart(ctx, c, d)
}

func (b budgetedSQL) TracePrepareEnd(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareEndData) {
	if !untraced(ctx) {
		b.t.TracePrepareEnd(ctx, c, d)
	}
}

func (b budgetedSQL) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	if ctx, s := skip(ctx); s {
		return ctx
	}
	return b.t.TraceConnectStart(ctx, d)
}

func (b budgetedSQL) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if !untraced(ctx) {
		b.t.TraceConnectEnd(ctx, d)
	}
}

func (b budgetedSQL) TraceAcquireStart(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireStartData) context.Context {
	if ctx, s := skip(ctx); s {
		return ctx
	}
	return b.t.TraceAcquireStart(ctx, p, d)
}

func (b budgetedSQL) TraceAcquireEnd(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if !untraced(ctx) {
		b.t.TraceAcquireEnd(ctx, p, d)
	}
}
