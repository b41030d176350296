package fakeconsul

import (
	"encoding/json"
	"net/http"
	"net/url"
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
		params url.Values
		status int
	}{
		{params("wait", "soon"), http.StatusBadRequest},
		{params("wait", "10"), http.StatusBadRequest}, // no unit: not a Go duration
		{params("index", "-1"), http.StatusBadRequest},
		{params("index", "x"), http.StatusBadRequest},
		{params("passing", "perhaps"), http.StatusBadRequest},
		{params("dc", "dc9"), http.StatusInternalServerError},
		{params("dc", Datacenter, "wait", "1500ms", "passing", "1"), http.StatusOK},
	} {
		if a := get(s, "/v1/health/service/web", tc.params, ""); a.status != tc.status {
			t.Errorf("%v: status %d, want %d", tc.params, a.status, tc.status)
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
		q, status, _ := parseQuery(params("wait", tc.wait))
		if status != 0 || q.wait != tc.want {
			t.Errorf("wait %q: %v (status %d), want %v", tc.wait, q.wait, status, tc.want)
		}
	}
	if a := get(s, "/v1/nothing", nil, ""); a.status != http.StatusNotFound {
		t.Errorf("unknown path: %d", a.status)
	}
	resp, err := http.Post(s.URL()+"/v1/catalog/services", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestACL(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Instance{ID: "web-1", Name: "web", Port: 8080})
	s.EnableACL("root")
	if got := entries(t, get(s, "/v1/health/service/web", nil, "root")); len(got) != 1 {
		t.Errorf("the management token sees %d instances", len(got))
	}
	anon := get(s, "/v1/health/service/web", nil, "")
	if got := entries(t, anon); len(got) != 0 || !anon.filtered {
		t.Errorf("no token sees %d instances (filtered header %v)", len(got), anon.filtered)
	}
	if a := get(s, "/v1/catalog/services", nil, "wrong"); a.status != http.StatusForbidden {
		t.Errorf("an unknown token: %d", a.status)
	}
	if a := get(s, "/v1/status/leader", nil, "wrong"); a.status != http.StatusOK {
		t.Errorf("status/leader with an unknown token: %d", a.status)
	}
	var seen []string
	for _, r := range s.Requests() {
		seen = append(seen, r.Token)
	}
	if len(seen) != 4 || seen[0] != "root" || seen[1] != "" || seen[2] != "wrong" {
		t.Errorf("tokens seen: %q", seen)
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
