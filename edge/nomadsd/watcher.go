package nomadsd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
)

// Defaults of a Watcher's Config.
const (
	// DefaultWait is how long one blocking query waits for a change before
	// Nomad answers with what it has (Nomad's own default and maximum are
	// 5 minutes): a connection that died silently is noticed within about
	// this long.
	DefaultWait     = time.Minute
	DefaultRetryMin = 250 * time.Millisecond
	DefaultRetryMax = 30 * time.Second
	// DefaultNamespace is the namespace read when none is configured.
	DefaultNamespace = "default"
)

// maxConnsPerHost bounds the idle connections kept to Nomad: one per
// watched service, so that every blocking query reuses its connection.
const maxConnsPerHost = 1024

// Config is how a Watcher reaches Nomad.
type Config struct {
	// Address is Nomad's HTTP API, such as http://127.0.0.1:4646.
	Address string
	// Namespace whose services are read (DefaultNamespace when empty);
	// Region to read, empty for the agent's own.
	Namespace string
	Region    string
	// Token is the ACL token sent with every request (X-Nomad-Token).
	Token string
	// CACert is a PEM file of the CA that signed Nomad's certificate;
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

// Watcher keeps the upstreams of svc's apps as Nomad's service discovery
// reports them: it is the nomad routes adapter's live instance. Run
// watches until its context ends; Upstreams reads what it knows at any
// time.
type Watcher struct {
	cfg Config
	c   *client
	log *slog.Logger

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
	failing bool
	changed chan struct{}
}

// New returns a watcher over Nomad at cfg.Address. It does not contact
// Nomad: Run and Check do.
func New(cfg Config) (*Watcher, error) {
	base, err := baseURL(cfg.Address)
	if err != nil {
		return nil, err
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
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
	if strings.HasPrefix(base, "https://") {
		// Skipping verification is the operator's explicit choice (tls_skip_verify).
		tc := &tls.Config{InsecureSkipVerify: cfg.TLSSkipVerify}
		if cfg.CACert != "" {
			pem, err := os.ReadFile(cfg.CACert)
			pool := x509.NewCertPool()
			if err != nil || !pool.AppendCertsFromPEM(pem) {
				if err == nil {
					err = errors.New("no PEM certificate in the file")
				}
				return nil, errcode.Wrap(err, errcode.AdapterFailed, "the nomad adapter's ca_cert %s could not be read as PEM certificates", cfg.CACert).
					WithRemedy("set ca_cert to a readable PEM file of the CA that signed nomad's certificate, or leave it empty for the system's roots")
			}
			tc.RootCAs = pool
		}
		tr.TLSClientConfig = tc
	}
	w := &Watcher{
		cfg: cfg,
		c: &client{base: base, namespace: cfg.Namespace, region: cfg.Region, token: cfg.Token, wait: cfg.Wait,
			http: &http.Client{Transport: tr}},
		log: cfg.Logger.With("adapter", "nomad"),
	}
	w.cur.Store(&snapshot{ups: edge.Upstreams{}, changed: make(chan struct{})})
	return w, nil
}

// Upstreams returns what the watcher knows now: the upstreams by app ID
// (which the caller must not modify), whether it has heard from Nomad
// about the service list and every primary service in it since Run
// started, and a channel closed when what it knows next changes (either of
// those, or whether its queries fail).
func (w *Watcher) Upstreams() (ups edge.Upstreams, synced bool, changed <-chan struct{}) {
	s := w.cur.Load()
	return s.ups, s.synced, s.changed
}

// Check says whether Nomad answers: its leader, then whether every watch
// of a running watcher gets answers (Nomad names its leader to any token,
// so a token that may not read shows only in the watches' failures).
func (w *Watcher) Check(ctx context.Context) error {
	leader, err := w.c.leader(ctx)
	if err != nil {
		return err
	}
	if leader == "" {
		return errcode.New(errcode.AdapterFailed, "nomad at %s has no cluster leader", w.c.base).
			WithRemedy("check that a quorum of nomad servers is up; nomad's server log says why there is no leader")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failing > 0 {
		return w.lastErr
	}
	return nil
}

// Capabilities of the nomad routes adapter, read live. health_filtered is
// false: Nomad's service registrations do not say whether their checks
// pass (see the package documentation).
func (w *Watcher) Capabilities() map[string]any {
	s := w.cur.Load()
	return map[string]any{
		"modes":            []string{edge.ModePort, edge.ModeSubdomain, edge.ModePath},
		"health_filtered":  false,
		"blocking_queries": true,
		"namespace":        w.cfg.Namespace,
		"synced":           s.synced,
		"apps":             len(s.ups),
	}
}

// Close drops idle connections to Nomad.
func (w *Watcher) Close() error {
	w.c.http.CloseIdleConnections()
	return nil
}

// ErrRunning is returned by Run while another Run of the same watcher is
// under way.
var ErrRunning = errors.New("nomad watcher: already running")

// Run watches Nomad until ctx ends, then returns nil; failures are
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
	results := make(chan serviceResult)
	wg.Go(func() { w.watchList(ctx, names) })
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
				wg.Go(func() { w.watchService(sctx, name, sw, results) })
			}
		case r := <-results:
			if watches[r.name] != r.watch {
				continue // a result of a watch stopped meanwhile
			}
			r.watch.answered, r.watch.ups = true, r.ups
		}
		w.publish(watches, listSeen)
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
func (w *Watcher) publish(watches map[string]*serviceWatch, listSeen bool) {
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

// watchList sends the names of the primary services in the namespace to
// out whenever they change, the first time included.
func (w *Watcher) watchList(ctx context.Context, out chan<- []string) {
	var last []string
	sent := false
	w.block(ctx, "listing nomad's services", func(ctx context.Context, index uint64) (uint64, error) {
		var list []namespaceServices
		got, err := w.c.get(ctx, "listing nomad's services", "/v1/services", index, &list)
		if err != nil {
			return 0, err
		}
		names := primaryServices(list, w.cfg.Namespace)
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

// watchService sends the upstreams of one service's registrations to out
// whenever they change, the first time included.
func (w *Watcher) watchService(ctx context.Context, name string, sw *serviceWatch, out chan<- serviceResult) {
	var last edge.Upstreams
	sent := false
	what := "reading nomad service " + name
	w.block(ctx, what, func(ctx context.Context, index uint64) (uint64, error) {
		var regs []registration
		got, err := w.c.get(ctx, what, servicePath(name), index, &regs)
		if err != nil {
			return 0, err
		}
		ups := registeredUpstreams(regs, name)
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
			if failures == 1 {
				w.setFailing(+1, err)
				w.log.Warn("nomad watch failed; retrying", "watch", what, "err", errcode.MessageOf(err))
			} else {
				w.setFailing(0, err)
				if failures%20 == 0 {
					w.log.Warn("nomad watch still failing", "watch", what, "failures", failures, "err", errcode.MessageOf(err))
				}
			}
			if !sleep(ctx, backoff(w.cfg.RetryMin, w.cfg.RetryMax, failures)) {
				return
			}
			continue
		}
		if failures > 0 {
			w.log.Info("nomad watch recovered", "watch", what, "failures", failures)
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

// primaryServices returns, sorted, the names of the namespace's services
// some registration of which carries svc's tag and the primary tag (each
// registration is checked again in registeredUpstreams).
func primaryServices(list []namespaceServices, namespace string) []string {
	var out []string
	for _, ns := range list {
		if ns.Namespace != namespace {
			continue
		}
		for _, s := range ns.Services {
			if slices.Contains(s.Tags, edge.TagService) && slices.Contains(s.Tags, edge.TagPrimary) {
				out = append(out, s.ServiceName)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// registeredUpstreams returns host:port of every registration of service
// name that is an app's primary workload, by app ID.
func registeredUpstreams(regs []registration, name string) edge.Upstreams {
	out := edge.Upstreams{}
	for _, r := range regs {
		if r.ServiceName != name {
			continue
		}
		appID, ok := edge.PrimaryApp(r.Tags)
		if !ok || r.Address == "" || r.Port <= 0 || r.Port > 65535 {
			continue
		}
		out[appID] = append(out[appID], net.JoinHostPort(r.Address, strconv.Itoa(r.Port)))
	}
	for id, addrs := range out {
		slices.Sort(addrs)
		out[id] = slices.Compact(addrs)
	}
	return out
}
