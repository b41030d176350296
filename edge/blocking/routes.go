package blocking

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/errcode"
)

// Source is what a route source asks of its vendor: the two blocking
// queries it runs. Each asks for what changed after index (0: answer at
// once) and returns the index of its answer.
type Source struct {
	// Name names the vendor in log messages ("consul", "nomad").
	Name string
	// ListWhat is what the list query does, for errors and logs
	// ("listing consul's services").
	ListWhat string
	// List returns the names of the primary services, sorted.
	List func(ctx context.Context, what string, index uint64) (names []string, got uint64, err error)
	// ServiceWhat is what the query of service name does.
	ServiceWhat func(name string) string
	// Service returns the upstreams of one service by app ID.
	Service func(ctx context.Context, what, name string, index uint64) (ups edge.Upstreams, got uint64, err error)
	// Translate, when set, turns a failed query's error into a coded one.
	Translate func(what string, err error) error
	// ErrRunning is what Run returns while another Run is under way.
	ErrRunning error
}

// Routes keeps the upstreams of svc's apps as a Source reports them: Run
// watches until its context ends; Upstreams reads what it knows at any
// time.
type Routes struct {
	src    Source
	timing Timing
	log    *slog.Logger

	running atomic.Bool
	cur     atomic.Pointer[snapshot]

	mu      sync.Mutex // serializes publishing, guards failing and lastErr
	failing int        // watches whose last query failed
	lastErr error      // the last of their errors
}

// snapshot is one state of what the watcher knows; it never changes once
// published.
type snapshot struct {
	ups     edge.Upstreams
	synced  bool
	failing bool // some watch's last query failed (Err says why)
	changed chan struct{}
}

// NewRoutes returns a watch of src with timing (its defaults filled in)
// that logs to log. It contacts nothing: Run does.
func NewRoutes(src Source, timing Timing, log *slog.Logger) *Routes {
	r := &Routes{src: src, timing: timing.WithDefaults(), log: log}
	r.cur.Store(&snapshot{ups: edge.Upstreams{}, changed: make(chan struct{})})
	return r
}

// Upstreams returns what the watch knows now: the upstreams by app ID
// (which the caller must not modify), whether it has heard about the list
// and every primary service in it since Run started, and a channel closed
// when what it knows next changes (either of those, or whether its
// queries fail).
func (r *Routes) Upstreams() (ups edge.Upstreams, synced bool, changed <-chan struct{}) {
	s := r.cur.Load()
	return s.ups, s.synced, s.changed
}

// Err returns the last error of a failing query while some watch's last
// query failed, else nil.
func (r *Routes) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing > 0 {
		return r.lastErr
	}
	return nil
}

// Run watches until ctx ends, then returns nil; failures are retried, not
// returned. While another Run is under way it returns the Source's
// ErrRunning.
func (r *Routes) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return r.src.ErrRunning
	}
	defer r.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	names := make(chan []string)
	results := make(chan serviceResult)
	wg.Go(func() { r.watchList(ctx, names) })
	watches := map[string]*serviceWatch{}
	listSeen := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case list := <-names:
			listSeen = true
			for name, sw := range watches {
				if !slices.Contains(list, name) {
					sw.cancel()
					delete(watches, name)
				}
			}
			for _, name := range list {
				if watches[name] != nil {
					continue
				}
				sctx, stop := context.WithCancel(ctx)
				sw := &serviceWatch{cancel: stop}
				watches[name] = sw
				wg.Go(func() { r.watchService(sctx, name, sw, results) })
			}
		case res := <-results:
			if watches[res.name] != res.watch {
				continue // a result of a watch stopped meanwhile
			}
			res.watch.answered, res.watch.ups = true, res.ups
		}
		r.publish(watches, listSeen)
	}
}

// serviceWatch is the state of one service's watch, owned by Run.
type serviceWatch struct {
	cancel   context.CancelFunc
	answered bool
	ups      edge.Upstreams
}

