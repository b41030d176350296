package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// clock is a controllable clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openStore(t *testing.T) *raftstore.Store { return raftstoretest.Open(t, Records) }

// testContext returns a context that ends with the test or after a minute,
// so that a blocked store call fails the test instead of hanging it.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newService(t *testing.T) (*Service, *raftstore.Store, *clock) {
	t.Helper()
	st := openStore(t)
	c := newClock()
	return New(st, c.Now), st, c
}

// reserve calls Begin and requires a reservation.
func reserve(t *testing.T, svc *Service, id, hash string) *Reservation {
	t.Helper()
	rec, res, err := svc.Begin(testContext(t), id, hash)
	if err != nil {
		t.Fatalf("Begin(%s): %v", id, err)
	}
	if rec != nil || res == nil {
		t.Fatalf("Begin(%s) = record %+v, reservation %v; want a reservation only", id, rec, res)
	}
	return res
}

// wantState checks that err carries STATE_INVALID and a message containing
// substr.
func wantState(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil; want STATE_INVALID (%q)", substr)
	}
	e, ok := errcode.As(err)
	if !ok || e.Code != errcode.StateInvalid {
		t.Fatalf("err = %v; want STATE_INVALID", err)
	}
	if !strings.Contains(e.Message, substr) {
		t.Errorf("message = %q; want it to contain %q", e.Message, substr)
	}
}

