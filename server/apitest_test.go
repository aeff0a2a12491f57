package server

// API test harness: a real server (echo handler behind httptest) over a real bbolt file,
// with a started engine, a dev project and a recording endpoint on 127.0.0.1. Every
// response the tests read goes through validate, which checks it against ../openapi.yaml.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/delivery/schedule"
	"github.com/duraton/duraton/delivery/urlgroup"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/server/metrics"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
	"github.com/duraton/duraton/storage/storagetest"
)

func TestMain(m *testing.M) {
	if onPostgres() {
		pgtest.Main(m) // the shared PostgreSQL is stopped at the end
		return
	}
	goleak.VerifyTestMain(m)
}

// onPostgres: DURATON_TEST_STORE=postgres runs the whole API suite on the PostgreSQL
// engine (each test on its own database, the engine fenced as a leader's), as .ci/run
// does after the bbolt run.
func onPostgres() bool { return os.Getenv("DURATON_TEST_STORE") == "postgres" }

// openTestStore opens the suite's store: bbolt at dataFile, or a fresh PostgreSQL
// database under onPostgres unless the test asked for a data file of its own (bbolt's
// file-level tests: disk faults, a full disk).
func openTestStore(t *testing.T, dataFile string, ownFile bool, opts storage.Options) *storage.Store {
	t.Helper()
	if !onPostgres() || ownFile {
		store, err := storage.Open(dataFile, opts)
		require.NoError(t, err)
		return store
	}
	// A shard of a sharded database, as replicas run each (shard 3 of 4: its buckets
	// live under the shard's own, not at the database's root).
	base, err := pg.Open(t.Context(), pg.Config{URL: pgtest.Shared(t).NewDatabase(t), Shards: 4})
	require.NoError(t, err)
	t.Cleanup(func() { base.Close() })
	eng, err := base.Shard(3)
	require.NoError(t, err)
	epoch, err := eng.TryLead(t.Context(), "test", "http://127.0.0.1", time.Hour, 0)
	require.NoError(t, err)
	eng.Fence("test", epoch)
	store, err := storage.OpenEngine(eng, opts)
	require.NoError(t, err)
	return store
}

const (
	testToken      = "test-token-duraton"
	testCurrentKey = "sig_test_current_key_0123456789"
	testNextKey    = "sig_test_next_key_9876543210abc"
	testProject    = "default"
	// waitTimeout bounds every wait for an asynchronous effect (a delivery, a DLQ entry).
	waitTimeout = 15 * time.Second
)

// envOptions configure newAPI.
type envOptions struct {
	// serveMode refuses loopback and private destinations, as `duraton serve` does.
	serveMode bool
	// config adjusts the server config before server.New (limits).
	config func(*Config)
	// engine adjusts the delivery engine's config before delivery.New (project ceiling).
	engine func(*delivery.Config)
	// store wraps the store the engine uses (fault injection).
	store func(delivery.Store) delivery.Store
	// dataFile is where the data file lives; default a new file in t.TempDir().
	dataFile string
	// checkpointBytes is the store's storage.Options.CheckpointBytes (default its own).
	checkpointBytes int64
	// metricsToken protects /metrics with a bearer token.
	metricsToken string
	// adminToken enables GET /admin/backup.
	adminToken string
	// native adjusts the native unit's config before native.New (event fan-out bounds).
	native func(*native.Config)
}

// apiEnv is one running server with its own store, engine and recording endpoint.
type apiEnv struct {
	URL      string // base URL of the API, no trailing slash
	Token    string
	Engine   *delivery.Engine
	Server   *Server
	Endpoint *recorder
	Metrics  *metrics.Metrics
	native   *native.Service // its flusher is not started: tests fire deadlines with FlushDue
	store    *storage.Store
	client   *http.Client
}

