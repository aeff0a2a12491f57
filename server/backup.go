package server

import (
	"crypto/subtle"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// Backup writes a consistent snapshot of the data file: start gets its size before the
// first byte (storage.Store.Backup).
type Backup func(w io.Writer, start func(size int64)) (int64, error)

// backupHandlers serve GET /admin/backup: the whole data file (every project), so it
// needs the server's admin token, never a project's API token.
type backupHandlers struct {
	token  string // empty: backups are not enabled
	backup Backup
	log    interface {
		Error(msg string, args ...any)
	}
}

func (h *backupHandlers) register(e *echo.Echo) {
	e.GET("/admin/backup", h.get)
}

func (h *backupHandlers) get(c echo.Context) error {
	if h.token == "" {
		return notFound("backups are not enabled: start the server with --admin-token")
	}
	if h.backup == nil {
		return notFound("this server's store is not a bbolt file: back its database up with the database's own tools (PostgreSQL: base backups or pg_dump)")
	}
	want := []byte("Bearer " + h.token)
	if subtle.ConstantTimeCompare([]byte(c.Request().Header.Get("Authorization")), want) != 1 {
		return &apiError{status: http.StatusUnauthorized, msg: "backup: missing or wrong admin token"}
	}
	// A large file takes longer than the server's write timeout allows a response.
	if err := http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Time{}); err != nil {
		return err
	}
	w := c.Response()
	n, err := h.backup(w, func(size int64) {
		w.Header().Set(echo.HeaderContentType, "application/octet-stream")
		w.Header().Set(echo.HeaderContentLength, strconv.FormatInt(size, 10))
		w.Header().Set(echo.HeaderContentDisposition, `attachment; filename="duraton.db"`)
		w.WriteHeader(http.StatusOK)
	})
	if err != nil && !w.Committed {
		return err
	}
	if err != nil {
		// The status is sent: the client sees a short body (Content-Length) and refuses it.
		h.log.Error("backup stream failed", "written", n, "err", err)
	}
	return nil
}
