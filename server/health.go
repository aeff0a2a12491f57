package server

import (
	"net/http"
	"sync/atomic"

	"github.com/labstack/echo/v4"
)

// healthHandlers serve the probes. Neither needs a token nor says anything about the
// data: liveness is "the process answers HTTP", readiness is "the store is open, the
// dispatcher runs and the server is not shutting down".
type healthHandlers struct {
	engine interface {
		Ready() error
	}
	draining *atomic.Bool // set by Server.Shutdown before it stops the listener
}

func (h *healthHandlers) register(e *echo.Echo) {
	e.GET("/healthz", h.live)
	e.GET("/readyz", h.ready)
}

type statusBody struct {
	Status string `json:"status"`
}

func (h *healthHandlers) live(c echo.Context) error {
	return c.JSON(http.StatusOK, statusBody{Status: "ok"})
}

func (h *healthHandlers) ready(c echo.Context) error {
	if h.draining.Load() {
		return &apiError{status: http.StatusServiceUnavailable, msg: "not ready: server shutting down"}
	}
	if err := h.engine.Ready(); err != nil {
		return &apiError{status: http.StatusServiceUnavailable, msg: "not ready: " + err.Error()}
	}
	return c.JSON(http.StatusOK, statusBody{Status: "ready"})
}