// newAPI starts a server for t; everything is stopped in t's cleanup.
func newAPI(t *testing.T, opts envOptions) *apiEnv {
	t.Helper()
	env := &apiEnv{Token: testToken}

	// Cleanups run last-registered first: client idle connections, the API server
	// (waits for its handlers), the engine (drains attempts, which still reach the
	// endpoint), the store, and last the endpoint.
	env.Endpoint = newRecorder(t)

	dataFile, ownFile := opts.dataFile, opts.dataFile != ""
	if dataFile == "" {
		dataFile = filepath.Join(t.TempDir(), "duraton.db")
	}
	env.Metrics = metrics.New(dataFile)
	store := openTestStore(t, dataFile, ownFile, storage.Options{OnCommit: env.Metrics.OnCommit, CheckpointBytes: opts.checkpointBytes})
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	env.store = store

	_, err := delivery.EnsureProject(t.Context(), store, delivery.Project{
		ID: testProject, Name: testProject, CreatedAt: time.Now().UnixMilli(),
		CurrentSigningKey: testCurrentKey, NextSigningKey: testNextKey,
	}, TokenHash(testToken))
	require.NoError(t, err)

	policy := netguard.Policy{}
	if !opts.serveMode {
		policy.Allow = netguard.LoopbackPrefixes()
	}
	quiet := slog.New(slog.DiscardHandler)
	engineCfg := delivery.Config{
		Destinations: policy,
		DrainTimeout: 5 * time.Second,
		Observer:     env.Metrics,
		Logger:       quiet,
	}
	if opts.engine != nil {
		opts.engine(&engineCfg)
	}
	// Every write of the engine (and of the scheduler and URL groups) runs twice: the
	// suite exercises the rule that a transaction function may be run again by the
	// group committer.
	twice := storagetest.NewTwice(store)
	var engineStore delivery.Store = twice
	if opts.store != nil {
		engineStore = opts.store(engineStore)
	}
	env.Engine, err = delivery.New(engineCfg, engineStore)
	require.NoError(t, err)
	env.Metrics.WatchEngine(env.Engine.Stats)
	sched := schedule.New(schedule.Config{Logger: quiet}, twice, env.Engine)
	natCfg := native.Config{CheckURL: policy.CheckURL, Now: engineCfg.Now}
	if opts.native != nil {
		opts.native(&natCfg)
	}
	nat, err := native.New(natCfg, twice, env.Engine)
	require.NoError(t, err)
	env.native = nat
	cfg := Config{Native: nat, CheckDestination: policy.CheckURL, Metrics: env.Metrics.Handler(opts.metricsToken), Schedules: sched,
		URLGroups: urlgroup.New(urlgroup.Config{}, twice), AdminToken: opts.adminToken, Backup: store.Backup, Logger: quiet}
	if opts.config != nil {
		opts.config(&cfg)
	}
	env.Server, err = New(cfg, env.Engine)
	require.NoError(t, err)

	require.NoError(t, env.Engine.Start(context.Background()))
	t.Cleanup(env.Engine.Stop)
	require.NoError(t, sched.Start(context.Background()))
	t.Cleanup(sched.Stop) // runs before the engine stops

	api := httptest.NewServer(env.Server.Handler())
	t.Cleanup(api.Close)
	env.URL = api.URL

	transport := &http.Transport{}
	env.client = &http.Client{Transport: transport, Timeout: waitTimeout}
	t.Cleanup(transport.CloseIdleConnections)
	return env
}

// withProject adds a project with its own token and signing keys, and returns a view
// of env that authenticates as that project.
func (e *apiEnv) withProject(t *testing.T, id, token string) *apiEnv {
	t.Helper()
	_, err := delivery.EnsureProject(t.Context(), e.store, delivery.Project{
		ID: id, Name: id, CreatedAt: time.Now().UnixMilli(),
		CurrentSigningKey: delivery.NewSigningKey(), NextSigningKey: delivery.NewSigningKey(),
	}, TokenHash(token))
	require.NoError(t, err)
	other := *e
	other.Token = token
	return &other
}

