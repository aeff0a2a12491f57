package server

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/retrydelay"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
)

// Limits of one message's headers.
const (
	maxForwardedHeaders = 64
	maxHeaderValueLen   = 8 << 10
	maxLabels           = 16
	maxLabelLen         = 128
	maxDedupIDLen       = 256
	maxQueueNameLen     = 128
	maxURLLen           = 4096
)

var (
	labelPattern     = regexp.MustCompile(`^[a-zA-Z0-9\-_.]+$`)
	queueNamePattern = regexp.MustCompile(`^[a-zA-Z0-9\-_.]+$`)
)

// publishLimits are the server's bounds on publish headers.
type publishLimits struct {
	maxRetries int
	maxTimeout time.Duration
	maxDelay   time.Duration
}

// publishLimits are the limits c puts on a published message.
func (c Config) publishLimits() publishLimits {
	return publishLimits{maxRetries: c.MaxRetries, maxTimeout: c.MaxTimeout, maxDelay: c.MaxDelay}
}

// messageParser turns publish headers into a delivery.Message. The same code reads real
// HTTP headers (/v2/publish, /v2/enqueue) and the lower-case header maps of /v2/batch,
// both as an http.Header, and reads nested callback configuration by prefix.
type messageParser struct {
	limits       publishLimits
	destinations func(raw string) (*url.URL, error)
	now          time.Time
}

// headerError names the header that is wrong.
func headerError(name, format string, args ...any) error {
	return badRequest("%s: %s", name, fmt.Sprintf(format, args...))
}

// parse reads a message for destination from h. The caller sets Project, Body, Queue
// and CallerIP.
func (p messageParser) parse(h http.Header, destination string) (*delivery.Message, error) {
	u, err := p.checkURL("destination", destination)
	if err != nil {
		return nil, err
	}
	m := &delivery.Message{URL: u}
	cfg, err := p.config(h, "")
	if err != nil {
		return nil, err
	}
	m.Method, m.Retries, m.RetryDelay, m.TimeoutMs, m.FlowControl = cfg.Method, cfg.Retries, cfg.RetryDelay, cfg.TimeoutMs, cfg.FlowControl
	if m.Header, err = forwardedHeaders(h, wire.PrefixForward, true); err != nil {
		return nil, err
	}
	if nb := h.Get(wire.HeaderNotBefore); nb != "" {
		secs, err := strconv.ParseInt(strings.TrimSpace(nb), 10, 64)
		if err != nil || secs < 0 {
			return nil, headerError(wire.HeaderNotBefore, "want unix seconds, got %q", nb)
		}
		if secs > p.now.Add(p.limits.maxDelay).Unix() { // compared as seconds: no overflow
			return nil, headerError(wire.HeaderNotBefore, "is more than %s in the future", p.limits.maxDelay)
		}
		m.NotBefore = secs * 1000
	} else if cfg.DelayMs > 0 {
		m.NotBefore = p.now.UnixMilli() + cfg.DelayMs
	}
	if v := h.Get(wire.HeaderLabel); v != "" {
		if m.Labels, err = parseLabels(v); err != nil {
			return nil, err
		}
	}
	if m.Redact, err = parseRedact(h.Get(wire.HeaderRedactFields)); err != nil {
		return nil, err
	}
	if v := h.Get(wire.HeaderDeduplicationID); v != "" {
		if len(v) > maxDedupIDLen {
			return nil, headerError(wire.HeaderDeduplicationID, "longer than %d bytes", maxDedupIDLen)
		}
		m.DedupID = "id:" + v
	}
	if m.Callback, err = p.callback(h, wire.PrefixCallback, wire.HeaderCallback); err != nil {
		return nil, err
	}
	if m.FailureCallback, err = p.callback(h, wire.PrefixFailureCallback, wire.HeaderFailureCallback); err != nil {
		return nil, err
	}
	return m, nil
}

