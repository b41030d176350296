// Package server owns the HTTP API on echo v4: the route table (which also
// generates the reference and the OpenAPI document), the middleware that
// gives every answer a request id, a size-limited body and the error
// envelope (and STORE_UNAVAILABLE while the node's store catches up),
// Idempotency-Key replay, and thin handlers that bind a request, call a
// service and return. It routes the console's pages and files to the
// console's handler (Deps.Console), which it does not look into.
//
// It must not hold business rules, build store commands, or talk to any
// adapter: it reaches services through the small interfaces declared in this
// package. It is the only package that imports echo.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/clientip"
	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/idempotency"
	"github.com/svchost/svc/internal/operator"
	"github.com/svchost/svc/raftstore"
)

// The services the server calls, declared where they are used.
type (
	operatorService interface {
		Status(withDigest bool) (operator.RaftStatus, error)
		WriteProbe(ctx context.Context, payloadBytes int) (operator.ProbeResult, error)
		Probe(id string) (operator.Probe, raftstore.Meta, error)
		Probes(after string, limit int) ([]operator.Probe, bool)
		RecordRestart(ctx context.Context) error
	}
	// historyVerifier checks the node's hash-chained history store.
	historyVerifier interface {
		VerifyHistory(ctx context.Context) (raftstore.HistoryReport, error)
	}
	idempotencyService interface {
		Begin(ctx context.Context, id, requestHash string) (*idempotency.Record, *idempotency.Reservation, error)
		Complete(ctx context.Context, res *idempotency.Reservation, status int, contentType, location string, body []byte) error
		Release(ctx context.Context, res *idempotency.Reservation) error
	}
	requestObserver interface {
		ObserveRequest(route, method string, status int, d time.Duration)
	}
	// readiness reports whether this node can serve: it knows a leader,
	// and its store has caught up with the cluster (else a retryable
	// STORE_UNAVAILABLE saying why).
	readiness interface {
		Leader() (id, addr string)
		CaughtUp() error
	}
)

// CommandRef describes one CLI command for the reference.
type CommandRef struct {
	Command string `json:"command"`
	Summary string `json:"summary"`
	Usage   string `json:"usage"`
	// Endpoints are the endpoints the command calls ("POST /api/v1/apps").
	Endpoints []string `json:"endpoints,omitempty"`
}