// apiResponse is an answer of the API, already validated against the spec.
type apiResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// errorMessage decodes an {"error": "..."} body.
func (r apiResponse) errorMessage(t *testing.T) string {
	t.Helper()
	var e wire.ErrorBody
	require.NoError(t, json.Unmarshal(r.Body, &e), "error body %s", r.Body)
	return e.Error
}

// decodeJSON decodes an API body into a value of type T.
func decodeJSON[T any](t *testing.T, r apiResponse) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.Body, &v), "body %s", r.Body)
	return v
}

// request builds an authenticated request; header holds name/value pairs. Names are
// used verbatim (not canonicalised), so lower-case names reach the server as sent.
func (e *apiEnv) request(t *testing.T, method, path string, body []byte, header ...string) *http.Request {
	t.Helper()
	require.Zero(t, len(header)%2, "header wants name/value pairs")
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	for i := 0; i < len(header); i += 2 {
		req.Header[header[i]] = append(req.Header[header[i]], header[i+1])
	}
	return req
}

// call sends an authenticated request and returns its validated answer.
func (e *apiEnv) call(t *testing.T, method, path string, body []byte, header ...string) apiResponse {
	t.Helper()
	return e.send(t, e.request(t, method, path, body, header...))
}

// send sends req as is and returns its validated answer.
func (e *apiEnv) send(t *testing.T, req *http.Request) apiResponse {
	t.Helper()
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	validate(t, req, resp, body)
	return apiResponse{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// publish publishes body to dest and returns the new message id.
func (e *apiEnv) publish(t *testing.T, dest string, body []byte, header ...string) string {
	t.Helper()
	r := e.call(t, http.MethodPost, "/v2/publish/"+dest, body, header...)
	require.Equal(t, http.StatusCreated, r.Status, "publish: %s", r.Body)
	return decodeJSON[wire.PublishResult](t, r).MessageID
}

// logs lists the log events matching query (e.g. "messageIds=x&state=DELIVERED").
func (e *apiEnv) logs(t *testing.T, query string) wire.LogsPage {
	t.Helper()
	r := e.call(t, http.MethodGet, "/v2/logs?"+query, nil)
	require.Equal(t, http.StatusOK, r.Status, "logs: %s", r.Body)
	return decodeJSON[wire.LogsPage](t, r)
}

// eventually waits, through the test kit's poller, until the API shows cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deliverytest.Eventually(t, waitTimeout, what, cond)
}

// --- recording endpoint ---

// recorded is one request the endpoint received.
type recorded = deliverytest.Request

// recorder is the test kit's recording endpoint on 127.0.0.1. Paths under /fail answer
// 500 with body "boom"; everything else answers 200 "ok".
type recorder struct{ *deliverytest.Endpoint }

func newRecorder(t *testing.T) *recorder {
	return &recorder{deliverytest.NewEndpoint(t, func(req *http.Request, _ int) (int, http.Header, string) {
		if strings.HasPrefix(req.URL.Path, "/fail") {
			return http.StatusInternalServerError, nil, "boom"
		}
		return http.StatusOK, nil, "ok"
	})}
}

// all returns every request received so far.
func (r *recorder) all() []recorded { return r.Requests.All() }

// waitN waits until n requests match and returns them in arrival order.
func (r *recorder) waitN(t *testing.T, n int, match func(recorded) bool) []recorded {
	t.Helper()
	return r.Requests.Wait(t, waitTimeout, n, match)
}

// waitMessage waits for the first delivery of message id.
func (r *recorder) waitMessage(t *testing.T, id string) recorded {
	t.Helper()
	return r.waitN(t, 1, func(q recorded) bool { return q.Header.Get("Upstash-Message-Id") == id })[0]
}

// deliveriesOf counts the deliveries of message id so far.
func (r *recorder) deliveriesOf(id string) int {
	n := 0
	for _, q := range r.all() {
		if q.Header.Get("Upstash-Message-Id") == id {
			n++
		}
	}
	return n
}

// --- OpenAPI validation ---

var spec struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// loadSpec loads and validates ../openapi.yaml once per test binary.
func loadSpec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	spec.once.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile(filepath.Join("..", "openapi.yaml"))
		if err != nil {
			spec.err = err
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			spec.err = err
			return
		}
		spec.doc = doc
		spec.router, spec.err = gorillamux.NewRouter(doc)
	})
	require.NoError(t, spec.err, "openapi.yaml")
	return spec.doc, spec.router
}

