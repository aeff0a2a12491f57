// Package authlimit throttles token guessing per client address, for the API's bearer
// tokens and the console's login alike: one rule, so neither is a faster oracle than
// the other.
package authlimit

import (
	"container/list"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Limiter throttles token guessing per client: once a client has failed
// authentication `burst` times in a `window`, its requests are refused with 429 until
// the window passes, before their token is looked up. So a blocked client learns
// nothing about the tokens it tries (a valid one it never used is refused like a wrong
// one), and costs no store lookup: guessing is held to `burst` tries per window.
//
// A token the client authenticated with before (within goodFor) is still accepted
// while it is blocked: others behind the same address (a NAT, a proxy) who fail do not
// lock out a caller already working with a valid token. Only a valid token new to that
// address waits for the window.
//
// A client is an IPv4 address or an IPv6 /64 (one host usually owns a whole /64, so
// counting single IPv6 addresses would give it 2^64 fresh budgets). Memory is bounded
// by an LRU of maxClients entries, each remembering at most maxGoodTokens tokens: a
// flood of new addresses evicts the clients seen least recently, never an attacker who
// keeps trying (each attempt refreshes it).
type Limiter struct {
	burst      int
	window     time.Duration
	goodFor    time.Duration
	maxClients int
	now        func() time.Time

	mu      sync.Mutex
	clients map[netip.Prefix]*list.Element // of *client
	lru     list.List                      // front: most recently seen
}

type client struct {
	key   netip.Prefix
	since time.Time // start of the failure window
	count int       // failures since `since`
	good  []goodToken
}

// goodToken is the hash of a token the client authenticated with, and when it last did.
type goodToken struct {
	hash string
	at   time.Time
}

// maxGoodTokens bounds the tokens remembered per client (a NAT rarely hides more
// distinct working tokens; beyond, the least recently used is forgotten).
const maxGoodTokens = 8

// New is a limiter allowing burst failures per window to each client, remembering a
// client's good tokens for an hour, tracking the 10,000 clients seen most recently. now
// is the clock.
func New(burst int, window time.Duration, now func() time.Time) *Limiter {
	return &Limiter{burst: burst, window: window, goodFor: time.Hour, maxClients: 10_000, now: now,
		clients: map[netip.Prefix]*list.Element{}}
}

// ClientKey is the unit a client is counted by: an IPv4 address or an IPv6 /64. An
// address that does not parse (echo gives the raw RemoteAddr host) is the zero prefix:
// all such share one budget.
func ClientKey(addr string) netip.Prefix {
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

// Blocked reports whether a request of addr with the token of hash tokenHash ("": none)
// must be refused without looking the token up, and for how long addr stays blocked.
// A blocked client's entry counts as recently seen.
func (l *Limiter) Blocked(addr, tokenHash string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el := l.clients[ClientKey(addr)]
	if el == nil {
		return false, 0
	}
	l.lru.MoveToFront(el)
	c := el.Value.(*client)
	now := l.now()
	left := c.since.Add(l.window).Sub(now)
	if left <= 0 {
		c.count = 0
		return false, 0
	}
	if c.count < l.burst {
		return false, 0
	}
	if tokenHash != "" && slices.ContainsFunc(c.good, func(g goodToken) bool { return g.hash == tokenHash && now.Sub(g.at) < l.goodFor }) {
		return false, 0
	}
	return true, left
}

// Fail counts one failed authentication of addr.
func (l *Limiter) Fail(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	c := l.entry(addr, now)
	if now.Sub(c.since) >= l.window {
		c.since, c.count = now, 0
	}
	c.count++
}

// Succeeded remembers that addr authenticated with the token of hash tokenHash.
func (l *Limiter) Succeeded(addr, tokenHash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	c := l.entry(addr, now)
	if i := slices.IndexFunc(c.good, func(g goodToken) bool { return g.hash == tokenHash }); i >= 0 {
		c.good[i].at = now
		return
	}
	if len(c.good) >= maxGoodTokens {
		oldest := 0
		for i, g := range c.good {
			if g.at.Before(c.good[oldest].at) {
				oldest = i
			}
		}
		c.good = slices.Delete(c.good, oldest, oldest+1)
	}
	c.good = append(c.good, goodToken{hash: tokenHash, at: now})
}

// entry is addr's record, made (evicting the least recently seen when full) if absent,
// and moved to the front. The caller holds mu.
func (l *Limiter) entry(addr string, now time.Time) *client {
	key := ClientKey(addr)
	el := l.clients[key]
	if el == nil {
		if len(l.clients) >= l.maxClients {
			oldest := l.lru.Back()
			l.lru.Remove(oldest)
			delete(l.clients, oldest.Value.(*client).key)
		}
		el = l.lru.PushFront(&client{key: key, since: now})
		l.clients[key] = el
	}
	l.lru.MoveToFront(el)
	return el.Value.(*client)
}

// Len is the number of clients tracked.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
