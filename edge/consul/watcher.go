package consul

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
)

// Defaults of a Watcher's Config.
const (
	// DefaultWait is how long one blocking query waits for a change before
	// Consul answers with what it has (Consul's own default is 5 minutes,
	// its maximum 10): a connection that died silently is noticed within
	// about this long.
	DefaultWait     = time.Minute
	DefaultRetryMin = 250 * time.Millisecond
	DefaultRetryMax = 30 * time.Second
)

// maxConnsPerHost bounds the idle connections kept to Consul: one per
// watched service, so that every blocking query reuses its connection.
const maxConnsPerHost = 1024

// Config is how a Watcher reaches Consul.
type Config struct {
	// Address is Consul's HTTP API, such as http://127.0.0.1:8500 or
	// https://consul.example.com:8501.
	Address string
	// Datacenter to read; empty for the agent's own.
	Datacenter string
	// Token is the ACL token sent with every request (X-Consul-Token).
	Token string
	// CACert is a PEM file of the CA that signed Consul's certificate;
	// empty for the system's roots. TLSSkipVerify skips verification.
	CACert        string
	TLSSkipVerify bool
	// Wait is the longest a blocking query waits (DefaultWait when 0).
	Wait time.Duration
	// RetryMin and RetryMax bound the backoff after a failed query
	// (DefaultRetryMin, DefaultRetryMax when 0).
	RetryMin, RetryMax time.Duration
	Logger             *slog.Logger
}

// Watcher keeps the upstreams of svc's apps as Consul reports them: it is
// the consul routes adapter's live instance. Run watches until its context
// ends; Upstreams reads what it knows at any time.
type Watcher struct {
	cfg    Config
	client *api.Client
	http   *http.Client
	log    *slog.Logger

	running atomic.Bool
	cur     atomic.Pointer[snapshot]

	mu      sync.Mutex // serializes publishing, guards failing and lastErr
	failing int        // watches whose last query failed
	lastErr error      // the last of their errors
}

var (
	_ adapters.Instance = (*Watcher)(nil)
	_ io.Closer         = (*Watcher)(nil)
)

// snapshot is one state of what the watcher knows; it never changes once
// published.
type snapshot struct {
	ups     edge.Upstreams
	synced  bool
	failing bool // some watch's last query failed (Check says why)
	changed chan struct{}
}

// New returns a watcher over Consul at cfg.Address. It does not contact
// Consul: Run and Check do.
func New(cfg Config) (*Watcher, error) {
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = DefaultRetryMin
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(DefaultRetryMax, cfg.RetryMin)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxConnsPerHost
	if strings.HasPrefix(cfg.Address, "https://") {
		tc, err := api.SetupTLSConfig(&api.TLSConfig{CAFile: cfg.CACert, InsecureSkipVerify: cfg.TLSSkipVerify})
		if err != nil {
			return nil, errcode.Wrap(err, errcode.AdapterFailed, "the consul adapter's ca_cert %s could not be read as PEM certificates", cfg.CACert).
				WithRemedy("set ca_cert to a readable PEM file of the CA that signed consul's certificate, or leave it empty for the system's roots")
		}
		tr.TLSClientConfig = tc
	}
	hc := &http.Client{Transport: tr}
	client, err := api.NewClient(&api.Config{Address: cfg.Address, Datacenter: cfg.Datacenter, Token: cfg.Token, HttpClient: hc})
	if err != nil {
		return nil, errcode.Wrap(err, errcode.ValidInvalid, "the consul adapter's address %s is not usable", cfg.Address).
			WithRemedy("use an http:// or https:// address such as http://127.0.0.1:8500")
	}
	w := &Watcher{cfg: cfg, client: client, http: hc, log: cfg.Logger.With("adapter", "consul")}
	w.cur.Store(&snapshot{ups: edge.Upstreams{}, changed: make(chan struct{})})
	return w, nil
}

