package fakeconsul

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/svchost/svc/edge/blocking/fakeblock"
)

// answer is one HTTP answer of the fake.
type answer struct {
	status   int
	index    uint64
	filtered bool
	body     []byte
	err      error
}

func get(s *Server, path string, params url.Values, token string) answer {
	req, err := http.NewRequest(http.MethodGet, s.URL()+path+"?"+params.Encode(), nil)
	if err != nil {
		return answer{err: err}
	}
	if token != "" {
		req.Header.Set("X-Consul-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	ix, _ := strconv.ParseUint(resp.Header.Get("X-Consul-Index"), 10, 64)
	return answer{status: resp.StatusCode, index: ix, filtered: resp.Header.Get("X-Consul-Results-Filtered-By-ACLs") == "true", body: raw}
}

// getAsync runs get in the background.
func getAsync(s *Server, path string, params url.Values, token string) <-chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- get(s, path, params, token) }()
	return ch
}

// waitBlocked waits until n queries are blocked in the fake.
func waitBlocked(t *testing.T, s *Server, n int) {
	t.Helper()
	fakeblock.WaitBlocked(t, s.Blocked, n, 10*time.Second)
}

func entries(t *testing.T, a answer) []*api.ServiceEntry {
	t.Helper()
	if a.err != nil || a.status != http.StatusOK {
		t.Fatalf("answer: %d %v %s", a.status, a.err, a.body)
	}
	var out []*api.ServiceEntry
	if err := json.Unmarshal(a.body, &out); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
	return out
}

func params(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func TestBlockedQueryReturnsOnChangeNotBefore(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Instance{ID: "web-1", Name: "web", Port: 8080, Tags: []string{"svc"}})
	first := get(s, "/v1/health/service/web", params("passing", "1"), "")
	if n := len(entries(t, first)); n != 1 || first.index == 0 {
		t.Fatalf("first answer: %d entries, index %d", n, first.index)
	}

	got := getAsync(s, "/v1/health/service/web", params("passing", "1", "index", strconv.FormatUint(first.index, 10), "wait", "1m"), "")
	waitBlocked(t, s, 1)
	// A change to another service does not wake it up for good.
	s.Register(Instance{ID: "db-1", Name: "db", Port: 5432})
	waitBlocked(t, s, 1)
	select {
	case a := <-got:
		t.Fatalf("the query returned before its service changed: %+v", a)
	default:
	}
	s.Register(Instance{ID: "web-2", Name: "web", Port: 8081, Tags: []string{"svc"}})
	a := <-got
	if a.index <= first.index {
		t.Errorf("index %d after a change, want more than %d", a.index, first.index)
	}
	if n := len(entries(t, a)); n != 2 {
		t.Errorf("%d instances after the change, want 2", n)
	}
	waitBlocked(t, s, 0)
}

func TestNonBlockingAndWaitElapsing(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Instance{ID: "web-1", Name: "web", Port: 8080})
	a := get(s, "/v1/health/service/web", params("index", "0", "wait", "1m"), "")
	if len(entries(t, a)) != 1 {
		t.Fatal("index=0 did not answer at once with the instance")
	}
	// The wait elapses: the same index comes back, and the same content.
	b := get(s, "/v1/health/service/web", params("index", strconv.FormatUint(a.index, 10), "wait", "20ms"), "")
	if b.index != a.index || len(entries(t, b)) != 1 {
		t.Errorf("after the wait: index %d (want %d)", b.index, a.index)
	}
	// An unknown service answers an empty list, with an index.
	c := get(s, "/v1/health/service/nothing", nil, "")
	if len(entries(t, c)) != 0 || c.index == 0 {
		t.Errorf("unknown service: %s index %d", c.body, c.index)
	}
}

