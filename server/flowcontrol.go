package server

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
)

// flowControlHandlers serve flow-control management (docs/protocol.md, "Flow control").
type flowControlHandlers struct {
	engine interface {
		FlowKeys(project, search string) []delivery.FlowInfo
		FlowKey(project, key string) delivery.FlowInfo
		GlobalParallelism(project string) (max, count int)
		SetFlowKeyPaused(ctx context.Context, project, key string, paused bool) error
		PinFlowKey(ctx context.Context, project, key string, parallelism, rate int, period time.Duration) error
		UnpinFlowKey(ctx context.Context, project, key string, parallelism, rate bool) error
		ResetFlowKeyRate(ctx context.Context, project, key string) error
	}
}

func (h *flowControlHandlers) register(g *echo.Group) {
	g.GET("/flowControl", h.list)
	g.GET("/flowControl/:key", h.get)
	g.POST("/flowControl/:key/pause", h.pause)
	g.POST("/flowControl/:key/resume", h.resume)
	g.POST("/flowControl/:key/pin", h.pin)
	g.POST("/flowControl/:key/unpin", h.unpin)
	g.POST("/flowControl/:key/resetRate", h.resetRate)
	g.GET("/globalParallelism", h.global)
}

// toFlowControlInfo is FlowControlInfo of the QStash API: ratePeriod in seconds,
// ratePeriodStart in unix milliseconds (0 when the window is empty).
func toFlowControlInfo(i delivery.FlowInfo) wire.FlowControlInfo {
	v := wire.FlowControlInfo{
		Key: i.Key, WaitListSize: i.WaitListSize,
		ParallelismMax: i.ParallelismMax, ParallelismCount: i.ParallelismCount,
		RateMax: i.RateMax, RateCount: i.RateCount, RatePeriod: int64(i.RatePeriod / time.Second),
		IsPaused: i.Paused, IsPinnedParallelism: i.PinnedParallelism, IsPinnedRate: i.PinnedRate,
	}
	if !i.RatePeriodStart.IsZero() {
		v.RatePeriodStart = i.RatePeriodStart.UnixMilli()
	}
	return v
}

// flowKeyParam validates the key in the path (percent-escapes decoded).
func flowKeyParam(c echo.Context) (string, error) {
	key, err := url.PathUnescape(c.Param("key"))
	if err != nil {
		key = c.Param("key")
	}
	if err := flowctl.CheckKey(key); err != nil {
		return "", badRequest("flow-control key %q must match ^[a-zA-Z0-9\\-_.]+$ and be at most %d bytes", key, flowctl.MaxKeyLen)
	}
	return key, nil
}

// headerNextCursor carries the cursor of the next page of GET /v2/flowControl, whose body
// stays a bare array as in QStash.
const headerNextCursor = "Duraton-Next-Cursor"

// list answers one page of a project's active keys in key order: count (default and
// maximum 1,000) keys after cursor (the last key of the previous page).
func (h *flowControlHandlers) list(c echo.Context) error {
	count, err := parseCount(c, maxCount, maxCount)
	if err != nil {
		return err
	}
	cursor := c.QueryParam("cursor")
	infos := h.engine.FlowKeys(projectOf(c), c.QueryParam("search"))
	start := sort.Search(len(infos), func(i int) bool { return infos[i].Key > cursor })
	page := infos[start:min(start+count, len(infos))]
	out := make([]wire.FlowControlInfo, len(page))
	for i, info := range page {
		out[i] = toFlowControlInfo(info)
	}
	if start+count < len(infos) {
		c.Response().Header().Set(headerNextCursor, page[len(page)-1].Key)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *flowControlHandlers) get(c echo.Context) error {
	key, err := flowKeyParam(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toFlowControlInfo(h.engine.FlowKey(projectOf(c), key)))
}

func (h *flowControlHandlers) pause(c echo.Context) error  { return h.setPaused(c, true) }
func (h *flowControlHandlers) resume(c echo.Context) error { return h.setPaused(c, false) }

func (h *flowControlHandlers) setPaused(c echo.Context, paused bool) error {
	key, err := flowKeyParam(c)
	if err != nil {
		return err
	}
	if err := h.engine.SetFlowKeyPaused(c.Request().Context(), projectOf(c), key, paused); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// queryInt reads an optional non-negative integer query parameter.
func queryInt(c echo.Context, name string, max int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max {
		return 0, badRequest("%s: want an integer between 0 and %d, got %q", name, max, v)
	}
	return n, nil
}

func (h *flowControlHandlers) pin(c echo.Context) error {
	key, err := flowKeyParam(c)
	if err != nil {
		return err
	}
	parallelism, err := queryInt(c, "parallelism", flowctl.MaxParallelism)
	if err != nil {
		return err
	}
	rate, err := queryInt(c, "rate", flowctl.MaxRate)
	if err != nil {
		return err
	}
	period, err := queryInt(c, "period", int(flowctl.MaxPeriod/time.Second))
	if err != nil {
		return err
	}
	if parallelism == 0 && rate == 0 {
		return badRequest("pin needs parallelism or rate")
	}
	if err := h.engine.PinFlowKey(c.Request().Context(), projectOf(c), key, parallelism, rate, time.Duration(period)*time.Second); err != nil {
		return badRequest("%v", err)
	}
	return c.NoContent(http.StatusOK)
}

func (h *flowControlHandlers) unpin(c echo.Context) error {
	key, err := flowKeyParam(c)
	if err != nil {
		return err
	}
	flag := func(name string) (bool, error) {
		switch v := c.QueryParam(name); v {
		case "", "false":
			return false, nil
		case "true":
			return true, nil
		default:
			return false, badRequest("%s: want true or false, got %q", name, v)
		}
	}
	parallelism, err := flag("parallelism")
	if err != nil {
		return err
	}
	rate, err := flag("rate")
	if err != nil {
		return err
	}
	if err := h.engine.UnpinFlowKey(c.Request().Context(), projectOf(c), key, parallelism, rate); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

func (h *flowControlHandlers) resetRate(c echo.Context) error {
	key, err := flowKeyParam(c)
	if err != nil {
		return err
	}
	if err := h.engine.ResetFlowKeyRate(c.Request().Context(), projectOf(c), key); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

func (h *flowControlHandlers) global(c echo.Context) error {
	max, count := h.engine.GlobalParallelism(projectOf(c))
	return c.JSON(http.StatusOK, wire.GlobalParallelism{Max: max, Count: count})
}
