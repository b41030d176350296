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
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/edge/blocking"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
)

// Defaults of a Watcher's Config.
const (
	// DefaultWait is how long one blocking query waits for a change before
	// Consul answers with what it has (Consul's own default is 5 minutes,
	// its maximum 10): a connection that died silently is noticed within
	// about this long.
	DefaultWait     = blocking.DefaultWait
	DefaultRetryMin = blocking.DefaultRetryMin
	DefaultRetryMax = blocking.DefaultRetryMax
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
	vendor *blocking.Vendor
	routes *blocking.Routes
}

var (
	_ adapters.Instance = (*Watcher)(nil)
	_ io.Closer         = (*Watcher)(nil)
)

// New returns a watcher over Consul at cfg.Address. It does not contact
// Consul: Run and Check do.
func New(cfg Config) (*Watcher, error) {
	t := blocking.Timing{Wait: cfg.Wait, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax}.WithDefaults()
	cfg.Wait, cfg.RetryMin, cfg.RetryMax = t.Wait, t.RetryMin, t.RetryMax
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
	w := &Watcher{cfg: cfg, client: client, http: hc, vendor: newVendor(cfg.Address)}
	w.routes = blocking.NewRoutes(blocking.Source{
		Name:        "consul",
		ListWhat:    "listing consul's services",
		List:        w.listServices,
		ServiceWhat: func(name string) string { return "reading the health of consul service " + name },
		Service:     w.serviceHealth,
		Translate:   w.translate,
		ErrRunning:  ErrRunning,
	}, t, cfg.Logger.With("adapter", "consul"))
	return w, nil
}

// Upstreams returns what the watcher knows now: the upstreams by app ID
// (which the caller must not modify), whether it has heard from Consul
// about the catalog and every primary service in it since Run started, and
// a channel closed when what it knows next changes (either of those, or
// whether its queries fail).
func (w *Watcher) Upstreams() (ups edge.Upstreams, synced bool, changed <-chan struct{}) {
	return w.routes.Upstreams()
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
	return w.routes.Err()
}

// Capabilities of the consul routes adapter, read live.
func (w *Watcher) Capabilities() map[string]any {
	ups, synced, _ := w.routes.Upstreams()
	return map[string]any{
		"modes":            []string{edge.ModePort, edge.ModeSubdomain, edge.ModePath},
		"health_filtered":  true,
		"blocking_queries": true,
		"synced":           synced,
		"apps":             len(ups),
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
func (w *Watcher) Run(ctx context.Context) error { return w.routes.Run(ctx) }

// listServices is the blocking query on the catalog: the names of its
// primary services.
func (w *Watcher) listServices(ctx context.Context, _ string, index uint64) ([]string, uint64, error) {
	services, meta, err := w.client.Catalog().Services(w.query(ctx, index))
	if err != nil {
		return nil, 0, err
	}
	return primaryServices(services), meta.LastIndex, nil
}

// serviceHealth is the blocking query on one service's health: the
// upstreams of its passing instances.
func (w *Watcher) serviceHealth(ctx context.Context, _, name string, index uint64) (edge.Upstreams, uint64, error) {
	entries, meta, err := w.client.Health().Service(name, "", true, w.query(ctx, index))
	if err != nil {
		return nil, 0, err
	}
	return passingUpstreams(entries), meta.LastIndex, nil
}

// query returns the options of one request: datacenter, token, and the
// index to wait on (0: answer at once).
func (w *Watcher) query(ctx context.Context, index uint64) *api.QueryOptions {
	q := &api.QueryOptions{Datacenter: w.cfg.Datacenter, Token: w.cfg.Token, WaitIndex: index, WaitTime: w.cfg.Wait}
	return q.WithContext(ctx)
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