// checkURL validates a destination or callback URL: http(s), a host, no userinfo, not a
// blocked IP literal. The dial-time check stays the real boundary.
func (p messageParser) checkURL(what, raw string) (string, error) {
	if raw == "" {
		return "", badRequest("%s: a URL is required", what)
	}
	if len(raw) > maxURLLen {
		return "", badRequest("%s: URL longer than %d bytes", what, maxURLLen)
	}
	u, err := p.destinations(raw)
	if err != nil {
		return "", badRequest("%s: %v", what, err)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", badRequest("%s: port %s is not between 1 and 65535", what, port)
		}
	}
	return u.String(), nil
}

// messageConfig is the part of a message's configuration that callbacks can nest.
type messageConfig struct {
	Method      string
	Retries     int
	RetryDelay  string
	TimeoutMs   int64
	DelayMs     int64
	FlowControl *flowctl.Config
}

// config reads Method, Retries, Retry-Delay, Timeout, Delay and flow control from the
// headers named "Upstash-" + prefix + ..., e.g. prefix "Callback-" for a callback.
func (p messageParser) config(h http.Header, prefix string) (messageConfig, error) {
	name := func(n string) string { return "Upstash-" + prefix + strings.TrimPrefix(n, "Upstash-") }
	c := messageConfig{Method: wire.DefaultMethod, Retries: 3}
	if v := h.Get(name(wire.HeaderMethod)); v != "" {
		v = strings.ToUpper(strings.TrimSpace(v))
		switch v {
		case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS":
			c.Method = v
		default:
			return c, headerError(name(wire.HeaderMethod), "unsupported method %q", v)
		}
	}
	if v := h.Get(name(wire.HeaderRetries)); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return c, headerError(name(wire.HeaderRetries), "want a non-negative integer, got %q", v)
		}
		if n > p.limits.maxRetries {
			return c, limitError("%s: %d exceeds the maximum of %d retries", name(wire.HeaderRetries), n, p.limits.maxRetries)
		}
		c.Retries = n
	}
	if v := h.Get(name(wire.HeaderRetryDelay)); v != "" {
		if _, err := retrydelay.Parse(v); err != nil {
			return c, headerError(name(wire.HeaderRetryDelay), "%v", err)
		}
		c.RetryDelay = v
	}
	if v := h.Get(name(wire.HeaderTimeout)); v != "" {
		d, err := parseDuration(v)
		if err != nil || d <= 0 {
			return c, headerError(name(wire.HeaderTimeout), "want a duration like 30s or bare seconds, got %q", v)
		}
		if d < time.Second {
			return c, headerError(name(wire.HeaderTimeout), "%s is below the minimum of 1s", d)
		}
		if d > p.limits.maxTimeout {
			return c, headerError(name(wire.HeaderTimeout), "%s exceeds the maximum of %s", d, p.limits.maxTimeout)
		}
		c.TimeoutMs = d.Milliseconds()
	}
	if v := h.Get(name(wire.HeaderDelay)); v != "" {
		d, err := parseDuration(v)
		if err != nil || d < 0 {
			return c, headerError(name(wire.HeaderDelay), "want a duration like 10s, 2m, 1d10h30m, got %q", v)
		}
		if d > p.limits.maxDelay {
			return c, headerError(name(wire.HeaderDelay), "%s exceeds the maximum of %s", d, p.limits.maxDelay)
		}
		c.DelayMs = d.Milliseconds()
	}
	key, value := h.Get(name(wire.HeaderFlowControlKey)), h.Get(name(wire.HeaderFlowControlValue))
	if key != "" || value != "" {
		v, err := wire.ParseFlowControlValue(value)
		var fc flowctl.Config
		if err == nil {
			fc, err = flowctl.New(key, v.Parallelism, v.Rate, v.Period)
		}
		if err != nil {
			// flowctl names the top-level headers: name the (nested) ones actually sent.
			return c, badRequest("%s", strings.ReplaceAll(err.Error(), "Upstash-Flow-Control-", name("Upstash-Flow-Control-")))
		}
		c.FlowControl = &fc
	}
	return c, nil
}

