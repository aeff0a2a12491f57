package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// specPath turns an echo route path into its OpenAPI form: ":x" → "{x}", and the
// trailing wildcard of publish and enqueue → "{destination}". The schedule's create route
// shares its template with the schedule's id routes: OpenAPI cannot tell two templates
// of the same shape apart.
func specPath(echoPath string) string {
	if echoPath == "/v2/schedules/*" {
		return "/v2/schedules/{id}"
	}
	parts := strings.Split(echoPath, "/")
	for i, p := range parts {
		switch {
		case strings.HasPrefix(p, ":"):
			parts[i] = "{" + p[1:] + "}"
		case p == "*" && i == len(parts)-1:
			parts[i] = "{destination}"
		}
	}
	return strings.Join(parts, "/")
}

func TestSpecPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/v2/publish/*":          "/v2/publish/{destination}",
		"/v2/enqueue/:queue/*":   "/v2/enqueue/{queue}/{destination}",
		"/v2/messages/:id":       "/v2/messages/{id}",
		"/v2/queues/:name/pause": "/v2/queues/{name}/pause",
		"/healthz":               "/healthz",
		"/v2/schedules/*":        "/v2/schedules/{id}",
	} {
		require.Equal(t, want, specPath(in), in)
	}
}

// TestOpenAPIMatchesRoutes fails on every route the server registers that openapi.yaml
// does not describe, and on every operation of openapi.yaml the server does not serve.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	env := newAPI(t, envOptions{})

	served := map[string]bool{}
	for _, r := range env.Server.Routes() {
		method, path, ok := strings.Cut(r, " ")
		require.True(t, ok, "route %q", r)
		if method == "echo_route_not_found" {
			continue // echo's catch-all behind group middleware, not an API route
		}
		if path == "/console" || strings.HasPrefix(path, "/console/") {
			continue // the browser console's HTML pages and forms: not part of the API contract
		}
		served[method+" "+specPath(path)] = true
	}
	require.NotEmpty(t, served)

	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}

	var missingInSpec, missingInServer []string
	for op := range served {
		if !documented[op] {
			missingInSpec = append(missingInSpec, op)
		}
	}
	for op := range documented {
		if !served[op] {
			missingInServer = append(missingInServer, op)
		}
	}
	slices.Sort(missingInSpec)
	slices.Sort(missingInServer)
	if len(missingInSpec) > 0 {
		t.Errorf("routes the server registers but openapi.yaml does not describe:\n  %s", strings.Join(missingInSpec, "\n  "))
	}
	if len(missingInServer) > 0 {
		t.Errorf("operations openapi.yaml describes but the server does not register:\n  %s", strings.Join(missingInServer, "\n  "))
	}
}

// TestOpenAPIErrorResponses checks that every documented 4xx and 5xx answer uses the
// shared Error schema, and that every /v2 operation documents 401 and 500.
func TestOpenAPIErrorResponses(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	errSchema := doc.Components.Schemas["Error"]
	require.NotNil(t, errSchema, "components.schemas.Error")
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			for code, ref := range op.Responses.Map() {
				if code < "400" {
					continue
				}
				media := ref.Value.Content.Get("application/json")
				require.NotNil(t, media, "%s %s: no application/json content", name, code)
				require.Same(t, errSchema.Value, media.Schema.Value, "%s %s: not the Error schema", name, code)
			}
			// The native API (tag native) sits at root paths with the project's token too.
			if strings.HasPrefix(path, "/v2/") || slices.Contains(op.Tags, "native") {
				require.NotNil(t, op.Responses.Status(http.StatusUnauthorized), "%s: no 401", name)
				require.True(t, op.Security == nil || len(*op.Security) > 0, "%s: must not opt out of auth", name)
			} else {
				require.NotNil(t, op.Security, "%s: unauthenticated routes say security: []", name)
				require.Empty(t, *op.Security, "%s", name)
			}
			require.NotNil(t, op.Responses.Status(http.StatusInternalServerError), "%s: no 500", name)
		}
	}
}
