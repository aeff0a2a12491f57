package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// apiError is an error with the HTTP status it answers with. Its message is safe to show
// to the caller.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

// limitError is a request beyond one of the server's limits. 412 is what the official workflow
// SDK turns into a non-retryable error (docs/protocol.md, "Where QStash's behaviour is not
// obvious").
func limitError(format string, args ...any) error {
	return &apiError{status: http.StatusPreconditionFailed, msg: fmt.Sprintf(format, args...)}
}

// errorHandler is the one place that maps errors to HTTP answers.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		status, msg := http.StatusInternalServerError, "internal error"
		var api *apiError
		var he *echo.HTTPError
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &api):
			status, msg = api.status, api.msg
		case errors.As(err, &tooLarge):
			status, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds the limit of %d bytes", tooLarge.Limit)
		case errors.Is(err, delivery.ErrStoreUnavailable):
			// Nothing was stored: the caller may retry (the SDKs retry 5xx).
			log.Warn("store refuses writes", "method", c.Request().Method, "path", c.Path(), "err", err)
			c.Response().Header().Set("Retry-After", "5")
			status, msg = http.StatusServiceUnavailable, "the server cannot store data right now (disk full or I/O error); nothing was stored, retry later"
		case errors.Is(err, delivery.ErrQueueNotFound):
			status, msg = http.StatusNotFound, err.Error()
		case errors.Is(err, delivery.ErrRunEnded), errors.Is(err, delivery.ErrRunNotFound) && submitsStep(c):
			// 400 tells the workflow SDK the run is over: it stops quietly (docs/protocol.md, "Where
			// QStash's behaviour is not obvious").
			status, msg = http.StatusBadRequest, err.Error()
		case errors.Is(err, delivery.ErrRunNotFound):
			status, msg = http.StatusNotFound, err.Error()
		case errors.Is(err, delivery.ErrBadStep), errors.Is(err, delivery.ErrWaitCondition):
			status, msg = http.StatusBadRequest, err.Error()
		case errors.Is(err, delivery.ErrRunLimit), errors.Is(err, delivery.ErrQueueLimit), errors.Is(err, delivery.ErrFlowKeyLimit):
			status, msg = http.StatusPreconditionFailed, err.Error()
		case errors.Is(err, delivery.ErrNotFound):
			status, msg = http.StatusNotFound, "not found"
		case errors.As(err, &he):
			status, msg = he.Code, fmt.Sprint(he.Message)
		default:
			log.Error("request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
		}
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(status)
			return
		}
		// No trailing newline: the SDKs show the body as the error's message, and QStash's
		// ends with the JSON (qstash-js's tests compare the whole message).
		body, _ := json.Marshal(wire.ErrorBody{Error: msg}) // a struct of one string: it cannot fail
		_ = c.Blob(status, echo.MIMEApplicationJSON, body)
	}
}

// submitsStep reports whether the request submits a workflow step (publish, batch,
// enqueue, wait): for those an unknown run is a 400, which the SDK reads as "stop".
func submitsStep(c echo.Context) bool {
	for _, p := range []string{"/v2/publish/", "/v2/batch", "/v2/enqueue/", "/v2/wait/"} {
		if strings.HasPrefix(c.Request().URL.Path, p) {
			return true
		}
	}
	return false
}