// Deps are the server's collaborators.
type Deps struct {
	Logger   *slog.Logger
	Version  string
	Config   *config.Config
	Identity identityService
	// Sharing manages app grants, principal searches and passcodes.
	Sharing   sharingService
	Policy    policyService
	Apps      appsService
	Launcher  launcherService
	Detection detectionService
	Plans     plansService
	Icons     iconsService
	Secrets   secretsService
	Sources   sourcesService
	Specs     specsService
	Slots     slotsService
	Volumes   volumesService
	// Security answers and starts apps' security scans.
	Security securityService
	// Deleter deletes apps with the decision about their volumes' data
	// (a final backup first, with backup=true).
	Deleter appDeleter
	// Backups takes, lists, verifies and restores backups.
	Backups backupsAll
	// Subscriptions manages event subscriptions and their delivery logs.
	Subscriptions subscriptionsAll
	Adapters      adaptersService
	Keyring       keyringService
	// EdgeKeys are the keys that sign the edge's assertions: the JWKS and
	// their rotation.
	EdgeKeys edgeKeysService
	// The scheduler's parts: deploys and their approvals and logs, control
	// of running apps, their workloads, and the host's capacity.
	Deploys    deploysService
	Approvals  approvalsService
	DeployLogs deployLogsService
	AppControl appControlService
	Workloads  workloadsService
	Capacity   capacityService
	// Facts reads the state authorization decisions are made on.
	Facts       factsSource
	Operator    operatorService
	History     historyVerifier
	Idempotency idempotencyService
	Ready       readiness
	Metrics     requestObserver
	// MetricsHandler serves /metrics.
	MetricsHandler http.Handler
	// Commands are the CLI's commands, for the reference.
	Commands []CommandRef
	// Tools are the tool server's tools, for the reference.
	Tools []ToolRef
	// MCP, when set, makes the tool server's streamable HTTP handler
	// served at /mcp from the API's own handler (the tools call the API in
	// process with the caller's token); nil: /mcp answers NOT_FOUND.
	MCP func(api http.Handler) (http.Handler, error)
	// StartedAt is when this server's generation of the process started
	// (now when zero); it changes with every restart.
	StartedAt time.Time
	// Front, when set, wraps the API on the listener: the edge takes the
	// requests for apps (subdomain and path routing) and passes the rest
	// on to api. Nil serves the API alone.
	Front func(api http.Handler) http.Handler
	// AppURLs says where apps are served, for the App's url field; nil
	// leaves it null.
	AppURLs appAddresser
	// Handoff signs browsers in to apps on the apps' own origins (the
	// edge); nil: the handoff endpoint answers NOT_FOUND.
	Handoff handoffService
	// Console serves the web console (package console) at its page paths
	// and /assets/ on the main listener; nil: those paths answer NOT_FOUND.
	Console http.Handler
	// Restart asks the process to restart the server in place. It must
	// return at once (the restart drains this server, the asking request
	// included), and a call while a restart is pending must do nothing.
	// Nil when restarting is not available: the request is recorded and
	// answered, and nothing restarts.
	Restart func()
	// Upgrades takes a new binary and upgrades the process in place
	// (POST /api/v1/upgrade); nil: the upgrade endpoints answer NOT_FOUND.
	Upgrades upgrader
}

// Server is the HTTP API.
type Server struct {
	d    Deps
	log  *slog.Logger
	echo *echo.Echo
	cop  *http.CrossOriginProtection
	// handler is what the listener serves: the API, behind Front if set.
	handler http.Handler
	// mcp serves the tool server at /mcp; nil when there is none.
	mcp    http.Handler
	routes []route
	// stateless are the paths of the routes that read no replicated state,
	// answered while the store catches up (caughtUp).
	stateless map[string]bool
	// closing is closed when the server shuts down: connections taken over
	// from net/http (terminals) end with it, as Shutdown does not see them.
	closing     chan struct{}
	closingOnce sync.Once
}

// New builds the API with its routes.
func New(d Deps) (*Server, error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.StartedAt.IsZero() {
		d.StartedAt = time.Now().UTC()
	}
	if d.Config == nil || d.Identity == nil || d.Policy == nil || d.Facts == nil || d.Operator == nil || d.History == nil || d.Idempotency == nil || d.Ready == nil || d.Metrics == nil || d.MetricsHandler == nil {
		return nil, errors.New("server: missing dependencies")
	}
	s := &Server{d: d, log: d.Logger, echo: echo.New(), cop: http.NewCrossOriginProtection(), stateless: map[string]bool{}, closing: make(chan struct{})}
	if u := d.Config.Server.ExternalURL; u != "" {
		if err := s.cop.AddTrustedOrigin(strings.TrimRight(u, "/")); err != nil {
			return nil, fmt.Errorf("server: external URL as a trusted origin: %w", err)
		}
	}
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	// Throttling is keyed by the client's address: the connection's peer,
	// or what a trusted proxy says in X-Forwarded-For (internal/clientip);
	// a client cannot choose its own.
	e.IPExtractor = clientip.New(d.Config.Server.TrustedProxies).ClientIP
	e.Use(s.requestID, s.observe, s.recoverPanic, s.caughtUp, s.authenticate)
	for _, r := range s.routeTable() {
		if err := s.register(r); err != nil {
			return nil, err
		}
	}
	s.handler = e
	if d.MCP != nil {
		h, err := d.MCP(e)
		if err != nil {
			return nil, fmt.Errorf("server: the tool server: %w", err)
		}
		s.mcp = h
	}
	if d.Front != nil {
		s.handler = d.Front(e)
	}
	return s, nil
}

