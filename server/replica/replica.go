// Package replica is the HTTP face of a replica on a shared database whose state is
// divided into shards: it serves a request itself when this replica leads the shard the
// request belongs to (Config.Shard, Config.Local), and forwards it to the replica that
// leads that shard otherwise; it answers /healthz, /readyz and /metrics itself. So every
// replica serves the whole API, and a client needs no idea which one leads what.
package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// SecretHeader carries the replicas' shared secret (Config.Secret) on a forwarded
// request: with it the leader trusts the client address this replica appends to
// X-Forwarded-For (server.Config.ForwardSecret).
const SecretHeader = "Duraton-Forward-Secret"

// ForwardedHeader marks a forwarded request; a replica that receives one and does not
// lead answers 503 instead of forwarding it again (no loops while leadership moves).
const ForwardedHeader = "Duraton-Forwarded-By"

// NotLeaderHeader marks that 503: the request was refused unread, so the follower that
// forwarded it may send it again (to a leader that is still starting its engine, or to
// the next one).
const NotLeaderHeader = "Duraton-Not-Leader"

// Config configures a Forwarder.
type Config struct {
	// Self is this replica's id (sent in ForwardedHeader).
	Self string
	// Secret is the replicas' shared secret (sent in SecretHeader). Default "": none
	// (the leader then counts every forwarded request against this replica's address).
	Secret string
	// Shard returns the shard a request belongs to. It is called with body nil first;
	// when it needs the body to tell (ErrNeedBody), again once the body is read. An
	// error it returns otherwise is answered 503. Default nil: every request is shard 0's.
	Shard func(r *http.Request, body []byte) (int, error)
	// Leader returns the base URL of the replica leading shard, "" when none leads now.
	Leader func(ctx context.Context, shard int) (string, error)
	// Local returns this replica's own API handler for shard while it leads it (nil
	// otherwise): a request that waited through a takeover this replica won is served
	// here.
	Local func(shard int) http.Handler
	// WaitForLeader is how long a request waits for a leader while none leads (a
	// takeover in progress) before it is answered 503. Default 15s.
	WaitForLeader time.Duration
	// CacheFor is how long a leader address is reused before it is read again; a failed
	// forward reads it again at once. Default 1s.
	CacheFor time.Duration
	// MaxBodyBytes caps a forwarded request's body on the routes that take the largest
	// (a batch, an app's definitions, a list of events); MaxMessageBytes on every other
	// route (the leader's --max-body-bytes). A declared length over it is refused (413)
	// before a byte is read. Defaults 16 MiB and 1 MiB.
	MaxBodyBytes    int64
	MaxMessageBytes int64
	// MaxWorkflowMessageBytes caps the body of a workflow message (the leader's
	// --max-workflow-body-bytes): a trigger, or a publish naming a run. Default
	// MaxMessageBytes.
	MaxWorkflowMessageBytes int64
	// BodyTimeout is how long a request's body may take to arrive (408 after). Default
	// 60s, the leader's read timeout.
	BodyTimeout time.Duration
	// MaxBufferedBytes caps the bytes of request bodies this replica holds at once
	// (read, or waiting to be forwarded); a request that would go over is refused with
	// 503. A quarter of it is for requests without a valid token (Authorized), the rest
	// for those with one, so callers without a token cannot take it all. Default 128 MiB.
	MaxBufferedBytes int64
	// Authorized reports whether r carries a valid API token; one that does not may
	// send a body of MaxMessageBytes at most on any route, from its quarter of
	// MaxBufferedBytes. Default nil: every request counts as authorized.
	Authorized func(r *http.Request) bool
	// Metrics serves this replica's own GET /metrics (nil: forwarded like any request),
	// so that a scrape of each replica reads that replica.
	Metrics http.Handler
	// OnForward, if set, is told how each request this replica forwarded ended:
	// ResultOK (the leader answered), ResultBadGateway or ResultNoLeader.
	OnForward func(result string)
	// Transport sends forwarded requests. Default: a clone of http.DefaultTransport.
	Transport http.RoundTripper
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.WaitForLeader <= 0 {
		c.WaitForLeader = 15 * time.Second
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 16 << 20
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 1 << 20
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = 60 * time.Second
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = 128 << 20
	}
	if c.CacheFor <= 0 {
		c.CacheFor = time.Second
	}
	if c.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		c.Transport = t
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Forwarder is a follower's handler.
type Forwarder struct {
	cfg      Config
	buffered *byteBudget // bytes of request bodies with a valid token held now
	anon     *byteBudget // and of those without one

	mu      sync.Mutex
	leaders map[int]cachedLeader // by shard
}

type cachedLeader struct {
	u      *url.URL
	readAt time.Time
}

// ErrNeedBody is what Config.Shard returns when it needs the request's body to tell.
var ErrNeedBody = errors.New("replica: the shard depends on the body")

// New makes a Forwarder. Leader is required.
func New(cfg Config) (*Forwarder, error) {
	if cfg.Leader == nil {
		return nil, errors.New("replica: Config.Leader is required")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxMessageBytes < 0 || cfg.MaxWorkflowMessageBytes < 0 || cfg.BodyTimeout < 0 || cfg.MaxBufferedBytes < 0 {
		return nil, errors.New("replica: Config.MaxBodyBytes, MaxMessageBytes, MaxWorkflowMessageBytes, BodyTimeout and MaxBufferedBytes must not be negative")
	}
	cfg = cfg.withDefaults()
	anon := cfg.MaxBufferedBytes / 4
	return &Forwarder{cfg: cfg, buffered: &byteBudget{limit: cfg.MaxBufferedBytes - anon}, anon: &byteBudget{limit: anon},
		leaders: map[int]cachedLeader{}}, nil
}

func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
		return
	case "/metrics":
		if f.cfg.Metrics != nil {
			f.cfg.Metrics.ServeHTTP(w, r)
			return
		}
	case "/readyz":
		if _, err := f.target(r.Context(), 0, false); err != nil && !errors.Is(err, errLocal) {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ready"}`))
		return
	}
	shard, err := f.shard(r, nil)
	if err == nil {
		if local := f.local(shard); local != nil { // the common case: served here, unbuffered
			local.ServeHTTP(w, r)
			return
		}
	} else if !errors.Is(err, ErrNeedBody) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if r.Header.Get(ForwardedHeader) != "" && !errors.Is(err, ErrNeedBody) {
		// Sent here as the shard's leader, which this replica no longer (or not yet) is.
		w.Header().Set(NotLeaderHeader, f.cfg.Self)
		writeError(w, http.StatusServiceUnavailable, "leadership moved while the request was forwarded; retry")
		return
	}
	// The body is read first (within the leader's own limits, limits.go), so that a
	// request whose leader is gone before it could be sent is sent again to the next one.
	body, release, err := f.readBody(w, r)
	if err != nil {
		var be *bodyError
		if errors.As(err, &be) {
			if be.status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "1")
			}
			w.Header().Set("Connection", "close") // the rest of the body is not read
			writeError(w, be.status, be.msg)
			return
		}
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	defer release()
	if shard, err = f.shard(r, body); err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if r.Header.Get(ForwardedHeader) != "" && f.local(shard) == nil {
		w.Header().Set(NotLeaderHeader, f.cfg.Self)
		writeError(w, http.StatusServiceUnavailable, "leadership moved while the request was forwarded; retry")
		return
	}
	f.forward(w, r, shard, body)
}

