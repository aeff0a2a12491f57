package h1

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// writeRequest writes req as (*http.Request).Write would, for the requests deliveries
// make: a Host from the URL, a body of known length, no trailers and no transfer
// coding. It costs a fraction of Request.Write (no fmt, no sorting, no transfer writer);
// any other request is written by Request.Write. It closes req.Body, as Write does.
// writeRequest_test.go checks the two write the same request.
func writeRequest(bw *bufio.Writer, req *http.Request) error {
	host, ok := plainHost(req)
	if !ok || req.TransferEncoding != nil || req.Trailer != nil || req.ContentLength < 0 ||
		(req.ContentLength > 0) != (req.Body != nil && req.Body != http.NoBody) {
		return req.Write(bw)
	}
	ruri := req.URL.RequestURI()
	if !printable(ruri) {
		closeBody(req)
		return errors.New("h1: can't write control character in Request.URL")
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(ruri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	userAgent := "Go-http-client/1.1"
	if _, set := req.Header["User-Agent"]; set {
		userAgent = req.Header.Get("User-Agent")
	}
	if userAgent != "" { // tested before trimming, as Request.Write does
		writeField(bw, "User-Agent", textproto.TrimString(userAgent))
	}
	if req.Close && !httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close") {
		bw.WriteString("Connection: close\r\n")
	}
	// Request.Write sends a zero length for these methods only.
	if req.ContentLength > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.FormatInt(req.ContentLength, 10))
		bw.WriteString("\r\n")
	}
	for name, values := range req.Header {
		switch name {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // written above from the request's fields, as Request.Write does
		}
		for _, v := range values {
			writeField(bw, name, textproto.TrimString(v))
		}
	}
	bw.WriteString("\r\n")
	if req.ContentLength == 0 {
		closeBody(req)
		return nil
	}
	n, err := io.Copy(bw, io.LimitReader(req.Body, req.ContentLength))
	if err == nil && n == req.ContentLength {
		// A body longer than its declared length is an error, as in Request.Write.
		var extra [1]byte
		if m, _ := req.Body.Read(extra[:]); m > 0 {
			err = fmt.Errorf("h1: ContentLength=%d with a longer body", req.ContentLength)
		}
	}
	if closeErr := req.Body.Close(); err == nil {
		err = closeErr
	}
	if err == nil && n != req.ContentLength {
		err = fmt.Errorf("h1: ContentLength=%d with Body length %d", req.ContentLength, n)
	}
	return err
}

func writeField(bw *bufio.Writer, name, value string) {
	bw.WriteString(name)
	bw.WriteString(": ")
	bw.WriteString(value)
	bw.WriteString("\r\n")
}

// plainHost is the Host of a request that names no other host than its URL's: printable
// ASCII without an IPv6 zone, which Request.Write would send unchanged.
func plainHost(req *http.Request) (string, bool) {
	host := req.URL.Host
	if req.Host != "" && req.Host != host {
		return "", false
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c == '%' || c <= ' ' || c >= 0x7f {
			return "", false
		}
	}
	return host, host != "" && httpguts.ValidHostHeader(host)
}

// printable reports whether s has no control character (nor DEL), as Request.Write
// checks a request URI.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