func TestCatalogAndHealthIndexes(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Instance{ID: "web-1", Name: "web", Port: 8080, Tags: []string{"svc", "a"}})
	s.Register(Instance{ID: "web-2", Name: "web", Port: 8081, Tags: []string{"svc", "b"}})
	cat := get(s, "/v1/catalog/services", nil, "")
	var names map[string][]string
	if err := json.Unmarshal(cat.body, &names); err != nil {
		t.Fatal(err)
	}
	if got := names["web"]; len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "svc" {
		t.Errorf("catalog tags of web = %v, want the union [a b svc]", got)
	}
	if _, ok := names["consul"]; !ok {
		t.Error("the catalog lacks consul itself")
	}

	// A check flip moves the service's index, not the catalog's.
	health := get(s, "/v1/health/service/web", params("passing", ""), "")
	catBlocked := getAsync(s, "/v1/catalog/services", params("index", strconv.FormatUint(cat.index, 10), "wait", "1m"), "")
	waitBlocked(t, s, 1)
	s.SetStatus("web-1", Critical)
	a := get(s, "/v1/health/service/web", params("passing", ""), "")
	if a.index <= health.index {
		t.Errorf("health index %d after a check flip, want more than %d", a.index, health.index)
	}
	if got := entries(t, a); len(got) != 1 || got[0].Service.ID != "web-2" {
		t.Errorf("passing instances after web-1 failed: %d", len(got))
	}
	if all := entries(t, get(s, "/v1/health/service/web", nil, "")); len(all) != 2 {
		t.Errorf("without ?passing: %d instances, want 2", len(all))
	}
	s.SetStatus("web-2", Warning)
	if got := entries(t, get(s, "/v1/health/service/web", params("passing", "true"), "")); len(got) != 0 {
		t.Errorf("a warning instance is passing")
	}
	if got := entries(t, get(s, "/v1/health/service/web", params("passing", "false"), "")); len(got) != 2 {
		t.Errorf("passing=false filtered")
	}
	waitBlocked(t, s, 1) // the catalog query slept through the flips
	s.Deregister("web-1")
	if c := <-catBlocked; c.index <= cat.index {
		t.Errorf("catalog index %d after a deregistration, want more than %d", c.index, cat.index)
	}
}

func TestParameters(t *testing.T) {
	s := New()
	defer s.Close()
	for _, tc := range []struct {
		path   string
		params url.Values
		status int
	}{
		{"/v1/health/service/web", params("wait", "soon"), http.StatusBadRequest},
		{"/v1/health/service/web", params("wait", "10"), http.StatusBadRequest}, // no unit: not a Go duration
		{"/v1/health/service/web", params("index", "-1"), http.StatusBadRequest},
		{"/v1/health/service/web", params("index", "x"), http.StatusBadRequest},
		{"/v1/health/service/web", params("passing", "perhaps"), http.StatusBadRequest},
		{"/v1/health/service/web", params("dc", "dc9"), http.StatusInternalServerError},
		{"/v1/health/service/web", params("ns", "team-a"), http.StatusBadRequest},      // Enterprise only
		{"/v1/catalog/services", params("partition", "team-a"), http.StatusBadRequest}, // Enterprise only
		{"/v1/health/service/", nil, http.StatusBadRequest},                            // no service name
		{"/v1/catalog/services", params("passing", "perhaps"), http.StatusOK},          // not a catalog parameter
		{"/v1/status/leader", params("dc", "dc9"), http.StatusInternalServerError},     // forwarded like any read
		{"/v1/status/leader", params("wait", "soon"), http.StatusBadRequest},           // parsed like any read
		{"/v1/status/leader", params("ns", "team-a"), http.StatusOK},                   // no namespace to check
		{"/v1/health/service/web", params("dc", Datacenter, "wait", "1500ms", "passing", "1"), http.StatusOK},
	} {
		if a := get(s, tc.path, tc.params, ""); a.status != tc.status {
			t.Errorf("%s?%s: status %d, want %d", tc.path, tc.params.Encode(), a.status, tc.status)
		}
	}
	for _, tc := range []struct {
		wait string
		want time.Duration
	}{
		{"", DefaultWait},
		{"20m", MaxWait},
		{"90s", 90 * time.Second},
		{"60000ms", time.Minute}, // as consul/api sends it
	} {
		q, status, _ := parseQuery(params("wait", tc.wait), true)
		if status != 0 || q.wait != tc.want {
			t.Errorf("wait %q: %v (status %d), want %v", tc.wait, q.wait, status, tc.want)
		}
	}
}

