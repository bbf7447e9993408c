package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipelinedTx is a transaction whose BEGIN travels with its first statements
// and whose COMMIT can travel with its last (commitWith), instead of taking a
// round trip each. On the reserve batch's path that is two of five round
// trips: a lone reserve answers sooner, and a hot balance row locked by the
// batch is released sooner after its update.
//
// Pipelining changes nothing of what the transaction means. PostgreSQL runs
// a pipeline's statements in order and, after an error, skips the rest up to
// the pipeline's end: a COMMIT behind a failed statement is never run, and
// the transaction, left aborted, is rolled back (inPipelinedTx). It
// implements pgx.Tx so that code written against a transaction (River's
// insert) runs in it unchanged.
type pipelinedTx struct {
	conn      *pgx.Conn
	begun     bool // BEGIN has been sent
	committed bool // COMMIT has been sent and succeeded
}

var _ pgx.Tx = (*pipelinedTx)(nil)

// inPipelinedTx runs fn in one pipelinedTx and commits it unless fn did
// (commitWith); an error rolls it back. Deadlocks and serialization failures
// are retried as inTx retries them, so fn must be safe to repeat.
func (s *Store) inPipelinedTx(ctx context.Context, fn func(tx *pipelinedTx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.pipelinedTxOnce(ctx, fn)
		if err == nil || !retryable(err) || attempt >= s.maxAttempts {
			return err
		}
		if err := retryBackoff(ctx, attempt, err); err != nil {
			return err
		}
	}
}

func (s *Store) pipelinedTxOnce(ctx context.Context, fn func(tx *pipelinedTx) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// Release destroys a connection still in a transaction (a rollback
	// that failed), so none is lent again with this one's locks.
	defer c.Release()
	tx := &pipelinedTx{conn: c.Conn()}
	if err = fn(tx); err == nil && !tx.committed {
		err = tx.Commit(ctx)
	}
	if err != nil && tx.conn.PgConn().TxStatus() != 'I' {
		// Not on ctx: a batch whose every request gave up is cancelled,
		// and a ROLLBACK sent on a cancelled context fails and closes the
		// connection — a client resetting its connection right after each
		// reserve made the server reconnect once per few reserves.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		_ = tx.Rollback(rctx)
		cancel()
	}
	return err
}

// rollbackTimeout bounds the ROLLBACK of a failed pipelined transaction.
const rollbackTimeout = 5 * time.Second

// begin sends BEGIN if no statement has been sent yet (a statement sent on
// its own, not in a batch, pays this round trip).
func (t *pipelinedTx) begin(ctx context.Context) error {
	if t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	t.begun = true
	return nil
}

// SendBatch sends b, preceded by BEGIN when it is the transaction's first.
func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !t.begun {
		b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: "BEGIN"}}, b.QueuedQueries...)
		t.begun = true
	}
	return t.conn.SendBatch(ctx, b)
}

// commitWith sends b followed by COMMIT, in one round trip, and reads every
// result: an error in b leaves the COMMIT unrun and is returned (the caller
// then rolls back).
func (t *pipelinedTx) commitWith(ctx context.Context, b *pgx.Batch) error {
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		// An aborted transaction answers COMMIT with ROLLBACK, no error.
		if tag.String() != "COMMIT" {
			return pgx.ErrTxCommitRollback
		}
		t.committed = true
		return nil
	})
	return t.SendBatch(ctx, b).Close()
}

// Commit commits what was sent; with nothing sent there is nothing to do.
func (t *pipelinedTx) Commit(ctx context.Context) error {
	if !t.begun || t.committed {
		return nil
	}
	return t.commitWith(ctx, &pgx.Batch{})
}

// Rollback rolls back; a connection it cannot roll back is closed.
func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if !t.begun || t.committed {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = t.conn.Close(ctx)
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// Begin would start a nested transaction; nothing on the pipelined path
// needs one.
func (t *pipelinedTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("pipelinedTx: nested transactions are not supported")
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

// errRow is the row of a query that could not be sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *pipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *pipelinedTx) LargeObjects() pgx.LargeObjects {
	panic("pipelinedTx: large objects are not supported")
}

func (t *pipelinedTx) Conn() *pgx.Conn { return t.conn }
