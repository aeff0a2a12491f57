package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/duraton/duraton/sdk/wire"
)

// Defaults of NewClient.
const (
	// DefaultBaseURL is the base URL when neither WithBaseURL nor DURATON_URL or
	// QSTASH_URL gives one:
	// a local `duraton dev`.
	DefaultBaseURL = "http://127.0.0.1:8080"

	// maxResponseBytes bounds a success body the client decodes; maxErrorBytes bounds the
	// part of an error body kept as APIError.Message.
	maxResponseBytes = 64 << 20
	maxErrorBytes    = 64 << 10

	userAgent = "duraton-go-sdk"
)

// Client talks to the QStash-compatible /v2 API of a Duraton server. It is safe for
// concurrent use. Build it with NewClient.
type Client struct {
	baseURL string // without a trailing "/"
	token   string
	http    *http.Client
}

// ClientOption configures NewClient.
type ClientOption func(*clientConfig)

type clientConfig struct {
	baseURL, token string
	httpClient     *http.Client
	getenv         func(string) string
}

// WithBaseURL sets the server's base URL, e.g. "http://127.0.0.1:8080". Default: the
// DURATON_URL environment variable, else QSTASH_URL, else DefaultBaseURL. One trailing
// "/" is stripped.
func WithBaseURL(baseURL string) ClientOption {
	return func(c *clientConfig) { c.baseURL = baseURL }
}

// WithToken sets the bearer token. Default: the DURATON_TOKEN environment variable, else
// QSTASH_TOKEN.
func WithToken(token string) ClientOption {
	return func(c *clientConfig) { c.token = token }
}

// WithHTTPClient sets the HTTP client used for every call. Default: a client with no
// timeout of its own (each call is bounded by its context) over http.DefaultTransport.
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(c *clientConfig) { c.httpClient = hc }
}

// WithEnv replaces os.Getenv for reading DURATON_URL, DURATON_TOKEN and their QSTASH_*
// fallbacks (tests).
func WithEnv(getenv func(string) string) ClientOption {
	return func(c *clientConfig) { c.getenv = getenv }
}

// NewClient returns a Client. Options win over the environment; see WithBaseURL and
// WithToken for the defaults. It fails only on a base URL that is not an absolute
// http(s) URL.
func NewClient(opts ...ClientOption) (*Client, error) {
	cfg := clientConfig{getenv: os.Getenv}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.baseURL == "" {
		cfg.baseURL = envURL(cfg.getenv)
	}
	if cfg.baseURL == "" {
		cfg.baseURL = DefaultBaseURL
	}
	if cfg.token == "" {
		cfg.token = envToken(cfg.getenv)
	}
	if cfg.httpClient == nil {
		// A workflow endpoint publishes from many deliveries at once: keep enough idle
		// connections to Duraton that each publish does not dial anew (the default is 2).
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		cfg.httpClient = &http.Client{Transport: t}
	}
	base := strings.TrimSuffix(cfg.baseURL, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sdk: base URL %q: want an absolute http or https URL", cfg.baseURL)
	}
	return &Client{baseURL: base, token: cfg.token, http: cfg.httpClient}, nil
}

// envURL is Duraton's URL from the environment: DURATON_URL, else QSTASH_URL (what
// `duraton dev` prints both of, and what the official SDKs read).
func envURL(getenv func(string) string) string {
	if v := getenv("DURATON_URL"); v != "" {
		return v
	}
	return getenv("QSTASH_URL")
}

// envToken is the token from the environment: DURATON_TOKEN, else QSTASH_TOKEN.
func envToken(getenv func(string) string) string {
	if v := getenv("DURATON_TOKEN"); v != "" {
		return v
	}
	return getenv("QSTASH_TOKEN")
}

// BaseURL returns the server's base URL the client uses, without a trailing "/".
func (c *Client) BaseURL() string { return c.baseURL }

// do sends one API call and decodes a 2xx JSON answer into out (ignored when out is nil).
// path is appended to the base URL as is: callers escape path segments themselves, except
// a publish destination, which goes in raw (with its own query string) as the official
// SDKs send it. query, when not empty, is added to the URL's query string. Any non-2xx
// answer becomes an *APIError.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, header http.Header, body []byte, out any) error {
	target := c.baseURL + path
	if len(query) > 0 {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		target += sep + query.Encode()
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return fmt.Errorf("sdk: %s %s: %w", method, path, err)
	}
	for name, values := range header {
		req.Header[name] = values
	}
	if c.token != "" {
		req.Header.Set(wire.HeaderAuthorization, "Bearer "+c.token)
	}
	req.Header.Set(wire.HeaderUserAgent, userAgent)

	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("sdk: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return responseError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("sdk: %s %s: read answer: %w", method, path, err)
	}
	if len(data) > maxResponseBytes {
		return fmt.Errorf("sdk: %s %s: answer exceeds %d bytes", method, path, maxResponseBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("sdk: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// responseError turns a non-2xx answer into an *APIError.
func responseError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	apiErr := &APIError{Status: resp.StatusCode}
	var body wire.ErrorBody
	switch {
	case json.Unmarshal(data, &body) == nil && body.Error != "":
		apiErr.Message = body.Error
	case len(bytes.TrimSpace(data)) > 0:
		apiErr.Message = string(bytes.TrimSpace(data))
	default:
		apiErr.Message = http.StatusText(resp.StatusCode)
	}
	return apiErr
}

// doJSON is do with a JSON-encoded request body.
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	body, err := wire.CompactJSON(in)
	if err != nil {
		return fmt.Errorf("sdk: %s %s: encode request: %w", method, path, err)
	}
	header := http.Header{wire.HeaderContentType: {"application/json"}}
	return c.do(ctx, method, path, query, header, body, out)
}

// seg escapes one path segment (an id, a key, a queue name).
func seg(s string) string { return url.PathEscape(s) }

// errEmpty is the error of a call missing a required argument.
func errEmpty(call, what string) error {
	return fmt.Errorf("sdk: %s: %s is required", call, what)
}

// errNoSelection is the error of a bulk call that would select everything by accident.
func errNoSelection(call string) error {
	return fmt.Errorf("sdk: %s: give ids or at least one filter (or set All)", call)
}
