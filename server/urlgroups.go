package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/urlgroup"
)

// URLGroups is what the URL group routes and the fan-out of publish need.
type URLGroups interface {
	AddEndpoints(ctx context.Context, project, name string, eps []urlgroup.Endpoint) error
	RemoveEndpoints(ctx context.Context, project, name string, eps []urlgroup.Endpoint) error
	Get(ctx context.Context, project, name string) (*urlgroup.Group, error)
	List(ctx context.Context, project string) ([]urlgroup.Group, error)
	Delete(ctx context.Context, project, name string) error
}

var _ URLGroups = (*urlgroup.Groups)(nil)

// urlGroupHandlers serve QStash URL groups (/v2/topics).
type urlGroupHandlers struct {
	groups  URLGroups // nil: URL groups are not enabled in this server
	publish *publishHandlers
}

func (h *urlGroupHandlers) register(g *echo.Group) {
	g.POST("/topics/:name/endpoints", h.add)
	g.DELETE("/topics/:name/endpoints", h.remove)
	g.GET("/topics", h.list)
	g.GET("/topics/:name", h.get)
	g.DELETE("/topics/:name", h.delete)
}

// maxEndpointsBody caps the JSON of an endpoints request.
const maxEndpointsBody = 256 << 10

type endpointsRequest struct {
	Endpoints []urlgroup.Endpoint `json:"endpoints"`
}

type urlGroupView struct {
	Name      string              `json:"name"`
	CreatedAt int64               `json:"createdAt"`
	UpdatedAt int64               `json:"updatedAt"`
	Endpoints []urlgroup.Endpoint `json:"endpoints"`
}

func toURLGroupView(g *urlgroup.Group) urlGroupView {
	eps := g.Endpoints
	if eps == nil {
		eps = []urlgroup.Endpoint{}
	}
	return urlGroupView{Name: g.Name, CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt, Endpoints: eps}
}

func (h *urlGroupHandlers) enabled() error {
	if h.groups == nil {
		return notFound("URL groups are not enabled in this server")
	}
	return nil
}

func (h *urlGroupHandlers) endpoints(c echo.Context) ([]urlgroup.Endpoint, error) {
	raw, err := readBody(c, maxEndpointsBody)
	if err != nil {
		return nil, err
	}
	var req endpointsRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, badRequest("body must be {\"endpoints\": [{\"name\"?, \"url\"}]}: %v", err)
	}
	return req.Endpoints, nil
}

func (h *urlGroupHandlers) add(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	eps, err := h.endpoints(c)
	if err != nil {
		return err
	}
	p := h.publish.parser()
	for i := range eps {
		if eps[i].URL == "" {
			continue // the group names the missing url
		}
		if eps[i].URL, err = p.checkURL(fmt.Sprintf("endpoints[%d].url", i), eps[i].URL); err != nil {
			return err
		}
	}
	return h.answer(c, h.groups.AddEndpoints(c.Request().Context(), projectOf(c), c.Param("name"), eps))
}

func (h *urlGroupHandlers) remove(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	eps, err := h.endpoints(c)
	if err != nil {
		return err
	}
	// A URL is matched as add stored it (normalised by checkURL); one that does not pass
	// the check is matched as given, and so matches nothing added.
	p := h.publish.parser()
	for i := range eps {
		if u, err := p.checkURL("url", eps[i].URL); err == nil {
			eps[i].URL = u
		}
	}
	return h.answer(c, h.groups.RemoveEndpoints(c.Request().Context(), projectOf(c), c.Param("name"), eps))
}

func (h *urlGroupHandlers) list(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	list, err := h.groups.List(c.Request().Context(), projectOf(c))
	if err != nil {
		return err
	}
	out := make([]urlGroupView, len(list))
	for i := range list {
		out[i] = toURLGroupView(&list[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (h *urlGroupHandlers) get(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	g, err := h.groups.Get(c.Request().Context(), projectOf(c), c.Param("name"))
	if err != nil {
		return groupError(err)
	}
	return c.JSON(http.StatusOK, toURLGroupView(g))
}

func (h *urlGroupHandlers) delete(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	return h.answer(c, h.groups.Delete(c.Request().Context(), projectOf(c), c.Param("name")))
}

func (h *urlGroupHandlers) answer(c echo.Context, err error) error {
	if err != nil {
		return groupError(err)
	}
	return c.NoContent(http.StatusOK)
}

// groupError maps the URL group errors to their answers.
func groupError(err error) error {
	switch {
	case errors.Is(err, urlgroup.ErrInvalid):
		return badRequest("%v", err)
	case errors.Is(err, urlgroup.ErrLimit):
		return limitError("%v", err)
	case errors.Is(err, urlgroup.ErrNotFound), errors.Is(err, urlgroup.ErrEndpointNotFound):
		return notFound("%v", err)
	}
	return err
}

// isGroupDestination reports whether a publish destination names a URL group rather
// than a URL.
func isGroupDestination(dest string) bool {
	return !strings.Contains(dest, "://") && urlgroup.ValidName(dest)
}

// fanOut builds one publication per endpoint of the group name: each is an ordinary
// message to the endpoint's URL (own id, retries and logs) that remembers its group and
// endpoint. A deduplication id applies per endpoint.
func (h *publishHandlers) fanOut(c echo.Context, header http.Header, name string, body []byte, queue string) ([]delivery.Publication, error) {
	g, err := h.groups.Get(c.Request().Context(), projectOf(c), name)
	if err != nil {
		return nil, groupError(err)
	}
	if len(g.Endpoints) == 0 {
		return nil, badRequest("URL group %q has no endpoints", name)
	}
	pubs := make([]delivery.Publication, 0, len(g.Endpoints))
	for _, ep := range g.Endpoints {
		pub, err := h.message(c, header, ep.URL, body, queue)
		if err != nil {
			return nil, err
		}
		m := pub.Message
		if pub.Init != nil || m.RunID != "" {
			return nil, badRequest("workflow messages cannot be published to a URL group")
		}
		m.TopicName, m.EndpointName = name, ep.Name
		if strings.HasPrefix(m.DedupID, "id:") {
			m.DedupID += "\x00" + ep.URL
		}
		pubs = append(pubs, pub)
	}
	return pubs, nil
}
