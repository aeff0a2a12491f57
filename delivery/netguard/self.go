package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
)

// SelfAddrs are the addresses the server itself listens on. A delivery to one of them
// would call Duraton's own API (a loop through /v2/publish), so Policy refuses them even
// where Allow would let the range through. A listener on the unspecified address (":8080")
// makes every local address with its port the server's own. Safe for concurrent use; the
// zero value holds nothing.
type SelfAddrs struct {
	mu    sync.RWMutex
	exact map[netip.AddrPort]bool
	any   map[uint16]bool // ports listened on at every local address
	// local lists the host's interface addresses (net.InterfaceAddrs; replaced in tests).
	local func() ([]net.Addr, error)
}

// Add records a listening address ("host:port", as net.Listener.Addr().String()).
func (s *SelfAddrs) Add(hostport string) error {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return fmt.Errorf("netguard: listening address %q: %w", hostport, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exact == nil {
		s.exact, s.any = map[netip.AddrPort]bool{}, map[uint16]bool{}
	}
	a := ap.Addr().Unmap().WithZone("")
	if a.IsUnspecified() {
		s.any[ap.Port()] = true
	} else {
		s.exact[netip.AddrPortFrom(a, ap.Port())] = true
	}
	return nil
}

// Contains reports whether a dial to ap reaches this server.
func (s *SelfAddrs) Contains(ap netip.AddrPort) bool {
	if s == nil {
		return false
	}
	a := ap.Addr().Unmap().WithZone("")
	s.mu.RLock()
	exact, any := s.exact[netip.AddrPortFrom(a, ap.Port())], s.any[ap.Port()]
	local := s.local
	s.mu.RUnlock()
	if exact {
		return true
	}
	if !any {
		return false
	}
	if a.IsLoopback() || a.IsUnspecified() {
		return true
	}
	if local == nil {
		local = net.InterfaceAddrs
	}
	addrs, err := local()
	if err != nil {
		return true // fail closed: the port is ours on some address we cannot list
	}
	for _, ia := range addrs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil && p.Addr().Unmap().WithZone("") == a {
			return true
		}
	}
	return false
}

// checkSelf refuses a dial to the server's own listening address.
func (p Policy) checkSelf(a netip.Addr, port uint16) error {
	if !p.Self.Contains(netip.AddrPortFrom(a, port)) {
		return nil
	}
	plain := a.Unmap().WithZone("")
	return &BlockedError{Addr: a, Range: netip.PrefixFrom(plain, plain.BitLen()), What: "this server's own listening address (port " + strconv.Itoa(int(port)) + ")"}
}
