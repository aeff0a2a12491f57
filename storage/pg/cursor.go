package pg

import (
	"bytes"
	"fmt"
)

// cursor walks a bucket in pages read in one direction at a time. The bucket's pending
// writes are sent with each page's query (in its round trip, before it), and a row of a page read earlier is shown as
// this transaction last wrote it (deleted rows skipped), so a cursor sees the
// transaction's own deletes and updates; a key inserted into a page's range after that
// page was read is not seen (bbolt leaves mutation under an open cursor undefined too,
// except the cursor's own Delete, which is exact here).
type cursor struct {
	b *bucket

	rows    []row
	pos     int  // index in rows of the current row
	forward bool // rows ascend (else descend)
	more    bool // the page was full: more rows may follow in its direction
	size    int  // next page's size
}

type row struct{ k, v []byte }

const (
	firstPage = 16
	maxPage   = 512
)

// load reads a page: from (exclusive unless incl) in the direction given; from nil is
// the bucket's first or last key.
func (c *cursor) load(from []byte, incl, forward bool) {
	c.rows, c.pos, c.forward, c.more = c.rows[:0], 0, forward, false
	t := c.b.t
	if t.err != nil {
		return
	}
	if c.size == 0 {
		c.size = firstPage
	}
	var q string
	switch {
	case forward && from == nil:
		q = `SELECT k, v FROM duraton_kv WHERE bucket = $1 ORDER BY k LIMIT $2`
	case !forward && from == nil:
		q = `SELECT k, v FROM duraton_kv WHERE bucket = $1 ORDER BY k DESC LIMIT $2`
	case forward && incl:
		q = `SELECT k, v FROM duraton_kv WHERE bucket = $1 AND k >= $3 ORDER BY k LIMIT $2`
	case forward:
		q = `SELECT k, v FROM duraton_kv WHERE bucket = $1 AND k > $3 ORDER BY k LIMIT $2`
	case incl:
		q = `SELECT k, v FROM duraton_kv WHERE bucket = $1 AND k <= $3 ORDER BY k DESC LIMIT $2`
	default:
		q = `SELECT k, v FROM duraton_kv WHERE bucket = $1 AND k < $3 ORDER BY k DESC LIMIT $2`
	}
	t.pin()
	defer t.unpin()
	args := []any{c.b.id, c.size}
	if from != nil {
		args = append(args, from)
	}
	rows, err := t.ptx.QueryAfter(t.pending(c.b.id), q, args...)
	if err != nil {
		t.fail(fmt.Errorf("pg: scan: %w", err))
		return
	}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.k, &r.v); err != nil {
			rows.Close()
			t.fail(fmt.Errorf("pg: scan: %w", err))
			return
		}
		c.rows = append(c.rows, r)
	}
	if err := rows.Err(); err != nil {
		t.fail(fmt.Errorf("pg: scan: %w", err))
		c.rows = c.rows[:0]
		return
	}
	c.more = len(c.rows) == c.size
	if c.size < maxPage {
		c.size *= 2
	}
}

// settle returns the current row, stepping over rows this transaction deleted after
// the page was read, loading further pages as needed.
func (c *cursor) settle() ([]byte, []byte) {
	for {
		if c.pos >= len(c.rows) {
			if !c.more || len(c.rows) == 0 {
				c.rows, c.pos, c.more = c.rows[:0], 0, false
				return nil, nil
			}
			last := c.rows[len(c.rows)-1].k
			c.load(last, false, c.forward)
			continue
		}
		r := c.rows[c.pos]
		if st, ok := c.b.t.states(c.b.id).m[string(r.k)]; ok {
			if !st.present {
				c.pos++
				continue
			}
			return r.k, st.v
		}
		return r.k, r.v
	}
}

func (c *cursor) First() ([]byte, []byte) { c.load(nil, true, true); return c.settle() }

func (c *cursor) Last() ([]byte, []byte) { c.load(nil, true, false); return c.settle() }

func (c *cursor) Seek(seek []byte) ([]byte, []byte) {
	c.load(bytes.Clone(seek), true, true)
	return c.settle()
}

// current is the key under the cursor, nil when it is off either end.
func (c *cursor) current() []byte {
	if c.pos < len(c.rows) {
		return c.rows[c.pos].k
	}
	return nil
}

func (c *cursor) Next() ([]byte, []byte) { return c.step(true) }

func (c *cursor) Prev() ([]byte, []byte) { return c.step(false) }

func (c *cursor) step(forward bool) ([]byte, []byte) {
	cur := c.current()
	if cur == nil {
		return nil, nil
	}
	if c.forward == forward {
		c.pos++
		return c.settle()
	}
	c.size = firstPage
	c.load(cur, false, forward)
	return c.settle()
}

func (c *cursor) Delete() error {
	cur := c.current()
	if cur == nil {
		return fmt.Errorf("pg: cursor delete: no current key")
	}
	return c.b.Delete(cur)
}
