package nomadsd

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/edge/blocking/fakeblock"
	"github.com/svchost/svc/edge/nomadsd/fakenomadsd"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
)

const (
	appA = "app_01J0000000000000000000000A"
	appB = "app_01J0000000000000000000000B"
)

func primaryTags(app string) []string {
	return []string{edge.TagService, edge.TagPrimary, edge.TagApp + app}
}

func TestPrimaryServices(t *testing.T) {
	got := primaryServices([]namespaceServices{
		{Namespace: "default", Services: []serviceStub{
			{ServiceName: "svc-notes-web", Tags: primaryTags(appA)},
			{ServiceName: "svc-notes-worker", Tags: []string{edge.TagService, edge.TagApp + appA}},
			{ServiceName: "redis", Tags: []string{"cache"}},
			{ServiceName: "svc-chat-web", Tags: primaryTags(appB)},
		}},
		{Namespace: "team", Services: []serviceStub{{ServiceName: "svc-other-web", Tags: primaryTags(appB)}}},
	}, "default")
	if want := []string{"svc-chat-web", "svc-notes-web"}; !slices.Equal(got, want) {
		t.Errorf("primaryServices = %v, want %v", got, want)
	}
}

func TestRegisteredUpstreams(t *testing.T) {
	got := registeredUpstreams([]registration{
		{ServiceName: "web", Tags: primaryTags(appA), Address: "10.0.0.2", Port: 8080},
		{ServiceName: "web", Tags: primaryTags(appA), Address: "10.0.0.1", Port: 8080},
		{ServiceName: "web", Tags: primaryTags(appA), Address: "10.0.0.1", Port: 8080}, // a duplicate
		{ServiceName: "web", Tags: primaryTags(appA), Address: "", Port: 8080},
		{ServiceName: "web", Tags: primaryTags(appA), Address: "10.0.0.3", Port: 0},
		{ServiceName: "web", Tags: []string{edge.TagService, edge.TagApp + appA}, Address: "10.0.0.4", Port: 8080},
		{ServiceName: "other", Tags: primaryTags(appA), Address: "10.0.0.5", Port: 8080}, // not what was asked for
		{ServiceName: "web", Tags: primaryTags(appB), Address: "fd00::1", Port: 80},
	}, "web")
	want := edge.Upstreams{appA: {"10.0.0.1:8080", "10.0.0.2:8080"}, appB: {"[fd00::1]:80"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("registeredUpstreams (-want +got):\n%s", d)
	}
}

func startOn(t *testing.T, s *fakenomadsd.Server, wait time.Duration) *Watcher {
	t.Helper()
	w, err := New(Config{Address: s.URL(), Wait: wait, RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fakeblock.Start(t, w.Run)
	return w
}

func reg(id, service, app string, port int) fakenomadsd.Registration {
	return fakenomadsd.Registration{ID: id, ServiceName: service, Tags: primaryTags(app), Port: port, JobID: "job-" + service, AllocID: "alloc-" + id}
}

func waitUpstreams(t *testing.T, w *Watcher, appID string, want ...string) {
	t.Helper()
	slices.Sort(want)
	waitFor(t, w, appID+" routed to "+strings.Join(want, ","), func(ups edge.Upstreams, _ bool) bool {
		got, ok := ups[appID]
		return slices.Equal(got, want) && (len(want) > 0 || !ok)
	})
}

func waitBlocked(t *testing.T, s *fakenomadsd.Server, n int) {
	t.Helper()
	fakeblock.WaitBlocked(t, s.Blocked, n, waitLimit)
}

func TestQueriesBlock(t *testing.T) {
	s := fakenomadsd.New()
	t.Cleanup(s.Close)
	s.Register(reg("a-1", "svc-a", appA, 8080))
	w := startOn(t, s, time.Minute)
	waitUpstreams(t, w, appA, "127.0.0.1:8080")
	s.Register(reg("a-2", "svc-a", appA, 8081))
	waitUpstreams(t, w, appA, "127.0.0.1:8080", "127.0.0.1:8081")
	s.Deregister("a-1")
	waitUpstreams(t, w, appA, "127.0.0.1:8081")
	first := map[string]bool{}
	for _, r := range s.Requests() {
		if r.Path == "/v1/status/leader" {
			continue
		}
		if r.Namespace != "default" {
			t.Errorf("%s in namespace %q", r.Path, r.Namespace)
		}
		if !first[r.Path] {
			first[r.Path] = true
			if r.Index != 0 {
				t.Errorf("the first query of %s waited on %d", r.Path, r.Index)
			}
			continue
		}
		if r.Index == 0 || r.Wait != time.Minute {
			t.Errorf("a later query of %s: index %d, wait %s", r.Path, r.Index, r.Wait)
		}
	}
	if !first["/v1/services"] || !first["/v1/service/svc-a"] {
		t.Errorf("queries seen: %v", first)
	}
}

func TestIndexGoingBackwardsStartsOver(t *testing.T) {
	s := fakenomadsd.New()
	t.Cleanup(s.Close)
	for i := range 10 {
		s.Register(reg("a-1", "svc-a", appA, 8000+i))
	}
	w := startOn(t, s, time.Minute)
	waitUpstreams(t, w, appA, "127.0.0.1:8009")
	waitBlocked(t, s, 2)
	s.Restore(3)
	s.Register(reg("a-2", "svc-a", appA, 9000))
	waitUpstreams(t, w, appA, "127.0.0.1:8009", "127.0.0.1:9000")
}

func TestFailuresKeepUpstreamsAndRecover(t *testing.T) {
	s := fakenomadsd.New()
	t.Cleanup(s.Close)
	s.Register(reg("a-1", "svc-a", appA, 8080))
	w := startOn(t, s, time.Minute)
	waitUpstreams(t, w, appA, "127.0.0.1:8080")
	s.FailWith(http.StatusInternalServerError)
	if err := waitCheck(t, w, func(err error) bool { return err != nil }); !errcode.Has(err, errcode.AdapterFailed) {
		t.Errorf("Check while nomad fails = %v", err)
	}
	if ups, _, _ := w.Upstreams(); !slices.Equal(ups[appA], []string{"127.0.0.1:8080"}) {
		t.Errorf("upstreams during the failure = %v, want the last known", ups)
	}
	s.FailWith(0)
	s.Register(reg("a-2", "svc-a", appA, 8081))
	waitUpstreams(t, w, appA, "127.0.0.1:8080", "127.0.0.1:8081")
	waitCheck(t, w, func(err error) bool { return err == nil })
}

func TestAppLeavingStopsItsWatch(t *testing.T) {
	s := fakenomadsd.New()
	t.Cleanup(s.Close)
	s.Register(reg("a-1", "svc-a", appA, 8080))
	s.Register(reg("b-1", "svc-b", appB, 8081))
	w := startOn(t, s, time.Minute)
	waitUpstreams(t, w, appB, "127.0.0.1:8081")
	waitFor(t, w, "sync", func(_ edge.Upstreams, synced bool) bool { return synced })
	s.Deregister("a-1")
	waitUpstreams(t, w, appA)
	if ups, synced, _ := w.Upstreams(); !synced || !slices.Equal(ups[appB], []string{"127.0.0.1:8081"}) {
		t.Errorf("after svc-a left: %v (synced %v)", ups, synced)
	}
}

func TestRunOnce(t *testing.T) {
	s := fakenomadsd.New()
	t.Cleanup(s.Close)
	w := startOn(t, s, time.Minute)
	waitFor(t, w, "sync", func(_ edge.Upstreams, synced bool) bool { return synced })
	if err := w.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Errorf("a second Run = %v", err)
	}
}

func TestCheck(t *testing.T) {
	s := fakenomadsd.New()
	w, err := New(Config{Address: s.URL() + "/", Token: "s3cr3t-token"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	for _, tc := range []struct {
		status int
		remedy string
	}{
		{http.StatusForbidden, "token"},
		{http.StatusInternalServerError, "leader"},
		{http.StatusNotFound, "address"},
		{http.StatusBadRequest, "namespace"},
	} {
		s.FailWith(tc.status)
		err := w.Check(ctx)
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.AdapterFailed || !strings.Contains(e.Remedy, tc.remedy) {
			t.Errorf("HTTP %d: %v, want ADAPTER_FAILED with a remedy about %s", tc.status, err, tc.remedy)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("HTTP %d: the error shows the token: %v", tc.status, err)
		}
	}
	s.FailWith(0)
	s.SetLeader("")
	if err := w.Check(ctx); !errcode.Has(err, errcode.AdapterFailed) {
		t.Errorf("no leader: %v", err)
	}
	s.Close()
	if err := w.Check(ctx); !errcode.Has(err, errcode.AdapterUnavailable) {
		t.Errorf("nomad gone: %v, want ADAPTER_UNAVAILABLE", err)
	}
}

func TestKind(t *testing.T) {
	k := Kind(nil)
	if k.Category != adapters.CategoryRoutes || k.Name != "nomad" || k.Default {
		t.Errorf("kind %s/%s", k.Category, k.Name)
	}
	for _, tc := range []struct {
		address, skip string
		ok            bool
	}{
		{"http://127.0.0.1:4646", "false", true},
		{"https://nomad.example.com:4646/", "true", true},
		{"127.0.0.1:4646", "false", false},
		{"http://", "false", false},
		{"http://127.0.0.1:4646?x=1", "false", false},
		{"http://127.0.0.1:4646", "perhaps", false},
	} {
		err := k.Validate(map[string]string{"address": tc.address, "tls_skip_verify": tc.skip, "namespace": "default"}, nil)
		if (err == nil) != tc.ok || (err != nil && !errcode.Has(err, errcode.ValidInvalid)) {
			t.Errorf("%s %s: %v", tc.address, tc.skip, err)
		}
	}
	if err := k.Validate(map[string]string{"address": "http://127.0.0.1:4646", "tls_skip_verify": "false", "namespace": "*"}, nil); !errcode.Has(err, errcode.ValidInvalid) {
		t.Errorf("namespace *: %v", err)
	}
	inst, err := k.Open(context.Background(), adapters.Config{
		Settings:    map[string]string{"address": "http://127.0.0.1:1", "namespace": "team", "region": "global", "tls_skip_verify": "false"},
		Credentials: map[string]string{"token": "t"},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := inst.(*Watcher)
	if w.c.token != "t" || w.c.namespace != "team" || w.c.region != "global" {
		t.Errorf("client %+v", w.c)
	}
	caps := inst.Capabilities()
	if caps["health_filtered"] != false || caps["blocking_queries"] != true || caps["namespace"] != "team" {
		t.Errorf("capabilities %v", caps)
	}
	if _, err := k.Open(context.Background(), adapters.Config{Settings: map[string]string{"address": "https://127.0.0.1:1", "ca_cert": "/nonexistent.pem", "tls_skip_verify": "false"}}); !errcode.Has(err, errcode.AdapterFailed) {
		t.Errorf("an unreadable ca_cert: %v", err)
	}
}
