package server

// Hot objects are serialized, not refused: concurrent plain changes of one
// object, sent over real HTTP connections, are all applied one after
// another, and a request is refused STATE_INVALID only when its own
// precondition fails (a name or grant that is taken, the last
// administrator).

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/launcher"
)

// wire serves the harness's handler on a loopback socket, so that requests
// travel over real HTTP connections, concurrently.
type wire struct {
	t      *testing.T
	url    string
	client *http.Client
}

func (h *harness) wire(t *testing.T) *wire {
	srv := httptest.NewServer(h.srv.Handler())
	t.Cleanup(srv.Close)
	c := srv.Client()
	c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	return &wire{t: t, url: srv.URL, client: c}
}

// send makes one request with a JSON body ("" for none) as the bearer of
// token. A transport failure is an answer of status 0 with its error.
func (w *wire) send(method, path, body, token string) answer {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, w.url+path, rd)
	if err != nil {
		return answer{body: []byte(err.Error())}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := w.client.Do(req)
	if err != nil {
		return answer{body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{body: []byte(err.Error())}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// burst sends n requests at once (request(i) says which) and returns the
// answers in order.
func (w *wire) burst(n int, request func(i int) (method, path, body, token string)) []answer {
	out := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			m, p, b, tok := request(i)
			<-start
			out[i] = w.send(m, p, b, tok)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// outcomes counts the answers of a burst by status, and fails on any
// answer that is neither want nor a refusal with refusedCode.
func outcomes(t *testing.T, what string, as []answer, want int, refusedCode errcode.Code) (ok, refused int) {
	t.Helper()
	for i, a := range as {
		switch e, _ := envelopeOf(a); {
		case a.status == want:
			ok++
		case refusedCode != "" && a.status == http.StatusConflict && e.Code == refusedCode:
			refused++
		default:
			t.Errorf("%s: request %d answered %d: %s", what, i, a.status, a.body)
		}
	}
	return ok, refused
}

func (h *harness) auditCount(t *testing.T, action, targetID string) int {
	t.Helper()
	n := 0
	for _, e := range h.auditEntries(t) {
		if e.Action == action && e.TargetID != nil && *e.TargetID == targetID {
			n++
		}
	}
	return n
}

func TestConcurrentRenamesOfOneSectionAreAllApplied(t *testing.T) {
	h := newHarness(t)
	w := h.wire(t)
	alice := h.account(t, "alice", nil, true)
	a := w.send("POST", api+"/me/sections", `{"name":"Start"}`, alice.token)
	wantStatus(t, "create a section", a, http.StatusCreated)
	sec := decodeAs[sectionAnswer](t, a).Section

	const renames = 32
	names := make([]string, renames)
	for i := range names {
		names[i] = fmt.Sprintf("Name %02d", i)
	}
	as := w.burst(renames, func(i int) (string, string, string, string) {
		return "PATCH", api + "/me/sections/" + sec.ID, jsonOf(map[string]string{"name": names[i]}), alice.token
	})
	if ok, _ := outcomes(t, "32 concurrent renames", as, http.StatusOK, ""); ok != renames {
		t.Fatalf("%d of %d concurrent renames applied", ok, renames)
	}
	for i, a := range as {
		if got := decodeAs[sectionAnswer](t, a).Section; got.Name != names[i] || got.ID != sec.ID {
			t.Errorf("rename %d answered %+v", i, got)
		}
	}
	view := decodeAs[launcher.View](t, w.send("GET", api+"/me/apps", "", alice.token))
	if len(view.Sections) != 1 || view.Sections[0].ID != sec.ID || !slices.Contains(names, view.Sections[0].Name) {
		t.Fatalf("after the renames the sections are %+v, want one named as one of the renames", view.Sections)
	}
	if n := h.auditCount(t, "section.update", sec.ID); n != renames {
		t.Errorf("%d section.update entries, want %d", n, renames)
	}

	// A request whose own precondition fails is still refused: a person's
	// section names are unique, whatever their case.
	other := decodeAs[sectionAnswer](t, w.send("POST", api+"/me/sections", `{"name":"Other"}`, alice.token)).Section
	e := wantError(t, "a name another of the person's sections has", w.send("PATCH", api+"/me/sections/"+sec.ID, `{"name":"OTHER"}`, alice.token), http.StatusConflict, errcode.StateInvalid)
	if e.Details["field"] != "name" {
		t.Errorf("details = %v, want field name", e.Details)
	}
	// Eight sections renamed to one name at once: one gets it.
	ids := []string{sec.ID, other.ID}
	for i := range 6 {
		ids = append(ids, decodeAs[sectionAnswer](t, w.send("POST", api+"/me/sections", jsonOf(map[string]string{"name": fmt.Sprintf("Extra %d", i)}), alice.token)).Section.ID)
	}
	as = w.burst(len(ids), func(i int) (string, string, string, string) {
		return "PATCH", api + "/me/sections/" + ids[i], `{"name":"Same"}`, alice.token
	})
	if ok, refused := outcomes(t, "eight renames to one name", as, http.StatusOK, errcode.StateInvalid); ok != 1 || refused != len(ids)-1 {
		t.Errorf("%d renames to one name applied and %d refused, want 1 and %d", ok, refused, len(ids)-1)
	}
}

func TestConcurrentSecretWritesToOneAppAreAllApplied(t *testing.T) {
	h := newHarness(t)
	w := h.wire(t)
	app := h.app(t, "Busy Secrets")
	base := api + "/apps/" + app + "/secrets/"

	// Sixteen writes of one secret: sixteen versions, the newest kept.
	const writers = 16
	as := w.burst(writers, func(i int) (string, string, string, string) {
		return "PUT", base + "HOT", jsonOf(map[string]string{"value": fmt.Sprintf("value-%02d", i)}), h.token
	})
	if ok, _ := outcomes(t, "16 concurrent writes of one secret", as, http.StatusOK, ""); ok != writers {
		t.Fatalf("%d of %d concurrent writes applied", ok, writers)
	}
	byVersion := map[int64]int{}
	for i, a := range as {
		v := decodeAs[secretAnswer](t, a).Secret.Version
		if j, dup := byVersion[v]; dup {
			t.Fatalf("writes %d and %d were both given version %d", j, i, v)
		}
		byVersion[v] = i
	}
	for v := int64(1); v <= writers; v++ {
		if _, ok := byVersion[v]; !ok {
			t.Fatalf("versions %v: want 1 to %d", byVersion, writers)
		}
	}
	list := decodeAs[secretListDTO](t, w.send("GET", api+"/apps/"+app+"/secrets", "", h.token)).Items
	if len(list) != 1 || list[0].Version != writers {
		t.Fatalf("after the writes the list is %+v, want HOT at version %d", list, writers)
	}
	got := decodeAs[secretValue](t, w.send("GET", base+"HOT/value", "", h.token))
	if want := fmt.Sprintf("value-%02d", byVersion[writers]); got.Value != want {
		t.Fatalf("the value read is %q, want the newest version's %q", got.Value, want)
	}
	if n := h.auditCount(t, "secret.set", "HOT"); n != writers {
		t.Errorf("%d secret.set entries, want %d", n, writers)
	}

	// Sixteen new secrets at once: all there.
	as = w.burst(writers, func(i int) (string, string, string, string) {
		return "PUT", base + fmt.Sprintf("KEY_%02d", i), jsonOf(map[string]string{"value": fmt.Sprintf("v%02d", i)}), h.token
	})
	if ok, _ := outcomes(t, "16 concurrent new secrets", as, http.StatusOK, ""); ok != writers {
		t.Fatalf("%d of %d concurrent new secrets applied", ok, writers)
	}
	list = decodeAs[secretListDTO](t, w.send("GET", api+"/apps/"+app+"/secrets", "", h.token)).Items
	if len(list) != writers+1 {
		t.Fatalf("%d secrets listed, want %d", len(list), writers+1)
	}
	for i := range writers {
		got := decodeAs[secretValue](t, w.send("GET", base+fmt.Sprintf("KEY_%02d/value", i), "", h.token))
		if want := fmt.Sprintf("v%02d", i); got.Value != want {
			t.Errorf("KEY_%02d = %q, want %q", i, got.Value, want)
		}
	}
}

func TestConcurrentGrantsOnOneAppAreAllApplied(t *testing.T) {
	h := newHarness(t)
	w := h.wire(t)
	app := h.app(t, "Shared Widely")
	const users = 12
	people := make([]*principal, users)
	for i := range people {
		people[i] = h.account(t, fmt.Sprintf("p%d", i), nil, false)
	}
	// Half open the app, half manage it as viewers.
	grant := func(p *principal, i int) string {
		if i%2 == 0 {
			return jsonOf(map[string]string{"plane": "data", "principal_kind": authz.KindUser, "principal_id": p.userID})
		}
		return jsonOf(map[string]string{"plane": "control", "principal_kind": authz.KindUser, "principal_id": p.userID, "role_id": authz.RoleViewer})
	}
	as := w.burst(users, func(i int) (string, string, string, string) {
		return "POST", api + "/apps/" + app + "/grants", grant(people[i], i), h.token
	})
	if ok, _ := outcomes(t, "12 concurrent grants", as, http.StatusCreated, ""); ok != users {
		t.Fatalf("%d of %d concurrent grants applied", ok, users)
	}
	gs := decodeAs[identity.AppGrants](t, w.send("GET", api+"/apps/"+app+"/grants", "", h.token))
	has := func(list []identity.GrantInfo, userID string) bool {
		return slices.ContainsFunc(list, func(g identity.GrantInfo) bool { return g.PrincipalID != nil && *g.PrincipalID == userID })
	}
	for i, p := range people {
		list, plane := gs.Access, "access"
		if i%2 == 1 {
			list, plane = gs.Management, "management"
		}
		if !has(list, p.userID) {
			t.Errorf("%s has no %s grant after the burst: %+v", p.username, plane, gs)
		}
	}
	if n := len(h.eventsOfType(t, "grant.created", app)); n < users {
		t.Errorf("%d grant.created events on the app, want at least %d", n, users)
	}

	// The same grant six times at once: one is made, the others are
	// refused as the duplicates they are.
	late := h.account(t, "late", nil, false)
	as = w.burst(6, func(int) (string, string, string, string) {
		return "POST", api + "/apps/" + app + "/grants", grant(late, 0), h.token
	})
	if ok, refused := outcomes(t, "one grant six times", as, http.StatusCreated, errcode.StateInvalid); ok != 1 || refused != 5 {
		t.Errorf("%d made and %d refused, want 1 and 5", ok, refused)
	}
}

// eventsOfType lists the events of a type about an app.
func (h *harness) eventsOfType(t *testing.T, typ, appID string) []string {
	t.Helper()
	var out []string
	for _, ev := range h.allEvents(t) {
		if ev.Type == typ && ev.App != nil && ev.App.ID == appID {
			out = append(out, ev.ID)
		}
	}
	return out
}

func TestConcurrentAccountsPreconditionsStillRefuse(t *testing.T) {
	h := newHarness(t)
	w := h.wire(t)
	// Eight accounts of one username at once: one is made.
	name := uniq("same")
	as := w.burst(8, func(i int) (string, string, string, string) {
		return "POST", api + "/users", jsonOf(map[string]string{"username": name, "display_name": fmt.Sprintf("Same %d", i)}), h.token
	})
	if ok, refused := outcomes(t, "eight accounts of one username", as, http.StatusCreated, errcode.StateInvalid); ok != 1 || refused != 7 {
		t.Errorf("%d made and %d refused, want 1 and 7", ok, refused)
	}
	for _, a := range as {
		if e, _ := envelopeOf(a); a.status == http.StatusConflict && e.Details["field"] != "username" {
			t.Errorf("refusal details = %v, want field username", e.Details)
		}
	}
	// The last administrator cannot be demoted, however asked.
	wantError(t, "demote the last administrator", w.send("DELETE", api+"/users/"+h.adminID+"/role", "", h.token), http.StatusConflict, errcode.StateInvalid)
	// Eight display-name changes of one account at once: all applied.
	bob := h.account(t, "bob", nil, true)
	as = w.burst(8, func(i int) (string, string, string, string) {
		return "PATCH", api + "/users/" + bob.userID, jsonOf(map[string]string{"display_name": fmt.Sprintf("Bob %d", i)}), bob.token
	})
	if ok, _ := outcomes(t, "eight display-name changes", as, http.StatusOK, ""); ok != 8 {
		t.Errorf("%d of 8 display-name changes applied", ok)
	}
}

// BenchmarkHotSectionRename renames one section from 16 goroutines at once,
// without pause (PATCH through the handler, a replicated write each). It
// reports the renames the store gave up on after its bounded tries
// (busy/op: 503 STORE_UNAVAILABLE, retryable) beside ns/op; any other
// refusal fails it.
func BenchmarkHotSectionRename(b *testing.B) {
	h := newHarnessWith(b, harnessOptions{adminPassword: adminPassword, discardLogs: true})
	a := h.send("POST", api+"/me/sections", `{"name":"Hot"}`)
	if a.status != http.StatusCreated {
		b.Fatalf("create a section: %d %s", a.status, a.body)
	}
	var ans sectionAnswer
	if err := json.Unmarshal(a.body, &ans); err != nil {
		b.Fatal(err)
	}
	path := api + "/me/sections/" + ans.Section.ID
	var n, busy atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a := h.send("PATCH", path, fmt.Sprintf(`{"name":"Hot %d"}`, n.Add(1)))
			switch e, _ := envelopeOf(a); {
			case a.status == http.StatusOK:
			case a.status == http.StatusServiceUnavailable && e.Code == errcode.StoreUnavailable:
				busy.Add(1)
			default:
				b.Errorf("rename answered %d: %s", a.status, a.body)
				return
			}
		}
	})
	b.ReportMetric(float64(busy.Load())/float64(b.N), "busy/op")
}
