package nomadsd

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/edge/blocking"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/cacert"
	"github.com/svchost/svc/internal/errcode"
)

// Defaults of a Watcher's Config.
const (
	// DefaultWait is how long one blocking query waits for a change before
	// Nomad answers with what it has (Nomad's own default and maximum are
	// 5 minutes): a connection that died silently is noticed within about
	// this long.
	DefaultWait     = blocking.DefaultWait
	DefaultRetryMin = blocking.DefaultRetryMin
	DefaultRetryMax = blocking.DefaultRetryMax
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
	cfg    Config
	c      *client
	routes *blocking.Routes
}

var (
	_ adapters.Instance = (*Watcher)(nil)
	_ io.Closer         = (*Watcher)(nil)
)

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
	t := blocking.Timing{Wait: cfg.Wait, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax}.WithDefaults()
	cfg.Wait, cfg.RetryMin, cfg.RetryMax = t.Wait, t.RetryMin, t.RetryMax
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxConnsPerHost
	if strings.HasPrefix(base, "https://") {
		// Skipping verification is the operator's explicit choice (tls_skip_verify).
		tc := &tls.Config{InsecureSkipVerify: cfg.TLSSkipVerify}
		if cfg.CACert != "" {
			pool, err := cacert.Pool(cfg.CACert)
			if err != nil {
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
			http: &http.Client{Transport: tr}, vendor: newVendor(base, cfg.Namespace)},
	}
	w.routes = blocking.NewRoutes(blocking.Source{
		Name:        "nomad",
		ListWhat:    "listing nomad's services",
		List:        w.listServices,
		ServiceWhat: func(name string) string { return "reading nomad service " + name },
		Service:     w.serviceUpstreams,
		ErrRunning:  ErrRunning,
	}, t, cfg.Logger.With("adapter", "nomad"))
	return w, nil
}

// Upstreams returns what the watcher knows now: the upstreams by app ID
// (which the caller must not modify), whether it has heard from Nomad
// about the service list and every primary service in it since Run
// started, and a channel closed when what it knows next changes (either of
// those, or whether its queries fail).
func (w *Watcher) Upstreams() (ups edge.Upstreams, synced bool, changed <-chan struct{}) {
	return w.routes.Upstreams()
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
	return w.routes.Err()
}

// Capabilities of the nomad routes adapter, read live. health_filtered is
// false: Nomad's service registrations do not say whether their checks
// pass (see the package documentation).
func (w *Watcher) Capabilities() map[string]any {
	ups, synced, _ := w.routes.Upstreams()
	return map[string]any{
		"modes":            []string{edge.ModePort, edge.ModeSubdomain, edge.ModePath},
		"health_filtered":  false,
		"blocking_queries": true,
		"namespace":        w.cfg.Namespace,
		"synced":           synced,
		"apps":             len(ups),
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
func (w *Watcher) Run(ctx context.Context) error { return w.routes.Run(ctx) }

// listServices is the blocking query on the service list: the names of
// the namespace's primary services.
func (w *Watcher) listServices(ctx context.Context, what string, index uint64) ([]string, uint64, error) {
	var list []namespaceServices
	got, err := w.c.get(ctx, what, "/v1/services", index, &list)
	if err != nil {
		return nil, 0, err
	}
	return primaryServices(list, w.cfg.Namespace), got, nil
}

// serviceUpstreams is the blocking query on one service's registrations:
// their upstreams.
func (w *Watcher) serviceUpstreams(ctx context.Context, what, name string, index uint64) (edge.Upstreams, uint64, error) {
	var regs []registration
	got, err := w.c.get(ctx, what, servicePath(name), index, &regs)
	if err != nil {
		return nil, 0, err
	}
	return registeredUpstreams(regs, name), got, nil
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
