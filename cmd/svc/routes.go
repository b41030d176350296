package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/edge/consul"
	"github.com/svchost/svc/edge/nomadsd"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

// Route sources. The edge's table says, per app, its slug, its host port
// and where its primary workload serves. With the builtin routes adapter
// (the embedded default) all of it comes from the scheduler: feedRoutes,
// unchanged. With consul or nomad as the primary routes adapter, where an
// app serves comes from that adapter's watcher (healthy instances, as the
// catalog reports them, the moment it reports them) and the rest from
// svc's store; edge.Merge joins the two. Until the adapters are loaded,
// and until the watcher has heard from its catalog once, the scheduler
// keeps feeding the table, so that a restart does not blank the routes.

// routeSource is a route source outside this server: a routes adapter's
// live instance that watches a catalog.
type routeSource interface {
	// Run watches until ctx ends.
	Run(ctx context.Context) error
	// Upstreams returns the healthy instances by app ID, whether the
	// source has heard from its catalog about everything once, and a
	// channel closed when either changes.
	Upstreams() (ups edge.Upstreams, synced bool, changed <-chan struct{})
}

var (
	_ routeSource = (*consul.Watcher)(nil)
	_ routeSource = (*nomadsd.Watcher)(nil)
)

// routeSourceSlow is how long a route source may take to sync before the
// log says the scheduler still feeds the routes.
const routeSourceSlow = 10 * time.Second

// feedEdgeRoutes keeps the edge's table fed until ctx ends: from the
// scheduler, and once the adapters are loaded and the primary routes
// adapter is a route source that has synced, from that source merged with
// the store.
func feedEdgeRoutes(ctx context.Context, log *slog.Logger, store *raftstore.Store, sched *scheduler.Service, ad *adapters.Service, table *edge.Table) {
	schedCtx, stopSched := context.WithCancel(ctx)
	fromSched := make(chan struct{})
	go func() {
		defer close(fromSched)
		feedRoutes(schedCtx, store, sched, table)
	}()
	defer func() { stopSched(); <-fromSched }()

	if err := waitAdapters(ctx, ad); err != nil {
		return
	}
	src, id, ok := primaryRouteSource(ad.Current(), log)
	if !ok {
		<-ctx.Done()
		return
	}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		if err := src.Run(ctx); err != nil {
			log.Error("route source stopped", "adapter_id", id, "err", err)
		}
	}()
	defer func() { <-ran }()
	if !waitSynced(ctx, log, id, src) {
		return
	}
	stopSched()
	<-fromSched
	log.Info("edge routes follow the routes adapter", "adapter_id", id)
	feedMerged(ctx, store, src, table)
}

// primaryRouteSource returns the primary routes adapter's watcher, if it
// has one (the builtin adapter has none) and it opened.
func primaryRouteSource(set *adapters.Set, log *slog.Logger) (routeSource, string, bool) {
	l, ok := set.Primary(adapters.CategoryRoutes)
	if !ok {
		return nil, "", false
	}
	if l.Instance == nil {
		log.Warn("the routes adapter did not open; the edge routes from the scheduler", "adapter_id", l.Adapter.ID, "kind", l.Adapter.Kind)
		return nil, "", false
	}
	src, ok := l.Instance.(routeSource)
	if !ok {
		return nil, "", false
	}
	return src, l.Adapter.ID, true
}

// waitSynced waits until the source has heard from its catalog about
// everything once, and reports whether it did before ctx ended.
func waitSynced(ctx context.Context, log *slog.Logger, id string, src routeSource) bool {
	slow := time.NewTimer(routeSourceSlow)
	defer slow.Stop()
	for {
		_, synced, changed := src.Upstreams()
		if synced {
			return true
		}
		select {
		case <-changed:
		case <-slow.C:
			log.Warn("the routes adapter has not heard from its catalog yet; the edge routes from the scheduler meanwhile", "adapter_id", id, "waited", routeSourceSlow)
		case <-ctx.Done():
			return false
		}
	}
}

// feedMerged keeps the table equal to the store's apps and ports merged
// with the source's upstreams until ctx ends: at once, and whenever either
// changes. Nothing here polls: the store's watch and the source's channel
// say when.
func feedMerged(ctx context.Context, store *raftstore.Store, src routeSource, table *edge.Table) {
	for {
		r := store.Read()
		ups, _, changed := src.Upstreams()
		table.Replace(edge.Merge(baseRoutes(r), ups))
		wait, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-changed:
				cancel()
			case <-wait.Done():
			}
		}()
		_ = r.Wait(wait)
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

// baseRoutes lists every app with its slug and host port, as the store
// has them; reading them makes r watch the two tables. An app is routed
// where its source says it serves: a passing instance in Consul is one
// that runs.
func baseRoutes(r *raftstore.Reader) []edge.Route {
	list, _ := apps.Apps.List(r, raftstore.Query{})
	held, _ := scheduler.Ports.List(r, raftstore.Query{})
	ports := make(map[string]int, len(held))
	for _, it := range held {
		ports[it.Value.AppID] = it.Value.Port
	}
	out := make([]edge.Route, 0, len(list))
	for _, it := range list {
		out = append(out, edge.Route{AppID: it.Value.ID, Slug: it.Value.Slug, Port: ports[it.Value.ID]})
	}
	return out
}
