package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
)

// aiPrices serves GET /ai/prices: the AI price table in force (USD per million input and
// output tokens per model; {"models": {}} when none is configured).
func aiPrices(engine *delivery.Engine) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := engine.AIPrices()
		if p == nil {
			p = &flowctl.AIPrices{Models: map[string]flowctl.ModelPrice{}}
		}
		return c.JSON(http.StatusOK, p)
	}
}
