package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
)

// Policy decides which destination addresses may be dialed. The zero value blocks
// every non-public address (see blockedRanges) and allows the rest.
type Policy struct {
	// Allow lists ranges that may be dialed even though they are blocked, e.g.
	// LoopbackPrefixes() in development or a private network the operator trusts.
	// Write IPv4 ranges in IPv4 form (10.0.0.0/8); IPv4-mapped addresses are unmapped
	// before matching. Default: empty.
	Allow []netip.Prefix
	// Self holds the server's own listening addresses, refused whatever Allow says.
	// Default nil: none known.
	Self *SelfAddrs
}

// BlockedError reports a destination address the policy refuses.
type BlockedError struct {
	Addr  netip.Addr   // the address as checked, before unmapping
	Range netip.Prefix // the blocked range it falls in
	What  string       // e.g. "a loopback address"
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("destination %s is %s (%s)", e.Addr, e.What, e.Range)
}

// CheckAddr returns nil if a may be dialed and a *BlockedError if not. An IPv4-mapped
// IPv6 address is judged as the IPv4 address it maps, and an IPv6 zone is ignored.
func (p Policy) CheckAddr(a netip.Addr) error {
	if !a.IsValid() {
		return errors.New("destination address is invalid")
	}
	plain := a.Unmap().WithZone("")
	for _, allowed := range p.Allow {
		if allowed.Contains(plain) {
			return nil
		}
	}
	for _, b := range blocked {
		if b.prefix.Contains(plain) {
			return &BlockedError{Addr: a, Range: b.prefix, What: b.what}
		}
	}
	return nil
}

// Control is a net.Dialer.Control function: it runs after DNS resolution, before every
// connect, and refuses addresses CheckAddr refuses. address is "ip:port"; anything else
// is refused too, so the check fails closed.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("netguard: %s dial address %q: %w", network, address, err)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("netguard: %s dial address %q is not an IP address", network, address)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return fmt.Errorf("netguard: %s dial address %q has no valid port", network, address)
	}
	if err := p.checkSelf(a, uint16(port)); err != nil {
		return err
	}
	return p.CheckAddr(a)
}