// Upstreams returns what the watcher knows now: the upstreams by app ID
// (which the caller must not modify), whether it has heard from Consul
// about the catalog and every primary service in it since Run started, and
// a channel closed when what it knows next changes (either of those, or
// whether its queries fail).
func (w *Watcher) Upstreams() (ups edge.Upstreams, synced bool, changed <-chan struct{}) {
	s := w.cur.Load()
	return s.ups, s.synced, s.changed
}

// Check says whether Consul answers: its leader, then whether every watch
// of a running watcher gets answers (Consul names its leader to any token,
// so a token it does not know shows only in the watches' failures).
func (w *Watcher) Check(ctx context.Context) error {
	leader, err := w.client.Status().LeaderWithQueryOptions(w.query(ctx, 0))
	if err != nil {
		return w.translate("checking consul's leader", err)
	}
	if leader == "" {
		return errcode.New(errcode.AdapterFailed, "consul at %s has no cluster leader", w.cfg.Address).
			WithRemedy("check that a quorum of consul servers is up; consul's server log says why there is no leader")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failing > 0 {
		return w.lastErr
	}
	return nil
}

// Capabilities of the consul routes adapter, read live.
func (w *Watcher) Capabilities() map[string]any {
	s := w.cur.Load()
	return map[string]any{
		"modes":            []string{edge.ModePort, edge.ModeSubdomain, edge.ModePath},
		"health_filtered":  true,
		"blocking_queries": true,
		"synced":           s.synced,
		"apps":             len(s.ups),
	}
}

// Close drops idle connections to Consul.
func (w *Watcher) Close() error {
	w.http.CloseIdleConnections()
	return nil
}

// ErrRunning is returned by Run while another Run of the same watcher is
// under way.
var ErrRunning = errors.New("consul watcher: already running")

// Run watches Consul until ctx ends, then returns nil; failures are
// retried, not returned. A new watcher's upstreams are empty and
// unsynced.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer w.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	names := make(chan []string)
	results := make(chan healthResult)
	wg.Go(func() { w.watchCatalog(ctx, names) })
	watches := map[string]*serviceWatch{}
	catalogSeen := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case list := <-names:
			catalogSeen = true
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
				wg.Go(func() { w.watchHealth(sctx, name, sw, results) })
			}
		case r := <-results:
			if watches[r.name] != r.watch {
				continue // a result of a watch stopped meanwhile
			}
			r.watch.answered, r.watch.ups = true, r.ups
		}
		w.publish(watches, catalogSeen)
	}
}

// serviceWatch is the state of one service's watch, owned by Run.
type serviceWatch struct {
	cancel   context.CancelFunc
	answered bool
	ups      edge.Upstreams
}

// healthResult is an answer of one service's watch.
type healthResult struct {
	name  string
	watch *serviceWatch
	ups   edge.Upstreams
}

// publish makes the union of the watches' upstreams the current snapshot
// if it differs from it.
func (w *Watcher) publish(watches map[string]*serviceWatch, catalogSeen bool) {
	ups := edge.Upstreams{}
	synced := catalogSeen
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
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.cur.Load()
	if prev.synced == synced && prev.ups.Equal(ups) {
		return
	}
	w.swap(prev, &snapshot{ups: ups, synced: synced, failing: prev.failing})
}

// swap publishes next in place of prev. Callers hold w.mu.
func (w *Watcher) swap(prev, next *snapshot) {
	next.changed = make(chan struct{})
	w.cur.Store(next)
	close(prev.changed)
}

