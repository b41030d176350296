package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/raftstore"
)

// benchReceiver answers every webhook 204 and notes when each delivery
// first arrived, and, for the latency benchmark, hands each event's key on.
type benchReceiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	first map[string]time.Time // delivery ID -> first arrival
	want  int                  // close done once this many deliveries arrived
	done  chan struct{}
	keys  chan keyArrival // when set, each first arrival's event key
}

type keyArrival struct {
	key string
	at  time.Time
}

func newBenchReceiver(b *testing.B) *benchReceiver {
	rc := &benchReceiver{first: map[string]time.Time{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
		id := r.Header.Get("Svc-Delivery-Id")
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if _, seen := rc.first[id]; seen {
			return
		}
		rc.first[id] = at
		if rc.done != nil && len(rc.first) == rc.want {
			close(rc.done)
		}
		if rc.keys != nil {
			var ev struct {
				Data struct{ Key string } `json:"data"`
			}
			_ = json.Unmarshal(body, &ev)
			rc.keys <- keyArrival{key: ev.Data.Key, at: at}
		}
	}))
	b.Cleanup(rc.srv.Close)
	return rc
}

// expect resets the receiver to wait for n more deliveries.
func (rc *benchReceiver) expect(n int) <-chan struct{} {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.first = map[string]time.Time{}
	rc.want, rc.done = n, make(chan struct{})
	return rc.done
}

// last is how many deliveries arrived, and when the last of them did.
func (rc *benchReceiver) last() (int, time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var at time.Time
	for _, t := range rc.first {
		if t.After(at) {
			at = t
		}
	}
	return len(rc.first), at
}

// percentile is the p-th percentile (0-100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// BenchmarkWebhookLatency is commit-to-first-attempt: one secret set at a
// time through the API (its store.Update returned when the answer comes),
// to the first request of its app.secret_changed event at a loopback
// receiver of an install-wide subscription, on a single node with its
// store on this disk. In between: the dispatcher's fan-out write (a second
// commit), then the attempt. Reported as p50-ms and p99-ms.
func BenchmarkWebhookLatency(b *testing.B) {
	h := eventsHarness(b)
	rc := newBenchReceiver(b)
	rc.keys = make(chan keyArrival, 16)
	h.subscribe(b, map[string]any{"events": []string{"app.secret_changed"}, "url": rc.srv.URL})
	var apps []string
	var lat []time.Duration
	n := 0
	for b.Loop() {
		if n%400 == 0 { // an app holds at most 500 secrets
			apps = append(apps, h.app(b, fmt.Sprintf("Latency %d", len(apps))))
		}
		key := fmt.Sprintf("K%d", n)
		h.putSecret(b, apps[len(apps)-1], key, "v")
		committed := time.Now()
		n++
		select {
		case got := <-rc.keys:
			if got.key != key {
				b.Fatalf("the receiver got %q; want %q", got.key, key)
			}
			lat = append(lat, got.at.Sub(committed))
		case <-time.After(30 * time.Second):
			b.Fatalf("event %s did not arrive within 30s", key)
		}
	}
	b.ReportMetric(float64(percentile(lat, 50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 99).Microseconds())/1000, "p99-ms")
}

// BenchmarkWebhookThroughput is sustained deliveries per second to
// loopback receivers: 2,000 app.secret_changed events, written 100 to a
// store write so that the backlog forms faster than the dispatcher drains
// it, fanned out to 1 and to 10 install-wide subscriptions (each its own
// receiver), from the first write to the last delivery's first request;
// each delivery is one attempt, answered 204 and recorded in the store.
func BenchmarkWebhookThroughput(b *testing.B) {
	const total, perWrite = 2000, 100
	for _, subs := range []int{1, 10} {
		b.Run(fmt.Sprintf("subscriptions=%d", subs), func(b *testing.B) {
			h := eventsHarness(b)
			rc := newBenchReceiver(b)
			for i := range subs {
				h.subscribe(b, map[string]any{"events": []string{"app.secret_changed"}, "url": fmt.Sprintf("%s/r%d", rc.srv.URL, i)})
			}
			app := &events.AppRef{ID: h.app(b, "Throughput"), Name: "Throughput", Slug: "throughput"}
			ctx := context.Background()
			var delivered int
			var took time.Duration
			round := 0
			for b.Loop() {
				done := rc.expect(total * subs)
				start := time.Now()
				for w := 0; w < total/perWrite; w++ {
					_, err := h.store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
						ops := make([]raftstore.Op, 0, perWrite)
						for i := range perWrite {
							ops = append(ops, events.Emit(ctx, time.Now(), "app.secret_changed", app, "", "", map[string]any{"key": fmt.Sprintf("R%dW%dE%d", round, w, i)}))
						}
						return ops, nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				select {
				case <-done:
				case <-time.After(5 * time.Minute):
					n, _ := rc.last()
					b.Fatalf("only %d of %d deliveries arrived within 5 minutes", n, total*subs)
				}
				n, at := rc.last()
				delivered += n
				took += at.Sub(start)
				// The next round starts once every attempt is recorded.
				waitFor(b, "every delivery to be recorded", func() bool {
					due, _ := subscriptions.Deliveries.List(h.store.Read(), raftstore.Query{Index: "due", Prefix: true, Limit: 1})
					return len(due) == 0
				})
				round++
			}
			b.ReportMetric(float64(delivered)/took.Seconds(), "deliveries/s")
		})
	}
}
