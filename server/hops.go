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

// noFanOutFromDelivery refuses a request that is itself a Duraton delivery (it carries
// Duraton-Hops) when it would create more than one message: to a URL group, or n > 1
// messages of a batch. The hop limit bounds how deep a chain of deliveries that come back
// to the API can go, not how wide: a group whose endpoints lead back to its own publish
// (through a proxy or another replica) would multiply by its size at every hop. One
// message per hop keeps the work of one outside request at the group's size times the
// hop limit, at most.
func noFanOutFromDelivery(c echo.Context, what string, n int) error {
	if hops := hopsOf(c); hops > 0 && n != 1 {
		return headerError(wire.HeaderHops, "this request descends from %d Duraton deliveries and may create one message, not %s: a Duraton delivery that publishes to a URL group or a batch again could multiply without bound; publish to each endpoint directly", hops, what)
	}
	return nil
}
