package server

import (
	"sync"
	"time"
)

// failedAuthLimiter slows down token guessing: each client address may fail
// authentication at most `burst` times per `window`; beyond that it gets 429 until the
// window passes. Memory is bounded: when more than maxClients addresses are tracked the
// table starts afresh (an attacker rotating addresses gains a fresh window, no more).
type failedAuthLimiter struct {
	burst      int
	window     time.Duration
	maxClients int
	now        func() time.Time

	mu      sync.Mutex
	clients map[string]*failures
}

type failures struct {
	since time.Time
	count int
}

func newFailedAuthLimiter(burst int, window time.Duration, now func() time.Time) *failedAuthLimiter {
	return &failedAuthLimiter{burst: burst, window: window, maxClients: 10_000, now: now, clients: map[string]*failures{}}
}

// blocked reports whether addr used up its failures, and for how long it stays blocked.
func (l *failedAuthLimiter) blocked(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.clients[addr]
	if f == nil {
		return false, 0
	}
	left := f.since.Add(l.window).Sub(l.now())
	if left <= 0 {
		delete(l.clients, addr)
		return false, 0
	}
	return f.count >= l.burst, left
}

// fail counts one failed authentication of addr.
func (l *failedAuthLimiter) fail(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.clients[addr]
	if f == nil || now.Sub(f.since) >= l.window {
		if len(l.clients) >= l.maxClients {
			l.clients = map[string]*failures{}
		}
		f = &failures{since: now}
		l.clients[addr] = f
	}
	f.count++
}
