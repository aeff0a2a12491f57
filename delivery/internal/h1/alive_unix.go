//go:build unix

package h1

import "syscall"

// alive reports whether an idle connection is still open and quiet: a non-blocking peek
// finds nothing to read. End of stream (the server closed it) or unsolicited bytes mean
// it cannot carry another request.
func (c *conn) alive() bool {
	if c.peek == nil {
		sc, ok := c.nc.(syscall.Conn)
		if !ok {
			return true
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		p := &peeker{raw: rc}
		p.fn = p.peekFD
		c.peek = p
	}
	return c.peek.quiet()
}

// peeker is a connection's peek, made once: the raw connection and the bound function
// it runs on the descriptor, so that a peek before each reuse allocates nothing.
type peeker struct {
	raw     syscall.RawConn
	fn      func(fd uintptr) bool
	isQuiet bool
	buf     [1]byte
}

func (p *peeker) quiet() bool {
	p.isQuiet = false
	err := p.raw.Read(p.fn)
	return err == nil && p.isQuiet
}

func (p *peeker) peekFD(fd uintptr) bool {
	_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	p.isQuiet = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	return true // never wait
}
