package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/operator"
)

// route is one endpoint. The table below registers the routes, and the
// reference and the OpenAPI document are generated from the same table, so
// they describe exactly what the binary serves.
type route struct {
	method  string
	path    string // the specification's syntax: /api/v1/apps/{appID}
	access  access
	verb    authz.Verb
	summary string
	handler echo.HandlerFunc
	// idempotent routes honour Idempotency-Key.
	idempotent bool
	// bodyLimit overrides the default request body cap.
	bodyLimit int64
	// request and response are zero values of the body types, for the
	// OpenAPI document; status is the success status.
	request  any
	response any
	status   int
	// operational endpoints live outside the API's base path.
	operational bool
}

const basePath = "/api/v1"

// routeTable lists every endpoint the server answers. One line per route.
func (s *Server) routeTable() []route {
	return []route{
		{method: http.MethodGet, path: basePath + "/setup", access: accessPublic, summary: "Says whether the installation waits for its first administrator", handler: s.getSetup, response: setupStatusDTO{}},
		{method: http.MethodGet, path: basePath + "/config", access: accessVerb, verb: authz.InstallView, summary: "Startup configuration: every non-secret setting with value and origin, and the policy fields fixed at startup", handler: s.getConfig, response: configDTO{}},
		{method: http.MethodGet, path: basePath + "/reference", access: accessSignedIn, summary: "Generated reference of endpoints, CLI commands, tool names and error codes", handler: s.getReference, response: referenceDTO{}},
		{method: http.MethodGet, path: basePath + "/openapi.json", access: accessSignedIn, summary: "OpenAPI 3.1 document of the API", handler: s.getOpenAPI, response: map[string]any{}},
		{method: http.MethodGet, path: basePath + "/operator/raft", access: accessVerb, verb: authz.InstallView, summary: "The replicated store as this node sees it; digest=true adds a hash of the whole state", handler: s.getRaft, response: raftStatusDTO{}},
		{method: http.MethodPost, path: basePath + "/operator/raft/probes", access: accessVerb, verb: authz.InstallAdaptersMgmt, summary: "Write a probe through the replicated write path and time its commit", handler: s.postProbe, request: probeRequestDTO{}, response: probeResultDTO{}, status: http.StatusCreated},
		{method: http.MethodGet, path: basePath + "/operator/raft/probes", access: accessVerb, verb: authz.InstallView, summary: "Probes this node holds, oldest first; paged with limit and cursor", handler: s.listProbes, response: list[operator.Probe]{}},
		{method: http.MethodGet, path: basePath + "/operator/raft/probes/{probeID}", access: accessVerb, verb: authz.InstallView, summary: "A probe as this node's state holds it", handler: s.getProbe, response: probeDTO{}},
		{method: http.MethodGet, path: "/healthz", access: accessPublic, summary: "Liveness: the process answers", handler: s.getHealth, response: healthDTO{}, operational: true},
		{method: http.MethodGet, path: "/readyz", access: accessPublic, summary: "Readiness: this node knows a leader of the replicated store", handler: s.getReady, response: healthDTO{}, operational: true},
		{method: http.MethodGet, path: "/metrics", access: accessPublic, summary: "Prometheus metrics", handler: echo.WrapHandler(s.d.MetricsHandler), operational: true},
	}
}
