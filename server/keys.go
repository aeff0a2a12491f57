package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
)

// keyHandlers serve the project's signing keys.
type keyHandlers struct {
	engine interface {
		Project(ctx context.Context, id string) (*delivery.Project, error)
		RotateKeys(ctx context.Context, project string) (*delivery.Project, error)
	}
}

func (h *keyHandlers) register(g *echo.Group) {
	g.GET("/keys", h.get)
	g.POST("/keys/rotate", h.rotate)
}

type keysResponse struct {
	Current string `json:"current"`
	Next    string `json:"next"`
}

func (h *keyHandlers) get(c echo.Context) error {
	p, err := h.engine.Project(c.Request().Context(), projectOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keysResponse{Current: p.CurrentSigningKey, Next: p.NextSigningKey})
}

func (h *keyHandlers) rotate(c echo.Context) error {
	p, err := h.engine.RotateKeys(c.Request().Context(), projectOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keysResponse{Current: p.CurrentSigningKey, Next: p.NextSigningKey})
}
