package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/flowctl"
)

// bulkBody is the body of POST /runs/cancel and POST /runs/replay: the filters of GET
// /runs, and what to do.
type bulkBody struct {
	native.RunSearch
	DryRun bool            `json:"dryRun"`
	All    bool            `json:"all"`
	Cursor string          `json:"cursor"`
	Limit  int             `json:"limit"`
	Cap    json.RawMessage `json:"cap"`
}

// maxBulkBody bounds a bulk request's body.
const maxBulkBody = 16 << 10

func (h *nativeHandlers) bulkCancel(c echo.Context) error {
	return h.bulk(c, false)
}

func (h *nativeHandlers) bulkReplay(c echo.Context) error {
	return h.bulk(c, true)
}

// bulk answers a bulk cancel or replay: {"matched", "done", "cursor"?}.
func (h *nativeHandlers) bulk(c echo.Context, replay bool) error {
	if err := h.enabled(); err != nil {
		return err
	}
	body, err := readBody(c, maxBulkBody)
	if err != nil {
		return err
	}
	var b bulkBody
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&b); err != nil {
		return badRequest("body: want a JSON object of filters (workflow, app, status, from, to, label, eventName, q) and dryRun, all, cursor, limit%s: %s",
			map[bool]string{true: ", cap", false: ""}[replay], err.Error())
	}
	req := native.BulkRequest{DryRun: b.DryRun, Limit: b.Limit}
	if req.Filter, err = b.Filter(); err != nil {
		return nativeError(err)
	}
	if req.Filter.Empty() && !b.All {
		return badRequest("all: a body without any filter acts on every run of the project: say \"all\": true")
	}
	if b.Limit < 0 || b.Limit > native.MaxBulkLimit {
		return badRequest("limit: want 1 to %d, got %d", native.MaxBulkLimit, b.Limit)
	}
	if req.After, err = parseRunCursor(b.Cursor); err != nil {
		return err
	}
	if len(b.Cap) > 0 {
		if !replay {
			return badRequest("cap: only a replay takes a cap")
		}
		ctl, err := flowctl.ParseControls(map[string]json.RawMessage{"cap": b.Cap})
		if err != nil {
			return badRequest("%s", err.Error())
		}
		if ctl.Cap == nil {
			return badRequest("cap: want {maxCost?, maxTokens?}")
		}
		req.Cap = ctl.Cap
	}
	do := h.native.CancelRuns
	if replay {
		do = h.native.ReplayRuns
	}
	res, err := do(c.Request().Context(), projectOf(c), req)
	if err != nil {
		return nativeError(err)
	}
	out := map[string]any{"matched": res.Matched, "done": res.Done}
	if res.Cursor != nil {
		out["cursor"] = formatRunCursor(res.Cursor)
	}
	return c.JSON(http.StatusOK, out)
}
