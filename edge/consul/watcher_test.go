package consul

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/edge/blocking/fakeblock"
	"github.com/svchost/svc/edge/consul/fakeconsul"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
)

const (
	appA = "app_01J0000000000000000000000A"
	appB = "app_01J0000000000000000000000B"
)

func TestPrimaryServices(t *testing.T) {
	got := primaryServices(map[string][]string{
		"consul":             {},
		"svc-notes-web":      {edge.TagService, edge.TagPrimary, edge.TagApp + appA},
		"svc-notes-worker":   {edge.TagService, edge.TagApp + appA},
		"svc-chat-web":       {edge.TagPrimary, edge.TagService},
		"redis":              {"cache"},
		"svc-mixed-instance": {"a", edge.TagPrimary, "b", edge.TagService},
	})
	want := []string{"svc-chat-web", "svc-mixed-instance", "svc-notes-web"}
	if !slices.Equal(got, want) {
		t.Errorf("primaryServices = %v, want %v", got, want)
	}
}

func TestPassingUpstreams(t *testing.T) {
	primary := func(app string) []string { return []string{edge.TagService, edge.TagPrimary, edge.TagApp + app} }
	pass := api.HealthChecks{{Status: api.HealthPassing}, {Status: api.HealthPassing}}
	entry := func(tags []string, nodeAddr, addr string, port int, checks api.HealthChecks) *api.ServiceEntry {
		return &api.ServiceEntry{Node: &api.Node{Address: nodeAddr}, Service: &api.AgentService{Tags: tags, Address: addr, Port: port}, Checks: checks}
	}
	got := passingUpstreams([]*api.ServiceEntry{
		entry(primary(appA), "10.0.0.1", "10.1.0.1", 8080, pass),
		entry(primary(appA), "10.0.0.2", "", 8080, pass), // the node's address
		entry(primary(appA), "10.0.0.2", "", 8080, pass), // a duplicate
		entry(primary(appA), "10.0.0.3", "", 8080, api.HealthChecks{{Status: api.HealthPassing}, {Status: api.HealthWarning}}),
		entry(primary(appA), "10.0.0.4", "", 8080, api.HealthChecks{{Status: api.HealthCritical}}),
		entry(primary(appA), "10.0.0.5", "", 8080, api.HealthChecks{{Status: api.HealthMaint}}),
		entry(primary(appA), "10.0.0.6", "", 0, pass),                                    // no port
		entry(primary(appA), "10.0.0.6", "", 70000, pass),                                // not a port
		entry(primary(appA), "", "", 8080, pass),                                         // no address at all
		entry([]string{edge.TagService, edge.TagApp + appA}, "10.0.0.7", "", 8080, pass), // a secondary workload
		entry(primary(appB), "10.0.0.8", "fd00::8", 443, pass),
		{Node: &api.Node{Address: "10.0.0.9"}}, // no service
		nil,
	})
	want := edge.Upstreams{appA: {"10.0.0.2:8080", "10.1.0.1:8080"}, appB: {"[fd00::8]:443"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("passingUpstreams (-want +got):\n%s", d)
	}
}

// startOn starts a watcher on a fake Consul without ACLs.
func startOn(t *testing.T, s *fakeconsul.Server, wait time.Duration) *Watcher {
	t.Helper()
	w, err := New(Config{Address: s.URL(), Wait: wait, RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fakeblock.Start(t, w.Run)
	return w
}

func primaryInstance(id, service, app string, port int) fakeconsul.Instance {
	return fakeconsul.Instance{ID: id, Name: service, Port: port, Tags: []string{edge.TagService, edge.TagPrimary, edge.TagApp + app}}
}

func TestQueriesBlock(t *testing.T) {
	s := fakeconsul.New()
	t.Cleanup(s.Close) // after the watcher's cleanup
	s.Register(primaryInstance("a-1", "svc-a", appA, 8080))
	w := startOn(t, s, time.Minute)
	waitUpstreams(t, w, appA, "127.0.0.1:8080")
	s.SetStatus("a-1", fakeconsul.Critical)
	waitUpstreams(t, w, appA)
	s.SetStatus("a-1", fakeconsul.Passing)
	waitUpstreams(t, w, appA, "127.0.0.1:8080")

	// Every query after the first of each watch waited on an index, and
	// health queries asked for passing instances only.
	first := map[string]bool{}
	for _, r := range s.Requests() {
		if r.Path == "/v1/status/leader" {
			continue
		}
		if strings.HasPrefix(r.Path, "/v1/health/") && !r.Passing {
			t.Errorf("%s without ?passing", r.Path)
		}
		if r.Wait != time.Minute {
			t.Errorf("%s waited %s, want a minute", r.Path, r.Wait)
		}
		if !first[r.Path] {
			first[r.Path] = true
			if r.Index != 0 {
				t.Errorf("the first query of %s waited on %d", r.Path, r.Index)
			}
			continue
		}
		if r.Index == 0 {
			t.Errorf("a later query of %s did not block (index 0)", r.Path)
		}
	}
	if !first["/v1/catalog/services"] || !first["/v1/health/service/svc-a"] {
		t.Errorf("queries seen: %v", first)
	}
}

func TestIndexGoingBackwardsStartsOver(t *testing.T) {
	s := fakeconsul.New()
	t.Cleanup(s.Close)  // after the watcher's cleanup
	for i := range 10 { // push the index up
		s.Register(primaryInstance("a-1", "svc-a", appA, 8000+i))
	}
	w := startOn(t, s, time.Minute)
	waitUpstreams(t, w, appA, "127.0.0.1:8009")
	// The cluster is restored from an older snapshot: its index is now
	// below what the watcher waits on. A watcher that kept waiting on its
	// index would not see the next change for a minute. (The queries are
	// parked first: one sent after the restore with the old index would
	// wait its full minute, in Consul as in the fake.)
	waitBlocked(t, s, 2)
	s.Restore(3)
	s.Register(primaryInstance("a-2", "svc-a", appA, 9000))
	waitUpstreams(t, w, appA, "127.0.0.1:8009", "127.0.0.1:9000")
	waitBlocked(t, s, 2) // parked again, so every query before is recorded
	reset := false
	for _, r := range s.Requests() {
		if r.Path == "/v1/health/service/svc-a" && r.Index == 0 {
			if reset {
				return
			}
			reset = true // the first query; a second index 0 is the reset
		}
	}
	t.Error("no query started over at index 0 after the index went backwards")
}

func TestFailuresKeepUpstreamsAndRecover(t *testing.T) {
	s := fakeconsul.New()
	t.Cleanup(s.Close) // after the watcher's cleanup
	s.Register(primaryInstance("a-1", "svc-a", appA, 8080))
	w := startOn(t, s, time.Minute)
	waitUpstreams(t, w, appA, "127.0.0.1:8080")

	s.FailWith(http.StatusInternalServerError)
	err := waitCheck(t, w, func(err error) bool { return err != nil })
	if !errcode.Has(err, errcode.AdapterFailed) {
		t.Errorf("Check while consul fails = %v, want ADAPTER_FAILED", err)
	}
	if ups, _, _ := w.Upstreams(); !slices.Equal(ups[appA], []string{"127.0.0.1:8080"}) {
		t.Errorf("upstreams during the failure = %v, want the last known", ups)
	}
	s.FailWith(0)
	s.Register(primaryInstance("a-2", "svc-a", appA, 8081))
	waitUpstreams(t, w, appA, "127.0.0.1:8080", "127.0.0.1:8081")
	waitCheck(t, w, func(err error) bool { return err == nil })
}

func TestAppLeavingTheCatalogStopsItsWatch(t *testing.T) {
	s := fakeconsul.New()
	t.Cleanup(s.Close) // after the watcher's cleanup
	s.Register(primaryInstance("a-1", "svc-a", appA, 8080))
	s.Register(primaryInstance("b-1", "svc-b", appB, 8081))
	w := startOn(t, s, time.Minute)
	waitUpstreams(t, w, appB, "127.0.0.1:8081")
	waitFor(t, w, "sync", func(_ edge.Upstreams, synced bool) bool { return synced })
	waitBlocked(t, s, 3) // the catalog and two services
	s.Deregister("a-1")
	waitUpstreams(t, w, appA)
	waitBlocked(t, s, 2) // the catalog and svc-b: svc-a's query ended
	if ups, synced, _ := w.Upstreams(); !synced || !slices.Equal(ups[appB], []string{"127.0.0.1:8081"}) {
		t.Errorf("after svc-a left: %v (synced %v)", ups, synced)
	}
}

func waitBlocked(t *testing.T, s *fakeconsul.Server, n int) {
	t.Helper()
	fakeblock.WaitBlocked(t, s.Blocked, n, waitLimit)
}

func TestRunOnce(t *testing.T) {
	s := fakeconsul.New()
	t.Cleanup(s.Close) // after the watcher's cleanup
	w := startOn(t, s, time.Minute)
	waitFor(t, w, "sync", func(_ edge.Upstreams, synced bool) bool { return synced })
	if err := w.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Errorf("a second Run = %v, want ErrRunning", err)
	}
}

func TestCheck(t *testing.T) {
	s := fakeconsul.New()
	w, err := New(Config{Address: s.URL(), Token: "s3cr3t-token"})
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
		{http.StatusUnauthorized, "token"},
		{http.StatusInternalServerError, "leader"},
		{http.StatusNotFound, "address"},
		{http.StatusTooManyRequests, "rate"},
		{http.StatusBadRequest, "datacenter"},
	} {
		s.FailWith(tc.status)
		err := w.Check(ctx)
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.AdapterFailed || !strings.Contains(e.Remedy, tc.remedy) {
			t.Errorf("HTTP %d: %v (remedy %q), want ADAPTER_FAILED with a remedy about %s", tc.status, err, e.Remedy, tc.remedy)
		}
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(e.Message, "Forbidden") {
			t.Errorf("HTTP %d: the error shows the token or consul's body: %v", tc.status, err)
		}
	}
	s.FailWith(0)
	s.SetLeader("")
	if err := w.Check(ctx); !errcode.Has(err, errcode.AdapterFailed) {
		t.Errorf("no leader: %v", err)
	}
	s.Close()
	if err := w.Check(ctx); !errcode.Has(err, errcode.AdapterUnavailable) {
		t.Errorf("consul gone: %v, want ADAPTER_UNAVAILABLE", err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-cctx.Done()
	if err := w.Check(cctx); !errcode.Has(err, errcode.AdapterUnavailable) {
		t.Errorf("deadline: %v, want ADAPTER_UNAVAILABLE", err)
	}
}

func TestKind(t *testing.T) {
	k := Kind(nil)
	if k.Category != adapters.CategoryRoutes || k.Name != "consul" || k.Default {
		t.Errorf("kind %s/%s default %v", k.Category, k.Name, k.Default)
	}
	settings := func(kv ...string) map[string]string {
		m := map[string]string{"tls_skip_verify": "false"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		settings map[string]string
		field    string
	}{
		{settings("address", "http://127.0.0.1:8500"), ""},
		{settings("address", "https://consul.example.com:8501/prefix"), ""},
		{settings("address", "127.0.0.1:8500"), "config.address"},
		{settings("address", "unix:///run/consul.sock"), "config.address"},
		{settings("address", "http://"), "config.address"},
		{settings("address", "http://user:pass@consul:8500"), "config.address"},
		{settings("address", "http://consul:8500", "tls_skip_verify", "maybe"), "config.tls_skip_verify"},
	} {
		err := k.Validate(tc.settings, nil)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.settings, err)
			}
			continue
		}
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != tc.field {
			t.Errorf("%v: %v, want VALID_INVALID on %s", tc.settings, err, tc.field)
		}
	}
	var token bool
	for _, s := range k.Settings {
		if s.Name == "token" {
			token = s.Credential
		}
	}
	if !token {
		t.Error("token is not a credential")
	}

	inst, err := k.Open(context.Background(), adapters.Config{ID: "adp_x",
		Settings:    settings("address", "http://127.0.0.1:1", "datacenter", "dc1"),
		Credentials: map[string]string{"token": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := inst.(*Watcher)
	if !ok {
		t.Fatalf("Open returned %T", inst)
	}
	if w.cfg.Token != "t" || w.cfg.Datacenter != "dc1" {
		t.Errorf("config %+v", w.cfg)
	}
	caps := inst.Capabilities()
	if caps["health_filtered"] != true || caps["blocking_queries"] != true || caps["synced"] != false {
		t.Errorf("capabilities %v", caps)
	}
	if _, err := k.Open(context.Background(), adapters.Config{Settings: settings("address", "https://127.0.0.1:1", "ca_cert", "/nonexistent.pem")}); !errcode.Has(err, errcode.AdapterFailed) {
		t.Errorf("an unreadable ca_cert: %v", err)
	}
}
