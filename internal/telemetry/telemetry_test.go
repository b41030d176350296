package telemetry_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/telemetry"
	"github.com/svchost/svc/scheduler"
)

var _ scheduler.Observer = (*telemetry.Metrics)(nil)

// TestReconcilerMetrics: what the reconciler reports is served at
// /metrics under the documented names.
func TestReconcilerMetrics(t *testing.T) {
	m := telemetry.New()
	m.ObservePass(40*time.Millisecond, 3, 1)
	m.ObservePass(2*time.Second, 2, 0)
	m.ObserveApp(5 * time.Millisecond)
	m.ObserveAction("start", "ok")
	m.ObserveAction("start", "ok")
	m.ObserveAction("stop", "failed")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		"svc_reconcile_pass_duration_seconds_count 2",
		`svc_reconcile_pass_duration_seconds_bucket{le="0.05"} 1`,
		`svc_reconcile_apps_total{result="reconciled"} 5`,
		`svc_reconcile_apps_total{result="busy"} 1`,
		"svc_reconcile_app_duration_seconds_count 1",
		`svc_reconcile_actions_total{action="start",outcome="ok"} 2`,
		`svc_reconcile_actions_total{action="stop",outcome="failed"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