// TestMethodsAndPaths: the fake's endpoints take GET only, as Consul
// registers them (405 with the Allow header, OPTIONS answered with it),
// and any other path is a 404 whatever the method, as Consul has no
// endpoint there either.
func TestMethodsAndPaths(t *testing.T) {
	s := New()
	defer s.Close()
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/v1/catalog/services", http.StatusOK, ""},
		{http.MethodHead, "/v1/catalog/services", http.StatusMethodNotAllowed, allowed},
		{http.MethodPost, "/v1/catalog/services", http.StatusMethodNotAllowed, allowed},
		{http.MethodPut, "/v1/health/service/web", http.StatusMethodNotAllowed, allowed},
		{http.MethodDelete, "/v1/status/leader", http.StatusMethodNotAllowed, allowed},
		{http.MethodOptions, "/v1/health/service/web", http.StatusOK, allowed},
		{http.MethodGet, "/v1/nothing", http.StatusNotFound, ""},
		{http.MethodGet, "/v1/catalog/services/", http.StatusNotFound, ""},
		{http.MethodGet, "/v1/agent/services", http.StatusNotFound, ""}, // Consul has it; the fake does not
	} {
		req, err := http.NewRequest(tc.method, s.URL()+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d (Allow %q), want %d (Allow %q)", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.status, tc.allow)
		}
	}
}

