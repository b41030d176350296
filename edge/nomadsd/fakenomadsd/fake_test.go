package fakenomadsd

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/svchost/svc/edge/blocking/fakeblock"
)

type answer struct {
	status int
	index  uint64
	body   []byte
	err    error
}

func get(s *Server, path string, params url.Values, token string) answer {
	req, err := http.NewRequest(http.MethodGet, s.URL()+path+"?"+params.Encode(), nil)
	if err != nil {
		return answer{err: err}
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	ix, _ := strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	return answer{status: resp.StatusCode, index: ix, body: raw}
}

func getAsync(s *Server, path string, params url.Values, token string) <-chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- get(s, path, params, token) }()
	return ch
}

func waitBlocked(t *testing.T, s *Server, n int) {
	t.Helper()
	fakeblock.WaitBlocked(t, s.Blocked, n, 10*time.Second)
}

func regs(t *testing.T, a answer) []Registration {
	t.Helper()
	if a.err != nil || a.status != http.StatusOK {
		t.Fatalf("answer: %d %v %s", a.status, a.err, a.body)
	}
	var out []Registration
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

func TestBlockedQueryReturnsOnItsServicesChange(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Registration{ID: "web-1", ServiceName: "web", Port: 8080, JobID: "svc-notes", AllocID: "a1"})
	first := get(s, "/v1/service/web", nil, "")
	if n := len(regs(t, first)); n != 1 || first.index == 0 {
		t.Fatalf("first answer: %d registrations, index %d", n, first.index)
	}
	got := getAsync(s, "/v1/service/web", params("index", strconv.FormatUint(first.index, 10), "wait", "1m"), "")
	waitBlocked(t, s, 1)
	// Another service's change moves the table's index but does not wake
	// a query on web.
	s.Register(Registration{ID: "db-1", ServiceName: "db", Port: 5432})
	waitBlocked(t, s, 1)
	select {
	case a := <-got:
		t.Fatalf("the query returned on another service's change: %+v", a)
	default:
	}
	// A new query with the old index answers at once: the table moved.
	if a := get(s, "/v1/service/web", params("index", strconv.FormatUint(first.index, 10), "wait", "1m"), ""); len(regs(t, a)) != 1 || a.index <= first.index {
		t.Errorf("a fresh query behind the table's index: index %d", a.index)
	}
	s.Register(Registration{ID: "web-2", ServiceName: "web", Port: 8081})
	a := <-got
	if a.index <= first.index || len(regs(t, a)) != 2 {
		t.Errorf("after web changed: index %d, %s", a.index, a.body)
	}
	var r []map[string]any
	_ = json.Unmarshal(a.body, &r)
	for _, field := range []string{"ID", "ServiceName", "Namespace", "NodeID", "Datacenter", "JobID", "AllocID", "Tags", "Address", "Port", "CreateIndex", "ModifyIndex"} {
		if _, ok := r[0][field]; !ok {
			t.Errorf("a registration lacks %s: %v", field, r[0])
		}
	}
}

func TestListAndNamespaces(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Registration{ID: "web-1", ServiceName: "web", Tags: []string{"svc", "a"}})
	s.Register(Registration{ID: "web-2", ServiceName: "web", Tags: []string{"svc", "b"}})
	s.Register(Registration{ID: "api-1", ServiceName: "api", Namespace: "team", Tags: []string{"svc"}})
	var list []namespaceServices
	a := get(s, "/v1/services", nil, "")
	if err := json.Unmarshal(a.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Namespace != "default" || len(list[0].Services) != 1 || len(list[0].Services[0].Tags) != 3 {
		t.Errorf("default namespace: %s", a.body)
	}
	if err := json.Unmarshal(get(s, "/v1/services", params("namespace", "*"), "").body, &list); err != nil || len(list) != 2 {
		t.Errorf("all namespaces: %v %v", list, err)
	}
	if n := len(regs(t, get(s, "/v1/service/api", params("namespace", "team"), ""))); n != 1 {
		t.Errorf("api in team: %d", n)
	}
	if n := len(regs(t, get(s, "/v1/service/api", nil, ""))); n != 0 {
		t.Errorf("api in default: %d", n)
	}
	got := getAsync(s, "/v1/services", params("index", strconv.FormatUint(a.index, 10)), "")
	waitBlocked(t, s, 1)
	s.Deregister("web-1")
	if b := <-got; b.index <= a.index {
		t.Errorf("list index after a deregistration: %d", b.index)
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
		{params("index", "x"), http.StatusBadRequest},
		{params("region", "mars"), http.StatusInternalServerError},
		{params("region", Region, "wait", "2s"), http.StatusOK},
	} {
		if a := get(s, "/v1/service/web", tc.params, ""); a.status != tc.status {
			t.Errorf("%v: %d, want %d", tc.params, a.status, tc.status)
		}
	}
	for _, tc := range []struct {
		wait string
		want time.Duration
	}{{"", DefaultWait}, {"10m", MaxWait}, {"1m0s", time.Minute}} {
		if q, _, _ := parseQuery(params("wait", tc.wait)); q.wait != tc.want {
			t.Errorf("wait %q: %v, want %v", tc.wait, q.wait, tc.want)
		}
	}
	if a := get(s, "/v1/nothing", nil, ""); a.status != http.StatusNotFound {
		t.Errorf("unknown path: %d", a.status)
	}
}

func TestACL(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Registration{ID: "web-1", ServiceName: "web"})
	s.EnableACL("root")
	if n := len(regs(t, get(s, "/v1/service/web", nil, "root"))); n != 1 {
		t.Errorf("management token: %d", n)
	}
	for _, tok := range []string{"", "wrong"} {
		if a := get(s, "/v1/services", nil, tok); a.status != http.StatusForbidden {
			t.Errorf("token %q: %d", tok, a.status)
		}
	}
	if a := get(s, "/v1/status/leader", nil, ""); a.status != http.StatusOK {
		t.Errorf("leader without a token: %d", a.status)
	}
}

func TestRestoreAndFailures(t *testing.T) {
	s := New()
	defer s.Close()
	for i := range 5 {
		s.Register(Registration{ID: "web-" + strconv.Itoa(i), ServiceName: "web"})
	}
	a := get(s, "/v1/service/web", nil, "")
	got := getAsync(s, "/v1/service/web", params("index", strconv.FormatUint(a.index, 10)), "")
	waitBlocked(t, s, 1)
	s.Restore(2)
	if b := <-got; b.status != http.StatusOK || b.index >= a.index {
		t.Errorf("after a restore: %d index %d", b.status, b.index)
	}
	got = getAsync(s, "/v1/services", params("index", "2"), "")
	waitBlocked(t, s, 1)
	s.FailWith(http.StatusInternalServerError)
	if b := <-got; b.status != http.StatusInternalServerError {
		t.Errorf("a blocked query during a failure: %d", b.status)
	}
}
