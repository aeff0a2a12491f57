package h1

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"
)

// answerSpec is what the property test's server answers.
type answerSpec struct {
	status  int
	header  http.Header
	body    []byte
	chunked bool // else Content-Length
}

// seenRequest is what the server received.
type seenRequest struct {
	method, uri string
	header      http.Header
	body        []byte
}

// randomBytes draws a length and a seed rather than every byte: fast, and still shrinks.
func randomBytes(t *rapid.T, max int, label string) []byte {
	n := rapid.IntRange(0, max).Draw(t, label+" length")
	seed := rapid.Uint64().Draw(t, label+" seed")
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func randomHeader(t *rapid.T, label string) http.Header {
	h := http.Header{}
	for range rapid.IntRange(0, 6).Draw(t, label+" count") {
		name := "X-" + rapid.StringMatching(`[a-z][a-z0-9-]{0,10}`).Draw(t, label+" name")
		value := rapid.StringMatching(`[A-Za-z0-9!#$%&'*+.^_|~/:;=,()-]{0,24}`).Draw(t, label+" value")
		h.Add(name, value)
	}
	return h
}

// h1 and net/http's Transport, sending the same requests to the same server, give the
// same answers, and the server sees the same requests.
func TestPropertySameAsNetHTTP(t *testing.T) {
	var spec atomic.Pointer[answerSpec]
	var mu sync.Mutex
	var seen []seenRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen = append(seen, seenRequest{method: r.Method, uri: r.RequestURI, header: r.Header, body: b})
		mu.Unlock()
		a := spec.Load()
		for name, values := range a.header {
			w.Header()[name] = values
		}
		if !a.chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
		}
		w.WriteHeader(a.status)
		half := len(a.body) / 2
		_, _ = w.Write(a.body[:half])
		if a.chunked {
			w.(http.Flusher).Flush()
		}
		_, _ = w.Write(a.body[half:])
	}))
	t.Cleanup(srv.Close)
	h1tr, _ := newTestTransport(t, Config{})
	std := &http.Transport{DisableCompression: true}
	t.Cleanup(std.CloseIdleConnections)

	rapid.Check(t, func(t *rapid.T) {
		status := rapid.IntRange(200, 599).Draw(t, "status")
		a := &answerSpec{status: status, header: randomHeader(t, "answer header"),
			body: randomBytes(t, 64<<10, "answer body"), chunked: rapid.Bool().Draw(t, "chunked")}
		spec.Store(a)
		method := rapid.SampledFrom([]string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead}).Draw(t, "method")
		target := srv.URL + "/" + rapid.StringMatching(`[a-z0-9/]{0,12}`).Draw(t, "path") +
			"?q=" + rapid.StringMatching(`[a-z0-9=&]{0,12}`).Draw(t, "query")
		reqHeader := randomHeader(t, "request header")
		reqBody := randomBytes(t, 4<<10, "request body")

		send := func(tr http.RoundTripper) (*http.Response, []byte, seenRequest) {
			var body io.Reader
			if len(reqBody) > 0 {
				body = bytes.NewReader(reqBody)
			}
			req, err := http.NewRequest(method, target, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = reqHeader.Clone()
			mu.Lock()
			seen = seen[:0]
			mu.Unlock()
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("%T: %v", tr, err)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("%T: reading the body: %v", tr, err)
			}
			if err := resp.Body.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 {
				t.Fatalf("%T: the server saw %d requests", tr, len(seen))
			}
			return resp, b, seen[0]
		}
		got, gotBody, gotSeen := send(h1tr)
		want, wantBody, wantSeen := send(std)

		if got.StatusCode != want.StatusCode || got.StatusCode != status {
			t.Fatalf("status: h1 %d, net/http %d, sent %d", got.StatusCode, want.StatusCode, status)
		}
		if got.Proto != want.Proto || got.ContentLength != want.ContentLength || got.Close != want.Close ||
			!equalStrings(got.TransferEncoding, want.TransferEncoding) {
			t.Fatalf("framing: h1 %s %d %v %v, net/http %s %d %v %v", got.Proto, got.ContentLength, got.Close,
				got.TransferEncoding, want.Proto, want.ContentLength, want.Close, want.TransferEncoding)
		}
		gh, wh := got.Header.Clone(), want.Header.Clone()
		gh.Del("Date")
		wh.Del("Date")
		if !equalHeaders(gh, wh) {
			t.Fatalf("answer headers:\nh1       %v\nnet/http %v", gh, wh)
		}
		if !bytes.Equal(gotBody, wantBody) {
			t.Fatalf("answer body: h1 %d bytes, net/http %d bytes", len(gotBody), len(wantBody))
		}
		if bodyAllowed := method != http.MethodHead && status != 204 && status != 304; bodyAllowed && !bytes.Equal(gotBody, a.body) {
			t.Fatalf("answer body: %d bytes, sent %d", len(gotBody), len(a.body))
		}
		if gotSeen.method != wantSeen.method || gotSeen.uri != wantSeen.uri || !bytes.Equal(gotSeen.body, wantSeen.body) {
			t.Fatalf("request: h1 %s %s (%d bytes), net/http %s %s (%d bytes)", gotSeen.method, gotSeen.uri,
				len(gotSeen.body), wantSeen.method, wantSeen.uri, len(wantSeen.body))
		}
		if !bytes.Equal(gotSeen.body, reqBody) {
			t.Fatalf("request body: the server got %d bytes, sent %d", len(gotSeen.body), len(reqBody))
		}
		if !equalHeaders(gotSeen.header, wantSeen.header) {
			t.Fatalf("request headers:\nh1       %v\nnet/http %v", gotSeen.header, wantSeen.header)
		}
	})
	if n := h1tr.idleConns(); n != 1 {
		t.Fatalf("%d idle connections after sequential requests, want 1", n)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for name, values := range a {
		if !equalStrings(values, b[name]) {
			return false
		}
	}
	return true
}
