package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// conn is one keep-alive connection, used by one request at a time.
type conn struct {
	nc        net.Conn
	r         *limitReader // between nc and br: caps the answer's headers
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
	// keepFor is how long the server lets it idle (its Keep-Alive: timeout=N, less a
	// margin); 0: no limit announced, the Transport's IdleTimeout applies.
	keepFor time.Duration
	// stop unregisters the request's cancellation; false when it already ran (the
	// connection's deadline was moved to the past).
	stop func() bool
	peek *peeker // alive's, made at its first peek (alive_unix.go)
}

func newConn(nc net.Conn) *conn {
	r := &limitReader{r: nc, n: -1}
	return &conn{nc: nc, r: r, br: bufio.NewReaderSize(r, 4<<10), bw: bufio.NewWriterSize(nc, 4<<10)}
}

func (c *conn) close() { _ = c.nc.Close() }

// maxInformational is how many 1xx answers one request may get before its real one.
const maxInformational = 5

// errorCtx returns ctx's error if ctx is done, else err: a deadline or a cancellation
// reads as such, not as the I/O error it caused.
func errorCtx(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("h1: %w", ctxErr)
	}
	// The socket's deadline is the context's, and its timer may fire before the context's.
	if _, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("h1: %w: %w", context.DeadlineExceeded, err)
	}
	return err
}

// roundTrip writes req and reads the head of its answer. The deadline of req's context
// bounds both; its cancellation moves the deadline to the past.
func (c *conn) roundTrip(req *http.Request, maxHeaderBytes int64) (*http.Response, error) {
	ctx := req.Context()
	deadline, _ := ctx.Deadline() // zero: none (a deadline left by an earlier request is cleared)
	if err := c.nc.SetDeadline(deadline); err != nil {
		closeBody(req)
		return nil, err
	}
	c.stop = func() bool { return true }
	if ctx.Done() != nil {
		c.stop = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) }) // the past: I/O stops
	}
	resp, err := c.exchange(req, maxHeaderBytes)
	if err != nil {
		c.stop()
		return nil, errorCtx(ctx, err)
	}
	return resp, nil
}

func (c *conn) exchange(req *http.Request, maxHeaderBytes int64) (*http.Response, error) {
	if err := writeRequest(c.bw, req); err != nil { // closes req.Body
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return nil, err
	}
	c.r.n = maxHeaderBytes
	defer func() { c.r.n = -1 }()
	for informational := 0; ; informational++ {
		resp, err := http.ReadResponse(c.br, req)
		if errors.Is(err, errHeadersTooLong) {
			return nil, fmt.Errorf("h1: the answer's headers exceed %d bytes", maxHeaderBytes)
		}
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode < 100 || resp.StatusCode > 199:
			return resp, nil
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("h1: unexpected 101 Switching Protocols")
		case informational == maxInformational:
			return nil, fmt.Errorf("h1: more than %d informational (1xx) answers", maxInformational)
		}
	}
}

var errHeadersTooLong = errors.New("headers too long")

// limitReader fails once n bytes were read; n < 0: no limit.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, errHeadersTooLong
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// body is an answer's body. Closing it returns the connection to the pool if the body
// was read to its end, nothing is left over, and nobody asked to close; else it closes
// the connection (an unread rest is not drained: it may be large).
type body struct {
	header http.Header     // the answer's: its Keep-Alive says how long the server keeps it
	ctx    context.Context // the request's: a failed read names its deadline or cancellation
	rc     io.ReadCloser   // from http.ReadResponse
	c      *conn
	t      *Transport
	addr   string
	length int64 // Content-Length; -1: unknown
	read   int64
	keep   bool // neither side asked to close the connection
	done   bool // read to the end
	closed bool
}

var errBodyClosed = errors.New("h1: read on a closed body")

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errBodyClosed
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if err == io.EOF {
		b.done = true
	} else if err != nil {
		err = errorCtx(b.ctx, err)
	}
	return n, err
}

func (b *body) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	live := b.c.stop() // false: cancelled, the deadline is in the past
	// A body of known length read to its last byte is complete without another read.
	complete := b.done || (b.length >= 0 && b.read == b.length)
	keepFor, keep := serverKeepAlive(b.header)
	if !b.keep || !keep || !live || !complete || b.c.br.Buffered() > 0 {
		b.c.close()
		return nil
	}
	if err := b.rc.Close(); err != nil { // nothing left to drain: returns at once
		b.c.close()
		return nil
	}
	// Clear the request's deadline: once passed, it would fail alive()'s peek.
	if err := b.c.nc.SetDeadline(time.Time{}); err != nil {
		b.c.close()
		return nil
	}
	b.c.keepFor = keepFor
	b.t.put(b.addr, b.c)
	return nil
}

// keepAliveMargin is taken off a server's announced idle timeout: a request sent just
// as the server closes the connection fails (Node announces and closes after 5 s). It
// is what undici, Node's own client, takes off.
const keepAliveMargin = time.Second

// serverKeepAlive reads an answer's Keep-Alive: timeout=N (seconds). It returns how long
// the connection may idle (0: no timeout announced) and whether it may be kept at all (a
// timeout within the margin leaves no time to reuse it safely).
func serverKeepAlive(h http.Header) (time.Duration, bool) {
	v := h.Get("Keep-Alive")
	if v == "" {
		return 0, true
	}
	for _, param := range strings.Split(v, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(param), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "timeout") {
			continue
		}
		secs, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil || secs < 0 {
			return 0, true // unreadable: as if absent
		}
		keep := time.Duration(secs)*time.Second - keepAliveMargin
		return keep, keep > 0
	}
	return 0, true
}