// watchCatalog sends the names of the primary services in Consul's
// catalog to out whenever they change, the first time included.
func (w *Watcher) watchCatalog(ctx context.Context, out chan<- []string) {
	var last []string
	sent := false
	w.block(ctx, "listing consul's services", func(ctx context.Context, index uint64) (uint64, error) {
		services, meta, err := w.client.Catalog().Services(w.query(ctx, index))
		if err != nil {
			return 0, err
		}
		names := primaryServices(services)
		if !sent || !slices.Equal(names, last) {
			select {
			case out <- names:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			sent, last = true, names
		}
		return meta.LastIndex, nil
	})
}

// watchHealth sends the upstreams of one service's passing instances to
// out whenever they change, the first time included.
func (w *Watcher) watchHealth(ctx context.Context, name string, sw *serviceWatch, out chan<- healthResult) {
	var last edge.Upstreams
	sent := false
	w.block(ctx, "reading the health of consul service "+name, func(ctx context.Context, index uint64) (uint64, error) {
		entries, meta, err := w.client.Health().Service(name, "", true, w.query(ctx, index))
		if err != nil {
			return 0, err
		}
		ups := passingUpstreams(entries)
		if !sent || !ups.Equal(last) {
			select {
			case out <- healthResult{name: name, watch: sw, ups: ups}:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			sent, last = true, ups
		}
		return meta.LastIndex, nil
	})
}

// query returns the options of one request: datacenter, token, and the
// index to wait on (0: answer at once).
func (w *Watcher) query(ctx context.Context, index uint64) *api.QueryOptions {
	q := &api.QueryOptions{Datacenter: w.cfg.Datacenter, Token: w.cfg.Token, WaitIndex: index, WaitTime: w.cfg.Wait}
	return q.WithContext(ctx)
}

// block runs a blocking query again and again until ctx ends: query asks
// for what changed after index and returns the index of its answer. A
// failed query is retried after a backoff; while it fails the watcher
// counts as failing (Check).
func (w *Watcher) block(ctx context.Context, what string, query func(ctx context.Context, index uint64) (uint64, error)) {
	var index uint64
	failures := 0
	defer func() {
		if failures > 0 {
			w.setFailing(-1, nil)
		}
	}()
	for {
		qctx, cancel := context.WithTimeout(ctx, requestTimeout(w.cfg.Wait))
		got, err := query(qctx, index)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			err = w.translate(what, err)
			if failures == 1 {
				w.setFailing(+1, err)
				w.log.Warn("consul watch failed; retrying", "watch", what, "err", errcode.MessageOf(err))
			} else {
				w.setFailing(0, err)
				if failures%20 == 0 {
					w.log.Warn("consul watch still failing", "watch", what, "failures", failures, "err", errcode.MessageOf(err))
				}
			}
			if !sleep(ctx, backoff(w.cfg.RetryMin, w.cfg.RetryMax, failures)) {
				return
			}
			continue
		}
		if failures > 0 {
			w.log.Info("consul watch recovered", "watch", what, "failures", failures)
			w.setFailing(-1, nil)
			failures = 0
		}
		index = nextIndex(index, got)
	}
}

func (w *Watcher) setFailing(delta int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failing += delta
	if err != nil {
		w.lastErr = err
	}
	if prev := w.cur.Load(); prev.failing != (w.failing > 0) {
		w.swap(prev, &snapshot{ups: prev.ups, synced: prev.synced, failing: w.failing > 0})
	}
}

// primaryServices returns, sorted, the names of the services some
// instance of which carries svc's tag and the primary tag (the catalog
// lists the union of the instances' tags; each instance is checked again
// in passingUpstreams).
func primaryServices(services map[string][]string) []string {
	var out []string
	for name, tags := range services {
		if slices.Contains(tags, edge.TagService) && slices.Contains(tags, edge.TagPrimary) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// passingUpstreams returns host:port of every instance that is an app's
// primary workload and whose checks all pass, by app ID. Consul already
// filtered on ?passing; the checks are looked at again so that nothing
// but a passing instance is ever routed.
func passingUpstreams(entries []*api.ServiceEntry) edge.Upstreams {
	out := edge.Upstreams{}
	for _, e := range entries {
		if e == nil || e.Service == nil {
			continue
		}
		appID, ok := edge.PrimaryApp(e.Service.Tags)
		if !ok || e.Checks.AggregatedStatus() != api.HealthPassing {
			continue
		}
		host := e.Service.Address
		if host == "" && e.Node != nil {
			host = e.Node.Address
		}
		if host == "" || e.Service.Port <= 0 || e.Service.Port > 65535 {
			continue
		}
		out[appID] = append(out[appID], net.JoinHostPort(host, strconv.Itoa(e.Service.Port)))
	}
	for id, addrs := range out {
		slices.Sort(addrs)
		out[id] = slices.Compact(addrs)
	}
	return out
}
