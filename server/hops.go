package server

import (
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/sdk/wire"
)

const ctxHops = "duraton.hops"

// hopLimit reads the Duraton-Hops header a request carries when it is itself a Duraton
// delivery: at max hops (or with a malformed count) it is refused, otherwise the count is
// kept for the messages the request publishes (hopsOf).
func hopLimit(max int) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			v := strings.TrimSpace(c.Request().Header.Get(wire.HeaderHops))
			if v == "" {
				return next(c)
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return headerError(wire.HeaderHops, "want a non-negative integer, got %q", v)
			}
			if n >= max {
				return headerError(wire.HeaderHops, "this request descends from %d Duraton deliveries, the limit is %d: refusing a delivery loop", n, max)
			}
			c.Set(ctxHops, n)
			return next(c)
		}
	}
}

// hopsOf is the hop count of the request (0 for one that is no Duraton delivery).
func hopsOf(c echo.Context) int {
	n, _ := c.Get(ctxHops).(int)
	return n
}