// serviceResult is an answer of one service's watch.
type serviceResult struct {
	name  string
	watch *serviceWatch
	ups   edge.Upstreams
}

// publish makes the union of the watches' upstreams the current snapshot
// if it differs from it.
func (r *Routes) publish(watches map[string]*serviceWatch, listSeen bool) {
	ups := edge.Upstreams{}
	synced := listSeen
	for _, sw := range watches {
		synced = synced && sw.answered
		for id, addrs := range sw.ups {
			ups[id] = append(ups[id], addrs...)
		}
	}
	for id, addrs := range ups {
		slices.Sort(addrs)
		ups[id] = slices.Compact(addrs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.cur.Load()
	if prev.synced == synced && prev.ups.Equal(ups) {
		return
	}
	r.swap(prev, &snapshot{ups: ups, synced: synced, failing: prev.failing})
}

// swap publishes next in place of prev. Callers hold r.mu.
func (r *Routes) swap(prev, next *snapshot) {
	next.changed = make(chan struct{})
	r.cur.Store(next)
	close(prev.changed)
}

// watchList sends the names of the primary services to out whenever they
// change, the first time included.
func (r *Routes) watchList(ctx context.Context, out chan<- []string) {
	var last []string
	sent := false
	what := r.src.ListWhat
	r.block(ctx, what, func(ctx context.Context, index uint64) (uint64, error) {
		names, got, err := r.src.List(ctx, what, index)
		if err != nil {
			return 0, err
		}
		if !sent || !slices.Equal(names, last) {
			select {
			case out <- names:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			sent, last = true, names
		}
		return got, nil
	})
}

// watchService sends the upstreams of one service to out whenever they
// change, the first time included.
func (r *Routes) watchService(ctx context.Context, name string, sw *serviceWatch, out chan<- serviceResult) {
	var last edge.Upstreams
	sent := false
	what := r.src.ServiceWhat(name)
	r.block(ctx, what, func(ctx context.Context, index uint64) (uint64, error) {
		ups, got, err := r.src.Service(ctx, what, name, index)
		if err != nil {
			return 0, err
		}
		if !sent || !ups.Equal(last) {
			select {
			case out <- serviceResult{name: name, watch: sw, ups: ups}:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			sent, last = true, ups
		}
		return got, nil
	})
}

// block runs a blocking query again and again until ctx ends: query asks
// for what changed after index and returns the index of its answer. A
// failed query is retried after a backoff; while it fails the watch
// counts as failing (Err).
func (r *Routes) block(ctx context.Context, what string, query func(ctx context.Context, index uint64) (uint64, error)) {
	var index uint64
	failures := 0
	defer func() {
		if failures > 0 {
			r.setFailing(-1, nil)
		}
	}()
	for {
		qctx, cancel := context.WithTimeout(ctx, RequestTimeout(r.timing.Wait))
		got, err := query(qctx, index)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if r.src.Translate != nil {
				err = r.src.Translate(what, err)
			}
			if failures == 1 {
				r.setFailing(+1, err)
				r.log.Warn(r.src.Name+" watch failed; retrying", "watch", what, "err", errcode.MessageOf(err))
			} else {
				r.setFailing(0, err)
				if failures%20 == 0 {
					r.log.Warn(r.src.Name+" watch still failing", "watch", what, "failures", failures, "err", errcode.MessageOf(err))
				}
			}
			if !sleep(ctx, Backoff(r.timing.RetryMin, r.timing.RetryMax, failures)) {
				return
			}
			continue
		}
		if failures > 0 {
			r.log.Info(r.src.Name+" watch recovered", "watch", what, "failures", failures)
			r.setFailing(-1, nil)
			failures = 0
		}
		index = NextIndex(index, got)
	}
}

func (r *Routes) setFailing(delta int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing += delta
	if err != nil {
		r.lastErr = err
	}
	if prev := r.cur.Load(); prev.failing != (r.failing > 0) {
		r.swap(prev, &snapshot{ups: prev.ups, synced: prev.synced, failing: r.failing > 0})
	}
}
