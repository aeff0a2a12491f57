package sdk

import (
	"container/heap"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ErrReplayed is the error of a delivery whose signature (its jti) was already accepted.
var ErrReplayed = errors.New("sdk: signature replayed: its jti was already accepted")

// DefaultReplayCacheSize is the size of a ReplayCache made with size 0.
const DefaultReplayCacheSize = 100_000

// ReplayCache remembers the jti of every accepted signature until the token expires, so
// a captured delivery cannot be replayed while it would still verify. Duraton signs each
// attempt afresh (a new jti), so retries are not affected. It is in memory: replicas of
// an endpoint do not share it, and a restart forgets it. When it holds size tokens the
// one expiring first is dropped (a replay of that one, in its remaining lifetime, is the
// price of bounded memory). Safe for concurrent use.
type ReplayCache struct {
	size int
	mu   sync.Mutex
	seen map[string]int64 // jti → exp (unix seconds)
	exps expHeap
}

// NewReplayCache returns a cache of at most size tokens (0: DefaultReplayCacheSize).
func NewReplayCache(size int) *ReplayCache {
	if size <= 0 {
		size = DefaultReplayCacheSize
	}
	return &ReplayCache{size: size, seen: map[string]int64{}}
}

// accept records jti until exp and reports whether it was new. now prunes what expired.
func (c *ReplayCache) accept(jti string, exp int64, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.exps) > 0 && c.exps[0].exp < now.Unix() {
		delete(c.seen, heap.Pop(&c.exps).(expEntry).jti)
	}
	if _, dup := c.seen[jti]; dup {
		return false
	}
	for len(c.exps) >= c.size {
		delete(c.seen, heap.Pop(&c.exps).(expEntry).jti)
	}
	c.seen[jti] = exp
	heap.Push(&c.exps, expEntry{jti: jti, exp: exp})
	return true
}

type expEntry struct {
	jti string
	exp int64
}

type expHeap []expEntry

func (h expHeap) Len() int           { return len(h) }
func (h expHeap) Less(i, j int) bool { return h[i].exp < h[j].exp }
func (h expHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expHeap) Push(x any)        { *h = append(*h, x.(expEntry)) }
func (h *expHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// sameURL compares the URL a token was signed for with the URL a request arrived at,
// after normalising what HTTP lets differ: scheme and host case, default ports, percent
// encoding of the path, and the order of query parameters.
func sameURL(a, b string) bool {
	if a == b { // the usual case: one parse instead of two and no query re-encoding
		_, err := url.Parse(a)
		return err == nil
	}
	return equivalentURLs(a, b)
}

// equivalentURLs is sameURL's comparison of two parsed URLs.
func equivalentURLs(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return normalHost(ua) == normalHost(ub) && strings.EqualFold(ua.Scheme, ub.Scheme) &&
		orSlash(ua.Path) == orSlash(ub.Path) && ua.Query().Encode() == ub.Query().Encode()
}

func normalHost(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (port == "80" && strings.EqualFold(u.Scheme, "http")) || (port == "443" && strings.EqualFold(u.Scheme, "https")) {
		port = ""
	}
	if port == "" {
		return host
	}
	return host + ":" + port
}

func orSlash(p string) string {
	if p == "" {
		return "/"
	}
	return p
}
