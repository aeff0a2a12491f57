package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// session is a transaction's connection. Its BEGIN is not sent on its own: it goes in
// one round trip with the transaction's first statement (a pipelined batch), and a
// transaction that sends no statement sends no BEGIN and no end. A View costs its
// reads and a ROLLBACK (a leader's View that reads once from the database, its read
// alone: view.go); a write, its reads, one batch of writes and a COMMIT.
type session struct {
	ctx   context.Context
	conn  *pgxpool.Conn
	begin string // the BEGIN statement, "" once sent
	// alone: the next statement is sent without the pending BEGIN, outside a
	// transaction (a leader's View, which holds the commit gate meanwhile: view.go).
	alone bool
}

const (
	beginRead  = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	beginWrite = "BEGIN ISOLATION LEVEL READ COMMITTED"
)

func (e *Engine) session(ctx context.Context, write bool) (*session, error) {
	c, err := e.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pg: connect: %w", err)
	}
	s := &session{ctx: ctx, conn: c, begin: beginRead}
	if write {
		s.begin = beginWrite
	}
	return s, nil
}

// withBegin prepends the pending BEGIN to b.
func (s *session) withBegin(b *pgx.Batch) *pgx.Batch {
	if s.begin == "" {
		return b
	}
	nb := &pgx.Batch{}
	nb.Queue(s.begin)
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	s.begin = ""
	return nb
}

// Query runs a query in the transaction.
func (s *session) Query(sql string, args ...any) (pgx.Rows, error) {
	return s.QueryAfter(nil, sql, args...)
}

// QueryAfter runs the statements of pre (writes: nil for none), then a query, in one
// round trip.
func (s *session) QueryAfter(pre *pgx.Batch, sql string, args ...any) (pgx.Rows, error) {
	if s.alone && (pre == nil || pre.Len() == 0) {
		s.alone = false
		return s.conn.Query(s.ctx, sql, args...)
	}
	if s.begin == "" && (pre == nil || pre.Len() == 0) {
		return s.conn.Query(s.ctx, sql, args...)
	}
	b := pre
	if b == nil {
		b = &pgx.Batch{}
	}
	b.Queue(sql, args...)
	b = s.withBegin(b)
	br := s.conn.SendBatch(s.ctx, b)
	for range b.Len() - 1 {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs a one-row query in the transaction.
func (s *session) QueryRow(sql string, args ...any) pgx.Row {
	if s.begin == "" && !s.alone {
		return s.conn.QueryRow(s.ctx, sql, args...)
	}
	rows, err := s.Query(sql, args...)
	if err != nil {
		return errRow{err}
	}
	return rowOf{rows}
}

// SendBatch runs a batch in the transaction and reads its results.
func (s *session) SendBatch(b *pgx.Batch) error {
	return s.conn.SendBatch(s.ctx, s.withBegin(b)).Close()
}

// end commits or rolls back (when anything was sent) and gives the connection back. A
// connection whose transaction could not be ended is closed, not reused.
func (s *session) end(commit bool) error {
	defer s.conn.Release() // the pool drops a connection left in a transaction
	if s.begin != "" {
		return nil // nothing was sent
	}
	stmt := "ROLLBACK"
	if commit {
		stmt = "COMMIT"
	}
	if _, err := s.conn.Exec(s.ctx, stmt); err != nil {
		return fmt.Errorf("pg: %s: %w", stmt, err)
	}
	return nil
}

// batchRows are a batch's query rows; closing them closes the batch.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close() // the batch too: the connection is free for the next statement
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// rowOf is QueryRow's one row over rows: Scan reads the first row and closes them.
type rowOf struct{ rows pgx.Rows }

func (r rowOf) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		r.rows.Close()
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
