// Package telemetry owns the server's Prometheus metrics: HTTP requests by
// route and status with their latency, the replicated store's apply latency
// and leadership, the reconciler's passes, per-app durations and actions,
// and the Go runtime's own collectors, on one registry that /metrics
// serves.
//
// It must not touch storage or HTTP routing: others report to it through
// small interfaces (raftstore.Observer, the server's request observer,
// scheduler.Observer).
package telemetry

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svchost/svc/raftstore"
)

// Metrics is the server's metric registry.
type Metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	apply         *prometheus.HistogramVec
	leader        prometheus.Gauge
	leaderChanges prometheus.Counter

	reconcilePass    prometheus.Histogram
	reconcileApps    *prometheus.CounterVec
	reconcileApp     prometheus.Histogram
	reconcileActions *prometheus.CounterVec
}

// reconcileBuckets span a reconcile from a store read to a runtime call
// that waits out a start timeout.
var reconcileBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

var _ raftstore.Observer = (*Metrics)(nil)

// New returns a registry with the server's metrics and the Go and process
// collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svc_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
		apply: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svc_raft_apply_duration_seconds",
			Help:    "Time for a write to commit through Raft: path is local (applied on this node as leader) or forwarded (sent to the leader); outcome is ok, refused, not_leader, unknown, failed or unavailable.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"path", "outcome"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_raft_leader",
			Help: "1 while this node leads the Raft cluster, 0 otherwise.",
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_raft_leadership_changes_total",
			Help: "Times this node gained or lost leadership.",
		}),
		reconcilePass: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svc_reconcile_pass_duration_seconds",
			Help:    "Time from the start of a reconciler pass until every app it took up was reconciled (its count is the passes made).",
			Buckets: reconcileBuckets,
		}),
		reconcileApps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_reconcile_apps_total",
			Help: "Apps the reconciler's passes came to: taken up (reconciled), or busy (left alone: a reconcile of theirs was still under way).",
		}, []string{"result"}),
		reconcileApp: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svc_reconcile_app_duration_seconds",
			Help:    "Time to reconcile one app: read, ask the runtime, act.",
			Buckets: reconcileBuckets,
		}),
		reconcileActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_reconcile_actions_total",
			Help: "Actions the reconciler took (start, stop, restart, recover, redeploy, state, give_up) by outcome (ok, failed).",
		}, []string{"action", "outcome"}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.apply, m.leader, m.leaderChanges,
		m.reconcilePass, m.reconcileApps, m.reconcileApp, m.reconcileActions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveRequest records one answered HTTP request.
func (m *Metrics) ObserveRequest(route, method string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route, method).Observe(d.Seconds())
}

// ObserveApply records one write through the store.
func (m *Metrics) ObserveApply(d time.Duration, forwarded bool, outcome string) {
	path := "local"
	if forwarded {
		path = "forwarded"
	}
	m.apply.WithLabelValues(path, outcome).Observe(d.Seconds())
}

// ObserveLeadership records a leadership change of this node.
func (m *Metrics) ObserveLeadership(leader bool) {
	m.leaderChanges.Inc()
	if leader {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// ObservePass records a reconciler pass: how long until every app it took
// up was done, how many it took up, and how many it left alone as busy.
func (m *Metrics) ObservePass(d time.Duration, apps, busy int) {
	m.reconcilePass.Observe(d.Seconds())
	m.reconcileApps.WithLabelValues("reconciled").Add(float64(apps))
	m.reconcileApps.WithLabelValues("busy").Add(float64(busy))
}

// ObserveApp records how long one app's reconcile took.
func (m *Metrics) ObserveApp(d time.Duration) { m.reconcileApp.Observe(d.Seconds()) }

// ObserveAction records an action the reconciler took and its outcome.
func (m *Metrics) ObserveAction(action, outcome string) {
	m.reconcileActions.WithLabelValues(action, outcome).Inc()
}

// WatchStore exports the store's indexes as gauges read at scrape time.
func (m *Metrics) WatchStore(status func() raftstore.Status) {
	gauge := func(name, help string, v func(raftstore.Status) uint64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(v(status())) })
	}
	m.reg.MustRegister(
		gauge("svc_raft_applied_index", "The last Raft index this node applied to its state.", func(s raftstore.Status) uint64 { return s.AppliedIndex }),
		gauge("svc_raft_commit_index", "The last Raft index this node knows to be committed.", func(s raftstore.Status) uint64 { return s.CommitIndex }),
		gauge("svc_raft_term", "The current Raft term.", func(s raftstore.Status) uint64 { return s.Term }),
	)
}