// findRoute finds req's operation in the spec. The router matches a path parameter
// within one segment only, so the wildcard destinations of publish and enqueue (a whole
// URL with slashes) are looked up directly.
func findRoute(t *testing.T, req *http.Request) (*routers.Route, map[string]string) {
	t.Helper()
	doc, router := loadSpec(t)
	lookup := func(path string, params map[string]string) (*routers.Route, map[string]string) {
		item := doc.Paths.Value(path)
		require.NotNil(t, item, "spec has no path %s", path)
		op := item.GetOperation(req.Method)
		require.NotNil(t, op, "spec has no operation %s %s", req.Method, path)
		return &routers.Route{Spec: doc, Path: path, PathItem: item, Method: req.Method, Operation: op}, params
	}
	uri := req.URL.RequestURI()
	if dest, ok := strings.CutPrefix(uri, "/v2/publish/"); ok {
		return lookup("/v2/publish/{destination}", map[string]string{"destination": dest})
	}
	if rest, ok := strings.CutPrefix(uri, "/v2/enqueue/"); ok {
		queue, dest, _ := strings.Cut(rest, "/")
		return lookup("/v2/enqueue/{queue}/{destination}", map[string]string{"queue": queue, "destination": dest})
	}
	if dest, ok := strings.CutPrefix(uri, "/v2/schedules/"); ok && req.Method == http.MethodPost {
		return lookup("/v2/schedules/{id}", map[string]string{"id": dest})
	}
	route, params, err := router.FindRoute(req)
	require.NoError(t, err, "spec has no operation for %s %s", req.Method, uri)
	return route, params
}

// validate checks an answer against the spec: its status must be documented for the
// operation, and its headers and body must match the documented response. A request
// the server accepted (2xx) must also conform to the documented parameters and body.
func validate(t *testing.T, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	route, params := findRoute(t, req)
	ctx := context.Background()
	reqInput := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      route,
		Options: &openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			MultiError:         true,
		},
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		checkReq := req.Clone(ctx)
		checkReq.Body = http.NoBody
		if req.GetBody != nil {
			b, err := req.GetBody()
			require.NoError(t, err)
			checkReq.Body = b
		}
		opts := *reqInput.Options
		// Message bodies are opaque bytes of any content type: only their parameters and
		// headers are checked.
		opts.ExcludeRequestBody = strings.Contains(route.Path, "{destination}")
		in := *reqInput
		in.Request, in.Options = checkReq, &opts
		if err := openapi3filter.ValidateRequest(ctx, &in); err != nil {
			t.Errorf("request %s %s (answered %d) does not match openapi.yaml:\n%v", req.Method, req.URL.RequestURI(), resp.StatusCode, err)
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqInput,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
		t.Errorf("answer %d to %s %s does not match openapi.yaml:\n%v\nbody: %s", resp.StatusCode, req.Method, req.URL.RequestURI(), err, body)
	}
	// kin-openapi skips the body of a response documented without content: require
	// that such a response is really empty.
	if ref := route.Operation.Responses.Status(resp.StatusCode); ref != nil && ref.Value != nil && len(ref.Value.Content) == 0 && len(body) != 0 {
		t.Errorf("answer %d to %s %s is documented without a body, got %q", resp.StatusCode, req.Method, req.URL.RequestURI(), body)
	}
}

// errStatus is the HTTP status of an apiError, 0 for any other error.
func errStatus(err error) int {
	var api *apiError
	if errors.As(err, &api) {
		return api.status
	}
	return 0
}
