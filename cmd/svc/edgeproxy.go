package main

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/backups"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/idle"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

// Route feeding: how often the in-process route table is rebuilt from what
// the scheduler runs when nothing in the store says it changed (a
// workload's health and address live in the runtime, not the store), and
// the least time between two rebuilds when the store keeps changing.
const (
	routeFeedInterval = 500 * time.Millisecond
	routeFeedMinGap   = 50 * time.Millisecond
)

// The implementations cmd/svc plugs into the edge: the keys' signer and
// the sharing service's passcode admissions (identity cannot name the
// edge's interface: the edge imports identity).
var (
	_ edge.Signer    = (*edge.JWTSigner)(nil)
	_ edge.Passcodes = (*identity.Sharing)(nil)
)

// The implementations cmd/svc plugs into idle apps (internal/idle): the
// edge's stamps, the scheduler's releases and stop, the backups service's
// deletion (the scheduler and volumes import idle).
var (
	_ idle.Stamps   = (*edge.Proxy)(nil)
	_ idle.Releases = (*scheduler.Service)(nil)
	_ idle.Stopper  = (*scheduler.Service)(nil)
	_ idle.Deleter  = (*backups.Service)(nil)
)

// edgeParts are the services the edge is built over.
type edgeParts struct {
	store     *raftstore.Store
	ident     *identity.Service
	pol       *policy.Service
	sched     *scheduler.Service
	adapters  *adapters.Service
	signer    edge.Signer
	passcodes edge.Passcodes
}

// buildEdgeProxy wires the edge for one generation: the in-process route
// table fed from the scheduler, the proxy over identity (bearer tokens,
// and the app sessions browsers get through the handoff), the signer and
// the passcode admissions, and in port mode a listener per app port. The
// server puts the proxy in front of the API (subdomain and path modes) and
// asks it for the apps' url. Everything it starts ends with ctx or when
// the generation closes.
func buildEdgeProxy(ctx context.Context, rt *runtime, gen *generation, parts edgeParts) (*edge.Proxy, error) {
	cfg := gen.cfg
	consolePort := 0
	if a, ok := gen.mainAddr.(*net.TCPAddr); ok {
		consolePort = a.Port
	}
	table := edge.NewTable()
	proxy, err := edge.New(edge.Config{
		Mode:          cfg.Server.RoutingMode,
		BaseDomain:    cfg.Server.BaseDomain,
		AppsDomain:    cfg.Server.AppsDomain,
		ExternalURL:   cfg.Server.ExternalURL,
		ConsolePort:   consolePort,
		ProxyUpstream: cfg.Server.ProxyUpstream,
		// The client addresses of XFF only from these.
		TrustedProxies: cfg.Server.TrustedProxies,
	}, edge.Deps{
		Routes:      table,
		Identity:    parts.ident,
		AppSessions: parts.ident,
		Store:       parts.store,
		Signer:      parts.signer,
		Passcodes:   parts.passcodes,
		Policy:      parts.pol,
		Logger:      gen.log,
	})
	if err != nil {
		return nil, err
	}
	rt.onClose("edge upstream connections", func() error { proxy.Close(); return nil })

	// The generation's context ends only once build succeeded; a failed
	// build closes what it started, so these stop on their own context.
	ctx, cancel := context.WithCancel(ctx)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		feedEdgeRoutes(ctx, gen.log, parts.store, parts.sched, parts.adapters, table)
	}()
	rt.onClose("edge routes", func() error { cancel(); <-fed; return nil })
	if cfg.Server.RoutingMode == edge.ModePort {
		host, _, _ := net.SplitHostPort(cfg.Server.Addr)
		ls := edge.NewListeners(edge.ListenersConfig{
			Routes: table, Handler: proxy.PortHandler, Host: host,
			Drain: cfg.Server.ShutdownTimeout, Logger: gen.log,
		})
		go ls.Run(ctx)
		rt.onClose("edge app ports", func() error { cancel(); ls.Wait(); return nil })
	}
	return proxy, nil
}

// feedRoutes keeps the route table equal to the scheduler's routes until
// ctx ends: at once, whenever the apps, their ports or their releases
// change in the store, and every routeFeedInterval in any case.
func feedRoutes(ctx context.Context, store *raftstore.Store, sched *scheduler.Service, table *edge.Table) {
	for {
		r := store.Read()
		// Reading the tables makes the reader watch them.
		apps.Apps.Count(r)
		scheduler.Ports.Count(r)
		scheduler.Releases.Count(r)
		table.Replace(edgeRoutes(sched.Routes(ctx)))
		wait, cancel := context.WithTimeout(ctx, routeFeedInterval)
		_ = r.Wait(wait)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-time.After(routeFeedMinGap):
		}
	}
}

// appAddresses says where the edge serves an app, for the App's url
// field: the port comes from the store (the port a deploy took), so that
// the url is right as soon as the port is held.
type appAddresses struct {
	proxy *edge.Proxy
	ports interface {
		PortOf(appID string) (int, bool)
	}
}

func (a appAddresses) AppURL(r *http.Request, appID, slug string) string {
	port, _ := a.ports.PortOf(appID)
	return a.proxy.AppURL(r, slug, port)
}

func edgeRoutes(in []scheduler.RouteInfo) []edge.Route {
	out := make([]edge.Route, len(in))
	for i, ri := range in {
		out[i] = edge.Route{AppID: ri.AppID, Slug: ri.Slug, Port: ri.Port, Upstream: ri.Upstream}
	}
	return out
}
