package server

import (
	"container/list"
	"net/netip"
	"sync"
	"time"
)

// failedAuthLimiter slows down token guessing: each client may fail authentication at
// most `burst` times per `window`; beyond that its failing requests get 429 until the
// window passes. It only ever refuses requests whose token is invalid: a valid token
// is accepted whatever others did from the same address (a NAT or proxy shares one).
//
// A client is an IPv4 address or an IPv6 /64 (one host usually owns a whole /64, so
// counting single IPv6 addresses would give it 2^64 fresh budgets). Memory is bounded
// by an LRU of maxClients entries: a flood of new addresses evicts the clients seen
// least recently, never an attacker who keeps trying (each attempt refreshes it).
type failedAuthLimiter struct {
	burst      int
	window     time.Duration
	maxClients int
	now        func() time.Time

	mu      sync.Mutex
	clients map[netip.Prefix]*list.Element // of *failures
	lru     list.List                      // front: most recently seen
}

type failures struct {
	key   netip.Prefix
	since time.Time
	count int
}

func newFailedAuthLimiter(burst int, window time.Duration, now func() time.Time) *failedAuthLimiter {
	return &failedAuthLimiter{burst: burst, window: window, maxClients: 10_000, now: now, clients: map[netip.Prefix]*list.Element{}}
}

// clientKey is the unit failures are counted by. An address that does not parse (echo
// gives the raw RemoteAddr host) is counted as the zero prefix: all such share one budget.
func clientKey(addr string) netip.Prefix {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// blocked reports whether addr used up its failures, and for how long it stays blocked.
// A blocked client's entry counts as recently seen.
func (l *failedAuthLimiter) blocked(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el := l.clients[clientKey(addr)]
	if el == nil {
		return false, 0
	}
	f := el.Value.(*failures)
	left := f.since.Add(l.window).Sub(l.now())
	if left <= 0 {
		l.lru.Remove(el)
		delete(l.clients, f.key)
		return false, 0
	}
	l.lru.MoveToFront(el)
	return f.count >= l.burst, left
}

// fail counts one failed authentication of addr.
func (l *failedAuthLimiter) fail(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, key := l.now(), clientKey(addr)
	el := l.clients[key]
	if el == nil {
		if len(l.clients) >= l.maxClients {
			oldest := l.lru.Back()
			l.lru.Remove(oldest)
			delete(l.clients, oldest.Value.(*failures).key)
		}
		el = l.lru.PushFront(&failures{key: key, since: now})
		l.clients[key] = el
	}
	l.lru.MoveToFront(el)
	f := el.Value.(*failures)
	if now.Sub(f.since) >= l.window {
		f.since, f.count = now, 0
	}
	f.count++
}

func (l *failedAuthLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
