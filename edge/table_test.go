package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

func TestTable(t *testing.T) {
	tb := NewTable()
	if _, ok := tb.BySlug("a"); ok || len(tb.All()) != 0 {
		t.Fatal("a new table is not empty")
	}
	changed := tb.Changed()
	a := Route{AppID: "app_2", Slug: "Notes", Port: 9001, Upstream: "127.0.0.1:1"}
	b := Route{AppID: "app_1", Slug: "wiki"}
	if !tb.Replace([]Route{a, b}) {
		t.Fatal("Replace said nothing changed")
	}
	select {
	case <-changed:
	default:
		t.Fatal("Changed was not closed by a change")
	}
	if got, ok := tb.BySlug("notes"); !ok || got != a {
		t.Errorf("BySlug(notes) = %v %v", got, ok)
	}
	if got, ok := tb.BySlug("NOTES"); !ok || got != a {
		t.Errorf("BySlug is case-sensitive: %v %v", got, ok)
	}
	if got, ok := tb.ByPort(9001); !ok || got != a {
		t.Errorf("ByPort(9001) = %v %v", got, ok)
	}
	if _, ok := tb.ByPort(0); ok {
		t.Error("port 0 names a route")
	}
	all := tb.All()
	if !slices.Equal(all, []Route{b, a}) {
		t.Errorf("All = %v, want sorted by app ID", all)
	}
	all[0].Slug = "changed"
	if got, _ := tb.BySlug("wiki"); got != b {
		t.Error("All handed out the table's own slice")
	}
	again := tb.Changed()
	if tb.Replace([]Route{b, a}) {
		t.Error("the same content counted as a change")
	}
	select {
	case <-again:
		t.Error("Changed closed without a change")
	default:
	}
	tb.Replace(nil)
	if _, ok := tb.BySlug("notes"); ok {
		t.Error("a route outlived Replace(nil)")
	}
}

// TestTableUnderConcurrentReplace: readers never see a half-built table
// (run with -race).
func TestTableUnderConcurrentReplace(t *testing.T) {
	tb := NewTable()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, ok := tb.BySlug("app")
				if ok && r.Upstream != "u"+strconv.Itoa(r.Port) {
					t.Errorf("torn route %v", r)
					return
				}
			}
		})
	}
	for i := range 500 {
		tb.Replace([]Route{{AppID: "app_1", Slug: "app", Port: i + 1, Upstream: "u" + strconv.Itoa(i+1)}})
	}
	close(stop)
	wg.Wait()
}

// freePort returns a loopback port nothing listens on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// eventually waits, boundedly, for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answers reports whether something answers HTTP on the port, and what.
func answers(port int) (string, bool) {
	c := &http.Client{Timeout: 2 * time.Second}
	res, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/")
	if err != nil {
		return "", false
	}
	defer res.Body.Close()
	return res.Header.Get("X-Port"), true
}

func refusedConn(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// TestListenersFollowTheTable: a port in the table is listened on, one
// that leaves is closed, and a port another process holds is retried
// until it is free, without stopping the others.
func TestListenersFollowTheTable(t *testing.T) {
	tb := NewTable()
	p1, p2 := freePort(t), freePort(t)
	blocker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p3 := blocker.Addr().(*net.TCPAddr).Port
	ls := NewListeners(ListenersConfig{
		Routes: tb, Host: "127.0.0.1", Poll: 20 * time.Millisecond, Drain: time.Second,
		Handler: func(port int) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("X-Port", strconv.Itoa(port)) })
		},
	})
	ctx, cancel := context.WithCancel(bg)
	go ls.Run(ctx)
	defer func() { cancel(); ls.Wait() }()

	tb.Replace([]Route{{AppID: "app_1", Slug: "a", Port: p1}, {AppID: "app_2", Slug: "b", Port: p2}, {AppID: "app_3", Slug: "c", Port: p3}, {AppID: "app_4", Slug: "d"}})
	eventually(t, "ports 1 and 2 listened on", func() bool {
		a, ok1 := answers(p1)
		b, ok2 := answers(p2)
		return ok1 && ok2 && a == strconv.Itoa(p1) && b == strconv.Itoa(p2)
	})
	if slices.Contains(ls.Ports(), p3) {
		t.Fatal("a port another process holds is reported open")
	}
	_ = blocker.Close()
	eventually(t, "the freed port listened on", func() bool { got, ok := answers(p3); return ok && got == strconv.Itoa(p3) })

	tb.Replace([]Route{{AppID: "app_2", Slug: "b", Port: p2}})
	eventually(t, "ports 1 and 3 closed", func() bool { return refusedConn(p1) && refusedConn(p3) })
	if _, ok := answers(p2); !ok {
		t.Fatal("port 2 stopped answering")
	}
	if got := ls.Ports(); !slices.Equal(got, []int{p2}) {
		t.Errorf("Ports = %v, want [%d]", got, p2)
	}
	cancel()
	ls.Wait()
	if !refusedConn(p2) {
		t.Error("a port is still open after Run returned")
	}
}

// TestTheEnvelopeIsTheAPIs pins the error body to the API's shape.
func TestTheEnvelopeIsTheAPIs(t *testing.T) {
	rec := httptest.NewRecorder()
	id := writeError(rec, httptest.NewRequest("GET", "/", nil), errcode.New(errcode.RateLimited, "wait").WithDetail("k", 1))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"code": "RATE_LIMITED", "message": "wait", "details": map[string]any{"k": 1.0}, "request_id": id}
	if len(body) != len(want) || body["code"] != want["code"] || body["message"] != want["message"] || body["request_id"] != id {
		t.Errorf("body %v, want %v", body, want)
	}
	if rec.Code != 500 || rec.Header().Get("X-Request-Id") != id || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("status %d, headers %v", rec.Code, rec.Header())
	}
	rec = httptest.NewRecorder()
	writeError(rec, httptest.NewRequest("HEAD", "/", nil), errcode.New(errcode.NotFound, "no"))
	if rec.Code != 404 || rec.Body.Len() != 0 {
		t.Errorf("HEAD: %d with %d bytes", rec.Code, rec.Body.Len())
	}
}
