package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// written is what a server reads of a request: its line, its fields (Date-free, order
// aside) and its body.
type written struct {
	Method, RequestURI, Host string
	ContentLength            int64
	TransferEncoding         []string
	Close                    bool
	Header                   http.Header
	Body                     []byte
}

func readBack(t require.TestingT, wire []byte) written {
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(wire)))
	require.NoError(t, err, "%q", wire)
	body, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return written{Method: r.Method, RequestURI: r.RequestURI, Host: r.Host, ContentLength: r.ContentLength,
		TransferEncoding: r.TransferEncoding, Close: r.Close, Header: r.Header, Body: body}
}

// both writes req (made twice by mk: a body is read once) with writeRequest and with
// Request.Write.
func both(t require.TestingT, mk func() *http.Request) (fast, std []byte) {
	var a, b bytes.Buffer
	wa, wb := bufio.NewWriter(&a), bufio.NewWriter(&b)
	require.NoError(t, writeRequest(wa, mk()))
	require.NoError(t, mk().Write(wb))
	require.NoError(t, wa.Flush())
	require.NoError(t, wb.Flush())
	return a.Bytes(), b.Bytes()
}

func TestWriteRequestMatchesRequestWrite(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		method := rapid.SampledFrom([]string{"", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}).Draw(rt, "method")
		host := rapid.SampledFrom([]string{"127.0.0.1:8080", "example.com", "[::1]:9000", "a-b.example:80"}).Draw(rt, "host")
		path := rapid.StringMatching(`(/([a-z0-9._~-]|%[0-9A-F]{2}){0,8}){0,3}(\?([a-z0-9=&]|%[0-9A-F]{2}){0,12})?`).Draw(rt, "path")
		body := rapid.SliceOfN(rapid.Byte(), 0, 5000).Draw(rt, "body")
		names := rapid.SliceOfN(rapid.SampledFrom([]string{"Upstash-Signature", "Content-Type", "X-Custom",
			"User-Agent", "Host", "Connection", "Upstash-Forward-A", "lower-case"}), 0, 6).Draw(rt, "names")
		values := rapid.SliceOfN(rapid.StringMatching(`[ -~\t]{0,40}`), len(names), len(names)).Draw(rt, "values")
		closeConn := rapid.Bool().Draw(rt, "close")
		mk := func() *http.Request {
			req, err := http.NewRequest(method, "http://"+host+path, bytes.NewReader(body))
			require.NoError(rt, err)
			for i, name := range names {
				req.Header[name] = append(req.Header[name], values[i])
			}
			req.Close = closeConn
			return req
		}
		fast, std := both(rt, mk)
		require.Equal(rt, readBack(rt, std), readBack(rt, fast), "fast:\n%s\nRequest.Write:\n%s", fast, std)
	})
}

func TestWriteRequestHandsOtherShapesToRequestWrite(t *testing.T) {
	// Unknown length (chunked), a Host other than the URL's, an IPv6 zone: Request.Write's
	// own output, byte for byte.
	cases := map[string]func() *http.Request{
		"unknown length": func() *http.Request {
			req, _ := http.NewRequest("POST", "http://example.com/x", io.NopCloser(strings.NewReader("abc")))
			return req
		},
		"other host": func() *http.Request {
			req, _ := http.NewRequest("POST", "http://127.0.0.1/x", strings.NewReader("abc"))
			req.Host = "example.com"
			return req
		},
		"zone": func() *http.Request {
			req, _ := http.NewRequest("GET", "http://[fe80::1%25eth0]:80/", nil)
			return req
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			fast, std := both(t, mk)
			require.Equal(t, string(std), string(fast))
		})
	}
}

func TestWriteRequestRefusesWhatRequestWriteRefuses(t *testing.T) {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)

	req, _ := http.NewRequest("POST", "http://example.com/", strings.NewReader("abc"))
	req.URL.RawQuery = "a=\x01"
	require.ErrorContains(t, writeRequest(bw, req), "control character")

	short, _ := http.NewRequest("POST", "http://example.com/", strings.NewReader("abc"))
	short.ContentLength = 5
	require.ErrorContains(t, writeRequest(bw, short), "ContentLength=5 with Body length 3")

	long, _ := http.NewRequest("POST", "http://example.com/", strings.NewReader("abcdef"))
	long.ContentLength = 3
	require.ErrorContains(t, writeRequest(bw, long), "longer body")
}
