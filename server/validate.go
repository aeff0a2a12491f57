package server

import (
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/duraton/duraton/sdk/wire"
)

// Limits of identifiers that arrive in paths.
const maxEventIDLen = 256

// validEventID checks an event id from a path: it becomes part of a storage key and of
// log lines, so it is bounded and printable.
func validEventID(id string) error {
	if id == "" || len(id) > maxEventIDLen || !utf8.ValidString(id) {
		return badRequest("eventId: want 1 to %d bytes of UTF-8, got %d bytes", maxEventIDLen, len(id))
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return badRequest("eventId: control characters are not allowed")
		}
	}
	return nil
}

// checkHeaderMap validates headers that arrive inside a JSON body (batch entries, wait
// timeouts), which Go's HTTP server has not checked: names are tokens, values are what
// the sender can send (wire.CheckHeaderValue). A bad one would otherwise be stored and
// fail every attempt.
func checkHeaderMap(where string, h http.Header) error {
	if where != "" {
		if err := checkHeaderMap("", h); err != nil {
			return prefixError(where, err)
		}
		return nil
	}
	for name, values := range h {
		if !isToken(name) {
			return badRequest("invalid header name %q", name)
		}
		if err := checkHeaderValues(values); err != nil {
			return badRequest("header %s: %v", name, err)
		}
	}
	return nil
}

// checkHeaderValues checks a header's values with the sender's rule and the length
// bound.
func checkHeaderValues(values []string) error {
	for _, v := range values {
		if len(v) > maxHeaderValueLen {
			return fmt.Errorf("value longer than %d bytes", maxHeaderValueLen)
		}
		if err := wire.CheckHeaderValue(v); err != nil {
			return err
		}
	}
	return nil
}

// headerCron is the header of a QStash schedule. Schedules are not built: a publish that
// carries it would silently become a one-off message.
const headerCron = "Upstash-Cron"
