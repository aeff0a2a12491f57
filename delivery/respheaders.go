package delivery

import (
	"maps"
	"net/http"
	"sort"
	"strings"
)

// Limits of an endpoint's response headers as they are stored (logs, DLQ, callbacks): an
// endpoint may answer with megabytes of headers, and every stored copy would repeat them.
const (
	// MaxStoredResponseHeaders caps the header names kept of one answer.
	MaxStoredResponseHeaders = 64
	// MaxStoredResponseHeaderBytes caps their summed size (names and values).
	MaxStoredResponseHeaderBytes = 16 << 10
)

// keptResponseHeader is the part of an answer's headers that is stored: all of them as
// received, Content-Length and the other hop-by-hop headers too (they are reported, not
// forwarded: the SDK's failure function reads failHeaders["Content-Length"]), within the
// count and byte limits; over them the protocol's Upstash-* headers first (the SDK
// detection reads them), then the others by name, each whole or not at all.
func keptResponseHeader(header http.Header) http.Header {
	if kept, ok := keptWhole(header); ok {
		return kept
	}
	return keptByPriority(header)
}

// keptByPriority is keptResponseHeader of an answer over the limits.
func keptByPriority(header http.Header) http.Header {
	names := make([]string, 0, len(header))
	for name := range header {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		pi, pj := isProtocolHeader(names[i]), isProtocolHeader(names[j])
		if pi != pj {
			return pi
		}
		return names[i] < names[j]
	})
	kept := make(http.Header, min(len(names), MaxStoredResponseHeaders))
	size := 0
	for _, name := range names {
		if len(kept) == MaxStoredResponseHeaders {
			break
		}
		n := len(name)
		for _, v := range header[name] {
			n += len(v)
		}
		if size+n > MaxStoredResponseHeaderBytes {
			continue // a smaller header further on may still fit
		}
		size += n
		kept[name] = header[name]
	}
	return kept
}

// keptWhole is keptResponseHeader of an answer whose headers all fit the limits (every
// answer but a few): all of them, with no ordering to decide what is dropped. ok is
// false when they do not fit.
func keptWhole(header http.Header) (_ http.Header, ok bool) {
	if len(header) > MaxStoredResponseHeaders {
		return nil, false
	}
	size := 0
	for name, values := range header {
		size += len(name)
		for _, v := range values {
			size += len(v)
		}
	}
	if size > MaxStoredResponseHeaderBytes {
		return nil, false
	}
	return maps.Clone(header), true // the values are shared: stored records only read them
}

func isProtocolHeader(name string) bool {
	return len(name) >= 8 && strings.EqualFold(name[:8], "upstash-")
}
