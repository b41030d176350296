package blocking

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/errcode"
)

var errRunning = errors.New("test watcher: already running")

// scripted is a Source over a list that answers once, then blocks, and
// services that answer once (service "bad" failing its first query), then
// block.
func scripted(failures *atomic.Int32, translated *atomic.Int32) Source {
	return Source{
		Name:     "test",
		ListWhat: "listing the services",
		List: func(ctx context.Context, _ string, index uint64) ([]string, uint64, error) {
			if index > 0 {
				<-ctx.Done()
				return nil, 0, ctx.Err()
			}
			return []string{"a", "bad"}, 3, nil
		},
		ServiceWhat: func(name string) string { return "reading " + name },
		Service: func(ctx context.Context, _, name string, index uint64) (edge.Upstreams, uint64, error) {
			if index > 0 {
				<-ctx.Done()
				return nil, 0, ctx.Err()
			}
			if name == "bad" && failures.Add(1) == 1 {
				return nil, 0, errors.New("boom")
			}
			return edge.Upstreams{"app_" + name: {name + ":80", name + ":80"}}, 5, nil
		},
		Translate: func(what string, err error) error {
			translated.Add(1)
			return errcode.Wrap(err, errcode.AdapterUnavailable, "%s failed", what)
		},
		ErrRunning: errRunning,
	}
}

func TestRoutes(t *testing.T) {
	var failures, translated atomic.Int32
	r := NewRoutes(scripted(&failures, &translated), Timing{RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if ups, synced, _ := r.Upstreams(); len(ups) != 0 || synced {
		t.Fatalf("a new watch: %v (synced %v)", ups, synced)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		ups, synced, changed := r.Upstreams()
		// The failed query's recovery is recorded just after its answer.
		if synced && r.Err() == nil {
			want := edge.Upstreams{"app_a": {"a:80"}, "app_bad": {"bad:80"}}
			if !ups.Equal(want) {
				t.Errorf("upstreams %v, want %v", ups, want)
			}
			break
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("never synced: %v", ups)
		}
	}
	if failures.Load() != 2 || translated.Load() != 1 {
		t.Errorf("bad queried %d times, %d errors translated; want 2 and 1", failures.Load(), translated.Load())
	}
	if err := r.Run(context.Background()); !errors.Is(err, errRunning) {
		t.Errorf("a second Run = %v, want ErrRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

func TestRoutesFailing(t *testing.T) {
	src := Source{
		Name:     "test",
		ListWhat: "listing the services",
		List: func(context.Context, string, uint64) ([]string, uint64, error) {
			return nil, 0, errcode.New(errcode.AdapterFailed, "no")
		},
		ErrRunning: errRunning,
	}
	r := NewRoutes(src, Timing{RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.After(10 * time.Second)
	for r.Err() == nil {
		_, _, changed := r.Upstreams()
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the failing list never showed in Err")
		}
	}
	if !errcode.Has(r.Err(), errcode.AdapterFailed) {
		t.Errorf("Err = %v, want ADAPTER_FAILED", r.Err())
	}
	cancel()
	<-done
	if err := r.Err(); err != nil {
		t.Errorf("Err after Run ended = %v, want nil", err)
	}
}

func TestTimingDefaults(t *testing.T) {
	for _, tc := range []struct{ in, want Timing }{
		{Timing{}, Timing{DefaultWait, DefaultRetryMin, DefaultRetryMax}},
		{Timing{Wait: time.Second, RetryMin: time.Second, RetryMax: 2 * time.Second}, Timing{time.Second, time.Second, 2 * time.Second}},
		{Timing{RetryMin: time.Minute}, Timing{DefaultWait, time.Minute, time.Minute}},
		{Timing{RetryMin: time.Second, RetryMax: time.Millisecond}, Timing{DefaultWait, time.Second, DefaultRetryMax}},
	} {
		if got := tc.in.WithDefaults(); got != tc.want {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestRequestTimeout(t *testing.T) {
	if got, want := RequestTimeout(16*time.Second), 27*time.Second; got != want {
		t.Errorf("RequestTimeout(16s) = %s, want %s", got, want)
	}
}

func TestSleep(t *testing.T) {
	if !sleep(context.Background(), time.Millisecond) {
		t.Error("sleep did not pass")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if sleep(ctx, time.Hour) {
		t.Error("sleep passed a cancelled context")
	}
}