// callback reads the callback named by urlHeader and its nested configuration.
func (p messageParser) callback(h http.Header, prefix, urlHeader string) (*delivery.CallbackSpec, error) {
	raw := h.Get(urlHeader)
	if raw == "" {
		return nil, nil
	}
	u, err := p.checkURL(urlHeader, strings.TrimSpace(raw))
	if err != nil {
		return nil, err
	}
	cfg, err := p.config(h, strings.TrimPrefix(prefix, "Upstash-"))
	if err != nil {
		return nil, err
	}
	header, err := forwardedHeaders(h, prefix+"Forward-", false)
	if err != nil {
		return nil, err
	}
	return &delivery.CallbackSpec{
		URL: u, Method: cfg.Method, Header: header, Retries: cfg.Retries, RetryDelay: cfg.RetryDelay,
		TimeoutMs: cfg.TimeoutMs, DelayMs: cfg.DelayMs, FlowControl: cfg.FlowControl,
	}, nil
}

// forwardedHeaders collects headers named prefix+Name as Name. Hop-by-hop names are
// dropped (the SDK's self-trigger forwards them); names and values are validated so a
// bad one is refused now rather than failing every attempt later. withContentType also
// keeps the request's Content-Type.
func forwardedHeaders(h http.Header, prefix string, withContentType bool) (map[string][]string, error) {
	out := map[string][]string{}
	for name, values := range h {
		// Case-insensitive: Go leaves names with invalid characters uncanonicalised.
		if len(name) < len(prefix) || !strings.EqualFold(name[:len(prefix)], prefix) {
			continue
		}
		fwd := http.CanonicalHeaderKey(name[len(prefix):])
		// Hop-by-hop headers and the ones Duraton sets itself on every delivery are
		// dropped, not refused: the workflow SDK's self-trigger forwards every header of
		// the request it received, a QStash delivery's own included.
		if fwd == "" || wire.IsHopByHop(fwd) || isReservedHeader(fwd) {
			continue
		}
		if !isToken(fwd) {
			return nil, headerError(name, "invalid header name %q", fwd)
		}
		if err := checkHeaderValues(values); err != nil {
			return nil, headerError(name, "%v", err)
		}
		out[fwd] = append(out[fwd], values...)
		if len(out) > maxForwardedHeaders {
			return nil, badRequest("more than %d forwarded headers", maxForwardedHeaders)
		}
	}
	if ct := h.Get(wire.HeaderContentType); withContentType && ct != "" {
		out[wire.HeaderContentType] = []string{ct}
	}
	return out, nil
}

func isReservedHeader(name string) bool {
	switch name {
	case wire.HeaderSignature, wire.HeaderMessageID, wire.HeaderRetried, wire.HeaderUserAgent,
		wire.HeaderFlowControlKey, wire.HeaderFlowControlValue, wire.HeaderHops, wire.HeaderInline:
		return true
	}
	return false
}

func parseLabels(v string) ([]string, error) {
	var out []string
	for _, l := range strings.Split(v, ",") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if len(l) > maxLabelLen || !labelPattern.MatchString(l) {
			return nil, headerError(wire.HeaderLabel, "label %q must match ^[a-zA-Z0-9\\-_.]+$ and be at most %d bytes", l, maxLabelLen)
		}
		out = append(out, l)
	}
	if len(out) > maxLabels {
		return nil, headerError(wire.HeaderLabel, "more than %d labels", maxLabels)
	}
	return out, nil
}

// parseDuration reads "30" (seconds), Go durations ("1h30m", "500ms") and the Upstash
// day form ("1d", "1d10h30m").
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > int64(365*24*time.Hour/time.Second) || n < 0 {
			return 0, fmt.Errorf("out of range")
		}
		return time.Duration(n) * time.Second, nil
	}
	var days time.Duration
	if d, rest, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 || n > 365 {
			return 0, fmt.Errorf("bad day count")
		}
		days, s = time.Duration(n)*24*time.Hour, rest
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	return days + d, nil
}

// validQueueName checks a queue name from a path or a batch entry.
func validQueueName(name string) error {
	if name == "" || len(name) > maxQueueNameLen || !queueNamePattern.MatchString(name) {
		return badRequest("queue name %q must match ^[a-zA-Z0-9\\-_.]+$ and be at most %d bytes", name, maxQueueNameLen)
	}
	return nil
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2): a header name. A table,
// not a regexp: it runs for every header of every batch entry.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenChars[s[i]] {
			return false
		}
	}
	return true
}

var tokenChars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
