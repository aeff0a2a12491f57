package server

import (
	"container/list"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/duraton/duraton/server/internal/authlimit"
)

// hookLimiter rate-limits the public webhook route per client address: a token bucket of
// burst tokens refilled at rate per second. IPv6 clients are counted by /64 (one host
// usually owns a whole /64). Memory is bounded: at most maxClients buckets, the least
// recently seen is evicted first, so flooding it with addresses costs each of them a
// fresh bucket, not everybody else's.
type hookLimiter struct {
	rate       float64
	burst      float64
	maxClients int
	now        func() time.Time

	mu      sync.Mutex
	clients map[netip.Prefix]*list.Element // of *hookBucket, by authlimit.ClientKey
	lru     list.List                      // front: most recently seen
}

type hookBucket struct {
	key    netip.Prefix
	tokens float64
	at     time.Time
}

func newHookLimiter(rate float64, burst, maxClients int, now func() time.Time) *hookLimiter {
	return &hookLimiter{rate: rate, burst: float64(burst), maxClients: maxClients, now: now, clients: map[netip.Prefix]*list.Element{}}
}

// allow takes one token of addr's bucket. When none is left it reports how long until
// the next one.
func (l *hookLimiter) allow(addr string) (bool, time.Duration) {
	key := authlimit.ClientKey(addr)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var b *hookBucket
	if el, ok := l.clients[key]; ok {
		l.lru.MoveToFront(el)
		b = el.Value.(*hookBucket)
		b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
		b.at = now
	} else {
		if l.lru.Len() >= l.maxClients {
			oldest := l.lru.Back()
			l.lru.Remove(oldest)
			delete(l.clients, oldest.Value.(*hookBucket).key)
		}
		b = &hookBucket{key: key, tokens: l.burst, at: now}
		l.clients[key] = l.lru.PushFront(b)
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}