// forward sends r (its body read) to shard's leader, or serves it here once this
// replica leads the shard, waiting through a takeover.
func (f *Forwarder) forward(w http.ResponseWriter, r *http.Request, shard int, body []byte) {
	deadline := f.cfg.Now().Add(f.cfg.WaitForLeader)
	for {
		if local := f.local(shard); local != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			local.ServeHTTP(w, r)
			return
		}
		target, err := f.target(r.Context(), shard, true)
		if errors.Is(err, errLocal) {
			continue
		}
		if err != nil {
			f.observe(ResultNoLeader)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		resp, err := f.cfg.Transport.RoundTrip(f.outgoing(r, target, body))
		if err == nil && !notLeader(resp) {
			f.observe(ResultOK)
			copyResponse(w, resp)
			return
		}
		if r.Context().Err() != nil {
			if err == nil {
				resp.Body.Close()
			}
			return // the client went away
		}
		f.forget(shard)
		if err == nil {
			// Refused unread by a replica that does not lead (yet): the lease names it
			// while it starts its engine. Wait for it, or for the next leader.
			if f.cfg.Now().After(deadline) {
				f.observe(ResultNoLeader)
				copyResponse(w, resp)
				return
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		} else if !notSent(err) || f.cfg.Now().After(deadline) {
			// It may have reached the leader: sending it again could do it twice.
			f.cfg.Logger.Warn("forward to leader failed", "err", err, "path", r.URL.Path, "shard", shard)
			f.observe(ResultBadGateway)
			writeError(w, http.StatusBadGateway, "the leading replica did not answer: "+err.Error()+"; retry")
			return
		}
		select { // the leader is gone: wait for the next one
		case <-r.Context().Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// shard is Config.Shard, or 0 without it.
func (f *Forwarder) shard(r *http.Request, body []byte) (int, error) {
	if f.cfg.Shard == nil {
		return 0, nil
	}
	return f.cfg.Shard(r, body)
}

// The results OnForward is told.
const (
	ResultOK         = "ok"
	ResultBadGateway = "bad_gateway"
	ResultNoLeader   = "no_leader"
)

func (f *Forwarder) observe(result string) {
	if f.cfg.OnForward != nil {
		f.cfg.OnForward(result)
	}
}

func (f *Forwarder) local(shard int) http.Handler {
	if f.cfg.Local == nil {
		return nil
	}
	return f.cfg.Local(shard)
}

// notLeader reports whether resp is another replica's refusal of a forwarded request it
// did not read (NotLeaderHeader).
func notLeader(resp *http.Response) bool {
	return resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(NotLeaderHeader) != ""
}

// notSent reports whether err says the request never reached the leader (it could not
// be dialled), so it may be sent again.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// hopHeaders are the hop-by-hop headers a proxy does not pass on (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// outgoing is r addressed to the leader.
func (f *Forwarder) outgoing(r *http.Request, target *url.URL, body []byte) *http.Request {
	out := r.Clone(r.Context())
	u := *r.URL
	u.Scheme, u.Host = target.Scheme, target.Host
	out.URL, out.RequestURI = &u, ""
	out.Host = r.Host // the leader sees the client's host, as if asked directly
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	// Replayable: when a kept-alive connection fails before any answer (the leader died
	// and this replica had not yet seen the connection close), net/http sends the
	// request again on a fresh one; dialling the dead leader then fails and the loop in
	// ServeHTTP waits for the next. A nil idempotency key is never sent on the wire.
	// The leader may have applied the request before dying: resending is at-least-once,
	// as a client's own retry of a 502 would be.
	if _, ok := out.Header["Idempotency-Key"]; !ok { // a client's own key is passed on
		out.Header["Idempotency-Key"] = nil
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		prior := r.Header.Get("X-Forwarded-For")
		if prior != "" {
			ip = prior + ", " + ip
		}
		out.Header.Set("X-Forwarded-For", ip)
	}
	out.Header.Set(ForwardedHeader, f.cfg.Self)
	out.Header.Del(SecretHeader) // never the client's
	if f.cfg.Secret != "" {
		out.Header.Set(SecretHeader, f.cfg.Secret)
	}
	return out
}

func copyResponse(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body) // a broken stream shows as a short body to the client
}

// target is the URL of shard's leader: cached, else read; with wait, it waits for a
// leader while none leads.
func (f *Forwarder) target(ctx context.Context, shard int, wait bool) (*url.URL, error) {
	f.mu.Lock()
	if c, ok := f.leaders[shard]; ok && f.cfg.Now().Sub(c.readAt) < f.cfg.CacheFor {
		f.mu.Unlock()
		return c.u, nil
	}
	f.mu.Unlock()
	deadline := f.cfg.Now().Add(f.cfg.WaitForLeader)
	for {
		addr, err := f.cfg.Leader(ctx, shard)
		if err != nil {
			return nil, err
		}
		if addr != "" {
			u, err := url.Parse(addr)
			if err != nil {
				return nil, err
			}
			f.mu.Lock()
			f.leaders[shard] = cachedLeader{u: u, readAt: f.cfg.Now()}
			f.mu.Unlock()
			return u, nil
		}
		if f.local(shard) != nil {
			return nil, errLocal
		}
		if !wait || f.cfg.Now().After(deadline) {
			return nil, errors.New("no replica leads right now (a takeover is in progress or every replica is down); retry")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errLocal: this replica took the lease while the request waited.
var errLocal = errors.New("replica: this replica leads now")

func (f *Forwarder) forget(shard int) {
	f.mu.Lock()
	delete(f.leaders, shard)
	f.mu.Unlock()
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
