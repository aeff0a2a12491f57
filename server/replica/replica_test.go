package replica

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// leaderStub is a settable answer to Config.Leader.
type leaderStub struct {
	mu   sync.Mutex
	addr string
}

func (l *leaderStub) set(addr string) { l.mu.Lock(); l.addr = addr; l.mu.Unlock() }
func (l *leaderStub) get(context.Context, int) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr, nil
}

// recordingLeader is a leader that answers 201 and records the bodies it got.
type recordingLeader struct {
	*httptest.Server
	mu  sync.Mutex
	got []string
}

func newRecordingLeader(t *testing.T) *recordingLeader {
	l := &recordingLeader{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.got = append(l.got, string(b))
		l.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *recordingLeader) bodies() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

func newForwarder(t *testing.T, cfg Config) *Forwarder {
	t.Helper()
	f, err := New(cfg)
	require.NoError(t, err)
	return f
}

func TestForwardsRequestAndAnswerUnchanged(t *testing.T) {
	var got *http.Request
	var gotBody string
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		w.Header().Set("Upstash-Message-Id", "msg_1")
		w.Header().Set("Connection", "close-me") // hop-by-hop: not passed on
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"messageId":"msg_1"}`)
	}))
	defer leader.Close()
	stub := &leaderStub{addr: leader.URL}
	f := newForwarder(t, Config{Self: "r-me", Leader: stub.get})

	req := httptest.NewRequest(http.MethodPost, "http://api.example/v2/publish/https://example.com/x?a=1", strings.NewReader("hello"))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Upstash-Delay", "10s")
	req.RemoteAddr = "192.0.2.7:5555"
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, req)

	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, `{"messageId":"msg_1"}`, rec.Body.String())
	require.Equal(t, "msg_1", rec.Header().Get("Upstash-Message-Id"))
	require.Empty(t, rec.Header().Get("Connection"))
	require.Equal(t, http.MethodPost, got.Method)
	require.Equal(t, "/v2/publish/https://example.com/x", got.URL.Path)
	require.Equal(t, "a=1", got.URL.RawQuery)
	require.Equal(t, "hello", gotBody)
	require.Equal(t, "Bearer tok", got.Header.Get("Authorization"))
	require.Equal(t, "10s", got.Header.Get("Upstash-Delay"))
	require.Equal(t, "api.example", got.Host, "the leader sees the client's host")
	require.Equal(t, "192.0.2.7", got.Header.Get("X-Forwarded-For"))
	require.Equal(t, "r-me", got.Header.Get(ForwardedHeader))
}

func TestForwardedRequestIsNotForwardedAgain(t *testing.T) {
	var calls atomic.Int64
	leader := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer leader.Close()
	f := newForwarder(t, Config{Self: "r-me", Leader: (&leaderStub{addr: leader.URL}).get})
	req := httptest.NewRequest(http.MethodGet, "/v2/queues", nil)
	req.Header.Set(ForwardedHeader, "r-other")
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), `"error"`)
	require.Zero(t, calls.Load())
}

// A leader that died before the request could be sent: the request waits for the next
// leader and is sent there, once.
func TestRequestWaitsThroughTakeover(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadURL := "http://" + dead.Addr().String()
	require.NoError(t, dead.Close()) // nothing listens there now: dialling fails

	next := newRecordingLeader(t)
	stub := &leaderStub{addr: deadURL}
	f := newForwarder(t, Config{Self: "r-me", Leader: stub.get, WaitForLeader: 10 * time.Second})
	go func() {
		time.Sleep(300 * time.Millisecond) // the takeover happens while the request waits
		stub.set("")
		time.Sleep(200 * time.Millisecond)
		stub.set(next.URL)
	}()
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/publish/x", strings.NewReader("payload")))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	require.Equal(t, []string{"payload"}, next.bodies())
}

func TestNoLeaderAnswers503AfterWaiting(t *testing.T) {
	f := newForwarder(t, Config{Self: "r-me", Leader: (&leaderStub{}).get, WaitForLeader: 200 * time.Millisecond})
	rec := httptest.NewRecorder()
	start := time.Now()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v2/queues", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), "no replica leads")
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	rec = httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "not ready without a leader")
	rec = httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusOK, rec.Code, "alive regardless")
}

// This replica took the lease while the request waited: it serves it itself.
func TestLocalHandlerOnceThisReplicaLeads(t *testing.T) {
	var local atomic.Pointer[http.Handler]
	f := newForwarder(t, Config{Self: "r-me", Leader: (&leaderStub{}).get, WaitForLeader: 10 * time.Second,
		Local: func(int) http.Handler {
			if h := local.Load(); h != nil {
				return *h
			}
			return nil
		}})
	go func() {
		time.Sleep(200 * time.Millisecond)
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(append([]byte("local:"), b...))
		})
		local.Store(&h)
	}()
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/publish/x", strings.NewReader("p")))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "local:p", rec.Body.String())
}

func TestBodyOverLimitRefused(t *testing.T) {
	var calls atomic.Int64
	leader := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer leader.Close()
	f := newForwarder(t, Config{Self: "r-me", Leader: (&leaderStub{addr: leader.URL}).get, MaxBodyBytes: 4})
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/publish/x", strings.NewReader("12345")))
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Contains(t, rec.Body.String(), "larger than the 4 bytes this route takes")
	require.Zero(t, calls.Load())
}

func TestConfigValidated(t *testing.T) {
	_, err := New(Config{})
	require.ErrorContains(t, err, "Leader is required")
	_, err = New(Config{Leader: (&leaderStub{}).get, MaxBodyBytes: -1})
	require.ErrorContains(t, err, "MaxBodyBytes")
}

// The shared secret goes with every forwarded request, never a client's own.
func TestSecretSentAndClientsDropped(t *testing.T) {
	got := make(chan string, 2)
	leader := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(SecretHeader)
	}))
	defer leader.Close()
	for _, secret := range []string{"s3cret", ""} {
		f := newForwarder(t, Config{Self: "r-me", Secret: secret, Leader: (&leaderStub{addr: leader.URL}).get})
		req := httptest.NewRequest(http.MethodGet, "/v2/queues", nil)
		req.Header.Set(SecretHeader, "forged-by-client")
		f.ServeHTTP(httptest.NewRecorder(), req)
		require.Equal(t, secret, <-got)
	}
}

// A leader that dies with a forwarded request unanswered on a kept-alive connection (the
// follower had not yet seen it close): the request is sent again, to the next leader,
// instead of failing with 502.
func TestRequestOnKeptAliveConnToDeadLeaderGoesToNext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	died := make(chan struct{})
	go func() { // the dying leader: answers one request, then dies reading the second
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		for n := 1; ; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if n == 2 {
				ln.Close() // gone: nothing accepts and the connection drops
				close(died)
				return
			}
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	}()
	next := newRecordingLeader(t)
	stub := &leaderStub{addr: "http://" + ln.Addr().String()}
	f := newForwarder(t, Config{Self: "r-me", Leader: stub.get, WaitForLeader: 10 * time.Second})

	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/publish/x", strings.NewReader("first")))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	go func() {
		<-died
		stub.set(next.URL) // the takeover
	}()
	rec = httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/publish/x", strings.NewReader("second")))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	require.Equal(t, []string{"second"}, next.bodies())
}

// A follower answers /metrics itself (each replica's scrape is its own) and reports how
// each forward ended.
func TestMetricsLocalAndForwardResults(t *testing.T) {
	next := newRecordingLeader(t)
	stub := &leaderStub{addr: next.URL}
	var mu sync.Mutex
	results := map[string]int{}
	f := newForwarder(t, Config{
		Self: "r-me", Leader: stub.get, WaitForLeader: 100 * time.Millisecond,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "own metrics") }),
		OnForward: func(r string) {
			mu.Lock()
			results[r]++
			mu.Unlock()
		},
	})
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, "own metrics", rec.Body.String())
	require.Empty(t, next.bodies(), "not forwarded")

	rec = httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/publish/x", strings.NewReader("a")))
	require.Equal(t, http.StatusCreated, rec.Code)
	stub.set("")
	f.forget(0)
	rec = httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/publish/x", strings.NewReader("b")))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{ResultOK: 1, ResultNoLeader: 1}, results)
}