// Handler returns what the listener serves: the API, behind the edge when
// Deps.Front is set.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers requests on ln until ctx ends, then stops accepting, lets
// requests in flight finish for up to drain, and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	var fresh newConns
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState:         fresh.track,
	}
	srv.RegisterOnShutdown(func() { s.closingOnce.Do(func() { close(s.closing) }) })
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down: finishing requests in flight", "drain", drain)
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	// http.Server's Shutdown drops a connection it accepted but whose
	// request it has not read yet: the client sees the connection close
	// without an answer. Stop accepting first, and give such connections
	// a moment to send their request, which then finishes like any other.
	_ = ln.Close()
	fresh.wait(sctx, time.Second)
	// Shutdown closes the listener again if Serve has not returned yet: the
	// listener being closed already (above) is no failure. It still waits
	// for the requests in flight before it returns that error.
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, net.ErrClosed) {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	// Serve may have returned from the listener closed above before
	// Shutdown marked the server closed.
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// access says who may call a route.
type access int

const (
	accessSignedIn access = iota // any signed-in caller (the spec's blank verb)
	accessPublic                 // no credential
	accessVerb                   // a caller holding the route's verb
	// accessSelf routes need the verb only when the caller acts on what is
	// not its own (its account, its token); the service decides.
	accessSelf
	// accessOpen routes are for whoever may open the app (a data-plane
	// grant) or holds any verb on it.
	accessOpen
)

func (a access) String() string {
	switch a {
	case accessPublic:
		return "public"
	case accessVerb:
		return "verb"
	case accessSelf:
		return "verb_unless_own"
	case accessOpen:
		return "can_open_or_any_verb"
	}
	return "signed_in"
}

// register adds a route to echo, wrapped in its own middleware.
func (s *Server) register(r route) error {
	if err := checkOp(r); err != nil {
		return err
	}
	if (r.verb != "") != (r.access == accessVerb || r.access == accessSelf) {
		return fmt.Errorf("route %s %s: access %s and verb %q disagree", r.method, r.path, r.access, r.verb)
	}
	if (r.method == http.MethodGet && answersList(r.response)) != (r.paging != unpaged) {
		return fmt.Errorf("route %s %s: a list answer pages (limit and cursor), and only a list answer does", r.method, r.path)
	}
	h := r.handler
	if r.idempotent {
		h = s.idempotent(h)
	}
	limit := r.bodyLimit
	if limit == 0 {
		limit = defaultBodyLimit
	}
	h = limitBody(limit, r.bodyTooLarge, s.authorize(r, h))
	s.echo.Add(r.method, echoPath(r.path), h)
	if r.stateless {
		s.stateless[echoPath(r.path)] = true
	}
	s.routes = append(s.routes, r)
	return nil
}

// echoPath turns the specification's {name} parameters into echo's :name,
// and a last {name...} (the rest of the path) into echo's *.
func echoPath(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if strings.HasPrefix(part, "{") && strings.HasSuffix(part, "...}") && i == len(parts)-1 {
			parts[i] = "*"
		} else if strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}") {
			parts[i] = ":" + part[1:len(part)-1]
		}
	}
	return strings.Join(parts, "/")
}

// newConns counts the connections accepted whose first request has not
// been read yet.
type newConns struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func (n *newConns) track(c net.Conn, st http.ConnState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conns == nil {
		n.conns = map[net.Conn]bool{}
	}
	if st == http.StateNew {
		n.conns[c] = true
	} else {
		delete(n.conns, c)
	}
}

// wait returns once no new connection is waiting to be read, after at most
// limit.
func (n *newConns) wait(ctx context.Context, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n.mu.Lock()
		waiting := len(n.conns)
		n.mu.Unlock()
		if waiting == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