func TestACL(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Instance{ID: "web-1", Name: "web", Port: 8080})
	s.Register(Instance{ID: "web-2", Name: "web", Node: "node2", Port: 8080})
	s.Register(Instance{ID: "db-1", Name: "db", Port: 5432})
	s.EnableACL("root")
	s.AddToken("web-reader", Policy{Services: []string{"web"}, Nodes: []string{""}})
	s.AddToken("node1-reader", Policy{Services: []string{""}, Nodes: []string{"node1"}})
	s.AddToken("services-only", Policy{Services: []string{""}})

	catalog := func(token string) (names []string, filtered bool) {
		t.Helper()
		a := get(s, "/v1/catalog/services", nil, token)
		var m map[string][]string
		if err := json.Unmarshal(a.body, &m); err != nil || a.status != http.StatusOK {
			t.Fatalf("catalog with %q: %d %s", token, a.status, a.body)
		}
		for name := range m {
			names = append(names, name)
		}
		slices.Sort(names)
		return names, a.filtered
	}
	health := func(token string) (ids []string, filtered bool) {
		t.Helper()
		a := get(s, "/v1/health/service/web", nil, token)
		for _, e := range entries(t, a) {
			ids = append(ids, e.Service.ID)
		}
		return ids, a.filtered
	}
	for _, tc := range []struct {
		token            string
		catalog, web     []string
		catFilt, webFilt bool
	}{
		// The management token sees everything and nothing is filtered.
		{"root", []string{"consul", "db", "web"}, []string{"web-1", "web-2"}, false, false},
		// No token: the anonymous token, denied by default. Consul never
		// tells a request without a token that ACLs filtered it.
		{"", nil, nil, false, false},
		{"web-reader", []string{"web"}, []string{"web-1", "web-2"}, true, false},
		// An instance needs node:read on its node as well.
		{"node1-reader", []string{"consul", "db", "web"}, []string{"web-1"}, false, true},
		{"services-only", []string{"consul", "db", "web"}, nil, false, true},
	} {
		names, catFilt := catalog(tc.token)
		web, webFilt := health(tc.token)
		if !slices.Equal(names, tc.catalog) || catFilt != tc.catFilt || !slices.Equal(web, tc.web) || webFilt != tc.webFilt {
			t.Errorf("token %q: catalog %v (filtered %v), web %v (filtered %v); want %v (%v), %v (%v)",
				tc.token, names, catFilt, web, webFilt, tc.catalog, tc.catFilt, tc.web, tc.webFilt)
		}
	}
	if a := get(s, "/v1/catalog/services", nil, "wrong"); a.status != http.StatusForbidden {
		t.Errorf("an unknown token: %d", a.status)
	}
	if a := get(s, "/v1/status/leader", nil, "wrong"); a.status != http.StatusOK {
		t.Errorf("status/leader with an unknown token: %d", a.status)
	}
	// Consul takes ?token= before the header, and a bearer token in any
	// case of its scheme.
	if a := get(s, "/v1/catalog/services", params("token", "wrong"), "root"); a.status != http.StatusForbidden {
		t.Errorf("?token=wrong with the management token in the header: %d, want 403", a.status)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v1/catalog/services", nil)
	req.Header.Set("Authorization", "bearer wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a lowercase bearer token: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestRegisterMovesOnlyWhatChanged: as in Consul's state store, a
// registration that changes nothing moves no index, and one that changes
// only the check's status moves the service's health index alone.
func TestRegisterMovesOnlyWhatChanged(t *testing.T) {
	s := New()
	defer s.Close()
	web := Instance{ID: "web-1", Name: "web", Port: 8080, Tags: []string{"svc"}}
	s.Register(web)
	cat, health := get(s, "/v1/catalog/services", nil, ""), get(s, "/v1/health/service/web", nil, "")
	before := s.Index()
	s.Register(web)
	if s.Index() != before {
		t.Errorf("an identical registration moved the index from %d to %d", before, s.Index())
	}
	web.Status = Critical
	s.Register(web)
	if c := get(s, "/v1/catalog/services", nil, ""); c.index != cat.index {
		t.Errorf("a check's status moved the catalog's index from %d to %d", cat.index, c.index)
	}
	if h := get(s, "/v1/health/service/web", nil, ""); h.index <= health.index {
		t.Errorf("a check's status left the health index at %d (was %d)", h.index, health.index)
	}
	web.Port = 8081
	s.Register(web)
	if c := get(s, "/v1/catalog/services", nil, ""); c.index <= cat.index {
		t.Errorf("a new port left the catalog's index at %d", c.index)
	}
}

// TestExtinctionIndex: a service without instances reads at the index of
// the last service that lost its last instance, as in Consul.
func TestExtinctionIndex(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Instance{ID: "web-1", Name: "web", Port: 8080})
	s.Register(Instance{ID: "db-1", Name: "db", Port: 5432})
	s.Deregister("web-1")
	gone := s.Index()
	for _, name := range []string{"web", "never-registered"} {
		if a := get(s, "/v1/health/service/"+name, nil, ""); a.index != gone {
			t.Errorf("%s reads at %d, want the extinction index %d", name, a.index, gone)
		}
	}
	s.Deregister("db-1")
	if a := get(s, "/v1/health/service/web", nil, ""); a.index != s.Index() {
		t.Errorf("web reads at %d after db went too, want %d", a.index, s.Index())
	}
}

// TestNoLeader: without a leader Consul still names none on
// /v1/status/leader, and fails every read, blocked ones as they wake.
func TestNoLeader(t *testing.T) {
	s := New()
	defer s.Close()
	a := get(s, "/v1/catalog/services", nil, "")
	got := getAsync(s, "/v1/catalog/services", params("index", strconv.FormatUint(a.index, 10)), "")
	waitBlocked(t, s, 1)
	s.SetLeader("")
	if b := <-got; b.status != http.StatusInternalServerError {
		t.Errorf("a blocked query when the leader went: %d", b.status)
	}
	if b := get(s, "/v1/health/service/web", nil, ""); b.status != http.StatusInternalServerError {
		t.Errorf("a read without a leader: %d", b.status)
	}
	if b := get(s, "/v1/status/leader", nil, ""); b.status != http.StatusOK || string(b.body) != `""` {
		t.Errorf("status/leader without a leader: %d %s", b.status, b.body)
	}
}

func TestRestoreAbandonsBlockedQueries(t *testing.T) {
	s := New()
	defer s.Close()
	for i := range 5 {
		s.Register(Instance{ID: "web-" + strconv.Itoa(i), Name: "web", Port: 8080 + i})
	}
	a := get(s, "/v1/health/service/web", nil, "")
	got := getAsync(s, "/v1/health/service/web", params("index", strconv.FormatUint(a.index, 10)), "")
	waitBlocked(t, s, 1)
	s.Restore(2)
	b := <-got
	if b.status != http.StatusOK || b.index >= a.index {
		t.Errorf("after a restore: status %d index %d, want an index below %d", b.status, b.index, a.index)
	}
}

func TestFailWith(t *testing.T) {
	s := New()
	defer s.Close()
	a := get(s, "/v1/catalog/services", nil, "")
	got := getAsync(s, "/v1/catalog/services", params("index", strconv.FormatUint(a.index, 10)), "")
	waitBlocked(t, s, 1)
	s.FailWith(http.StatusInternalServerError)
	if b := <-got; b.status != http.StatusInternalServerError {
		t.Errorf("a blocked query during a failure: %d", b.status)
	}
	s.FailWith(0)
	if b := get(s, "/v1/catalog/services", nil, ""); b.status != http.StatusOK {
		t.Errorf("after the failure: %d", b.status)
	}
}