func TestBeginCompleteReplay(t *testing.T) {
	svc, st, _ := newService(t)
	ctx := testContext(t)
	id := ID("usr_1", http.MethodPost, "/api/v1/apps", "key-1")

	res := reserve(t, svc, id, "h1")
	rec, _, ok := Records.Get(st.Read(), id)
	if !ok || rec.State != StatePending || rec.RequestHash != "h1" {
		t.Fatalf("after Begin, record = %+v, %t; want a pending record with hash h1", rec, ok)
	}

	body := []byte(`{"id":"app_1"}`)
	if err := svc.Complete(ctx, res, http.StatusCreated, "application/json", "/api/v1/apps/app_1", body); err != nil {
		t.Fatalf("Complete: %v", err)
	}

	for i := range 2 { // replay is repeatable
		got, res2, err := svc.Begin(ctx, id, "h1")
		if err != nil {
			t.Fatalf("replay %d: Begin: %v", i, err)
		}
		if res2 != nil {
			t.Fatalf("replay %d: Begin returned a reservation; want the stored answer", i)
		}
		if got == nil {
			t.Fatalf("replay %d: Begin returned no record", i)
		}
		want := struct {
			State, ContentType, Location string
			Status                       int
			Body                         []byte
		}{StateDone, "application/json", "/api/v1/apps/app_1", http.StatusCreated, body}
		gotSub := struct {
			State, ContentType, Location string
			Status                       int
			Body                         []byte
		}{got.State, got.ContentType, got.Location, got.Status, got.Body}
		if diff := cmp.Diff(want, gotSub); diff != "" {
			t.Errorf("replay %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestDifferentRequestHash(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := testContext(t)
	id := ID("usr_1", http.MethodPost, "/api/v1/apps", "k")

	res := reserve(t, svc, id, "h1")
	t.Run("while pending", func(t *testing.T) {
		_, _, err := svc.Begin(ctx, id, "h2")
		wantState(t, err, "different request")
	})
	if err := svc.Complete(ctx, res, http.StatusAccepted, "", "", nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	t.Run("once done", func(t *testing.T) {
		rec, res, err := svc.Begin(ctx, id, "h2")
		wantState(t, err, "different request")
		if rec != nil || res != nil {
			t.Errorf("Begin with another hash returned record %+v, reservation %v; want neither", rec, res)
		}
	})
}

func TestInProgress(t *testing.T) {
	svc, _, _ := newService(t)
	id := ID("usr_1", http.MethodPost, "/x", "k")
	reserve(t, svc, id, "h")
	_, _, err := svc.Begin(testContext(t), id, "h")
	wantState(t, err, "in progress")
	if e, _ := errcode.As(err); e.RetryAfter <= 0 {
		t.Errorf("RetryAfter = %d; want > 0", e.RetryAfter)
	}
}

func TestConcurrentBegin(t *testing.T) {
	svc, _, _ := newService(t)
	id := ID("usr_1", http.MethodPost, "/api/v1/apps", "race")
	const n = 16
	ctx := testContext(t)
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		res   = make([]*Reservation, n)
		errs  = make([]error, n)
		recs  = make([]*Record, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			recs[i], res[i], errs[i] = svc.Begin(ctx, id, "h")
		})
	}
	close(start)
	wg.Wait()

	reserved := 0
	for i := range n {
		if recs[i] != nil {
			t.Errorf("goroutine %d got a record to replay %+v; nothing was completed", i, recs[i])
		}
		if res[i] != nil {
			reserved++
			if errs[i] != nil {
				t.Errorf("goroutine %d got a reservation and an error %v", i, errs[i])
			}
			continue
		}
		wantState(t, errs[i], "in progress")
	}
	if reserved != 1 {
		t.Errorf("%d goroutines reserved the key; want exactly 1", reserved)
	}
}

func TestReleaseAllowsRetry(t *testing.T) {
	svc, st, _ := newService(t)
	ctx := testContext(t)
	id := ID("usr_1", http.MethodPost, "/x", "k")

	res := reserve(t, svc, id, "h")
	if err := svc.Release(ctx, res); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, _, ok := Records.Get(st.Read(), id); ok {
		t.Errorf("record still present after Release")
	}
	res2 := reserve(t, svc, id, "h")
	if err := svc.Complete(ctx, res2, http.StatusCreated, "", "", []byte("ok")); err != nil {
		t.Fatalf("Complete after retry: %v", err)
	}
	// The released reservation is dead: it can neither complete nor release.
	if err := svc.Complete(ctx, res, http.StatusCreated, "", "", []byte("stale")); err == nil {
		t.Errorf("Complete of a released reservation succeeded; want an error")
	}
	rec, _, err := svc.Begin(ctx, id, "h")
	if err != nil || rec == nil || string(rec.Body) != "ok" {
		t.Errorf("Begin after retry completed = %+v, %v; want the retry's answer \"ok\"", rec, err)
	}
}

func TestAbandonedReservationIsTakenOver(t *testing.T) {
	svc, _, clk := newService(t)
	ctx := testContext(t)
	id := ID("usr_1", http.MethodPost, "/x", "k")

	first := reserve(t, svc, id, "h")

	clk.Advance(PendingTTL - time.Second)
	_, _, err := svc.Begin(ctx, id, "h")
	wantState(t, err, "in progress")

	clk.Advance(time.Second) // exactly PendingTTL after the reservation
	second := reserve(t, svc, id, "h")

	// The first holder has lost the key: its answer is not recorded.
	err = svc.Complete(ctx, first, http.StatusCreated, "", "", []byte("first"))
	if !errcode.Has(err, errcode.StateInvalid) && !errors.Is(err, &errcode.Error{Code: errcode.StateInvalid}) {
		t.Errorf("Complete by the displaced holder = %v; want STATE_INVALID", err)
	}
	if err := svc.Complete(ctx, second, http.StatusCreated, "", "", []byte("second")); err != nil {
		t.Fatalf("Complete by the new holder: %v", err)
	}
	rec, _, err := svc.Begin(ctx, id, "h")
	if err != nil || rec == nil {
		t.Fatalf("Begin = %+v, %v; want the stored answer", rec, err)
	}
	if got, want := string(rec.Body), "second"; got != want {
		t.Errorf("replayed body = %q; want %q", got, want)
	}
}

func TestExpiredRecordsAreAbsent(t *testing.T) {
	svc, st, clk := newService(t)
	ctx := testContext(t)
	old := ID("usr_1", http.MethodPost, "/x", "old")
	young := ID("usr_1", http.MethodPost, "/x", "young")

	res := reserve(t, svc, old, "h")
	if err := svc.Complete(ctx, res, http.StatusCreated, "", "", []byte("old")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	clk.Advance(time.Hour)
	res = reserve(t, svc, young, "h")
	if err := svc.Complete(ctx, res, http.StatusCreated, "", "", []byte("young")); err != nil {
		t.Fatalf("Complete: %v", err)
	}

	clk.Advance(TTL - time.Hour - time.Nanosecond) // just before old expires
	if n, err := svc.Expire(ctx); err != nil || n != 0 {
		t.Errorf("Expire before TTL = %d, %v; want 0, nil", n, err)
	}
	if rec, _, err := svc.Begin(ctx, old, "h"); err != nil || rec == nil {
		t.Errorf("Begin before TTL = %+v, %v; want the stored answer", rec, err)
	}

	clk.Advance(time.Nanosecond) // old is TTL old: expired
	n, err := svc.Expire(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Expire at TTL = %d, %v; want 1, nil", n, err)
	}
	if _, _, ok := Records.Get(st.Read(), old); ok {
		t.Errorf("expired record %s still present after Expire", old)
	}
	if _, _, ok := Records.Get(st.Read(), young); !ok {
		t.Errorf("record %s younger than TTL was removed", young)
	}
	if n, err := svc.Expire(ctx); err != nil || n != 0 {
		t.Errorf("second Expire = %d, %v; want 0, nil", n, err)
	}
}

func TestExpiredRecordIgnoredBeforeGC(t *testing.T) {
	svc, st, clk := newService(t)
	ctx := testContext(t)
	id := ID("usr_1", http.MethodPost, "/x", "k")

	res := reserve(t, svc, id, "h1")
	if err := svc.Complete(ctx, res, http.StatusCreated, "", "", []byte("old")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	clk.Advance(TTL)
	// Not yet collected, but past its TTL: treated as absent, even for a
	// different request.
	if _, _, ok := Records.Get(st.Read(), id); !ok {
		t.Fatal("record gone before Expire ran; the test needs it present")
	}
	res = reserve(t, svc, id, "h2")
	if err := svc.Complete(ctx, res, http.StatusOK, "", "", []byte("new")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	rec, _, err := svc.Begin(ctx, id, "h2")
	if err != nil || rec == nil || string(rec.Body) != "new" {
		t.Errorf("Begin = %+v, %v; want the new answer", rec, err)
	}
}

func TestCompleteOverMaxBodyReleases(t *testing.T) {
	svc, st, _ := newService(t)
	ctx := testContext(t)
	id := ID("usr_1", http.MethodPost, "/x", "big")

	res := reserve(t, svc, id, "h")
	if err := svc.Complete(ctx, res, http.StatusOK, "application/octet-stream", "", bytes.Repeat([]byte("x"), MaxBody+1)); err != nil {
		t.Fatalf("Complete with a body over MaxBody: %v", err)
	}
	if _, _, ok := Records.Get(st.Read(), id); ok {
		t.Errorf("record kept after Complete with a body over MaxBody; want it released")
	}
	reserve(t, svc, id, "h") // a retry runs the request again
}

func TestCompleteAtMaxBodyKeeps(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := testContext(t)
	id := ID("usr_1", http.MethodPost, "/x", "max")
	body := bytes.Repeat([]byte("y"), MaxBody)

	res := reserve(t, svc, id, "h")
	if err := svc.Complete(ctx, res, http.StatusOK, "", "", body); err != nil {
		t.Fatalf("Complete with a body of MaxBody: %v", err)
	}
	rec, _, err := svc.Begin(ctx, id, "h")
	if err != nil || rec == nil {
		t.Fatalf("Begin = %+v, %v; want the stored answer", rec, err)
	}
	if !bytes.Equal(rec.Body, body) {
		t.Errorf("replayed body has %d bytes; want the %d stored", len(rec.Body), len(body))
	}
}

func TestID(t *testing.T) {
	base := [4]string{"usr_1", "POST", "/api/v1/apps", "key"}
	id := func(p [4]string) string { return ID(p[0], p[1], p[2], p[3]) }

	if got := id(base); len(got) != 64 || strings.Trim(got, "0123456789abcdef") != "" {
		t.Errorf("ID = %q; want 64 lower-case hex digits", got)
	}
	if id(base) != id(base) {
		t.Error("ID is not deterministic")
	}
	for i := range base {
		t.Run(fmt.Sprintf("part %d differs", i), func(t *testing.T) {
			other := base
			other[i] += "x"
			if id(other) == id(base) {
				t.Errorf("ID%q == ID%q; want different", other, base)
			}
		})
	}
	pairs := []struct {
		name string
		a, b [4]string
	}{
		{"split within principal/method", [4]string{"ab", "c", "/p", "k"}, [4]string{"a", "bc", "/p", "k"}},
		{"split within path/key", [4]string{"u", "POST", "/a", "bk"}, [4]string{"u", "POST", "/ab", "k"}},
		{"empty part shifted", [4]string{"", "POST", "/p", "k"}, [4]string{"POST", "", "/p", "k"}},
		{"separator in part", [4]string{"u;1:", "POST", "/p", "k"}, [4]string{"u", ";1:POST", "/p", "k"}},
		{"length-prefix lookalike", [4]string{"1:a;", "", "", ""}, [4]string{"", "a", "", ""}},
		{"all empty vs one", [4]string{"", "", "", ""}, [4]string{"", "", "", " "}},
	}
	for _, tt := range pairs {
		t.Run(tt.name, func(t *testing.T) {
			if id(tt.a) == id(tt.b) {
				t.Errorf("ID%q == ID%q; want different", tt.a, tt.b)
			}
		})
	}
}

func TestValidKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{"uuid", "0b6b2c1e-6f3a-4a4e-9b7e-3f4b1c2d5e6f", true},
		{"one char", "a", true},
		{"max length", strings.Repeat("k", MaxKeyLength), true},
		{"all printable punctuation", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", true},
		{"empty", "", false},
		{"too long", strings.Repeat("k", MaxKeyLength+1), false},
		{"space", "a b", false},
		{"leading space", " a", false},
		{"tab", "a\tb", false},
		{"newline", "a\n", false},
		{"NUL", "a\x00", false},
		{"DEL", "a\x7f", false},
		{"non-ASCII", "clé", false},
		{"invalid UTF-8", "a\xff", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidKey(tt.key)
			if tt.ok {
				if err != nil {
					t.Errorf("ValidKey(%q) = %v; want nil", tt.key, err)
				}
				return
			}
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.ValidInvalid {
				t.Fatalf("ValidKey(%q) = %v; want VALID_INVALID", tt.key, err)
			}
			if got := e.Details["field"]; got != "Idempotency-Key" {
				t.Errorf("ValidKey(%q) field = %v; want Idempotency-Key", tt.key, got)
			}
		})
	}
}

func FuzzValidKey(f *testing.F) {
	for _, s := range []string{"", "a", "a b", "clé", "\x7f", strings.Repeat("k", MaxKeyLength+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidKey(key)
		want := len(key) >= 1 && len(key) <= MaxKeyLength
		for i := 0; i < len(key); i++ {
			if key[i] < 0x21 || key[i] > 0x7e {
				want = false
			}
		}
		if (err == nil) != want {
			t.Fatalf("ValidKey(%q) = %v; want valid=%t", key, err, want)
		}
	})
}
