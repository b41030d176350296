package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/api"
)

// hookRequest is one request the soak's receiver got.
type hookRequest struct {
	eventID, deliveryID, eventType string
	body                           []byte
	status                         int // what the receiver answered
	// bad says why the request did not verify; empty when it did.
	bad string
}

// soakReceiver is the soak's webhook receiver: it answers 500 to a seeded
// random share of the requests and 204 to the rest, records every request,
// and checks each one's signature with its own implementation of the
// specification's scheme.
type soakReceiver struct {
	srv      *httptest.Server
	failRate float64

	mu   sync.Mutex
	rng  *rand.Rand
	key  string
	reqs []hookRequest
}

func newSoakReceiver(t *testing.T, seed uint64, failRate float64) *soakReceiver {
	t.Helper()
	rc := &soakReceiver{failRate: failRate, rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *soakReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req := hookRequest{eventID: r.Header.Get("Svc-Event-Id"), deliveryID: r.Header.Get("Svc-Delivery-Id"),
		eventType: r.Header.Get("Svc-Event"), body: body, status: http.StatusNoContent}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	switch {
	case err != nil:
		req.bad = "reading the body: " + err.Error()
	case rc.key == "":
		req.bad = "a request came before the subscription was created"
	default:
		req.bad = verifyHook(rc.key, r.Header, body, time.Now())
	}
	if rc.rng.Float64() < rc.failRate {
		req.status = http.StatusInternalServerError
	}
	rc.reqs = append(rc.reqs, req)
	w.WriteHeader(req.status)
}

func (rc *soakReceiver) setKey(key string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.key = key
}

func (rc *soakReceiver) requests() []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

// waitKeys waits until the receiver has answered 2xx to an event of each
// key of keys (data.key), until deadline.
func (rc *soakReceiver) waitKeys(t *testing.T, keys map[string]string, deadline time.Time) {
	t.Helper()
	for {
		got := map[string]bool{}
		for _, r := range rc.requests() {
			var ev hookEvent
			if r.status/100 == 2 && json.Unmarshal(r.body, &ev) == nil {
				got[ev.Data.Key] = true
			}
		}
		var missing []string
		for k := range keys {
			if !got[k] {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged writes' events never reached the receiver with a 2xx answer, e.g. %v",
				len(missing), len(keys), firstIDs(missing, 10))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// verifyHook checks a webhook request as the specification tells a
// receiver to, with nothing of svc's: Svc-Signature holds "v1=" and the hex
// HMAC-SHA256, keyed by the signing key, of Svc-Timestamp, a full stop and
// the raw body; compared in constant time; a timestamp more than five
// minutes from the receiver's clock is refused. It also checks that the
// headers name the event the body carries. It returns why the request
// fails, or "".
func verifyHook(key string, h http.Header, body []byte, now time.Time) string {
	ts := h.Get("Svc-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(sec, 10) != ts {
		return fmt.Sprintf("Svc-Timestamp %q is not Unix seconds", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Sprintf("Svc-Timestamp %s is %s from the receiver's clock", ts, d)
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := []byte("v1=" + hex.EncodeToString(mac.Sum(nil)))
	signed := false
	for _, sig := range strings.Fields(h.Get("Svc-Signature")) {
		if hmac.Equal([]byte(sig), want) {
			signed = true
		}
	}
	if !signed {
		return fmt.Sprintf("Svc-Signature %q does not verify", h.Get("Svc-Signature"))
	}
	var ev struct{ ID, Type string }
	if err := json.Unmarshal(body, &ev); err != nil {
		return "the body is not JSON: " + err.Error()
	}
	if ev.ID != h.Get("Svc-Event-Id") || ev.Type != h.Get("Svc-Event") || !strings.HasPrefix(h.Get("Svc-Delivery-Id"), "dlv_") {
		return fmt.Sprintf("headers Svc-Event %q, Svc-Event-Id %q, Svc-Delivery-Id %q for a body of event %s (%s)",
			h.Get("Svc-Event"), h.Get("Svc-Event-Id"), h.Get("Svc-Delivery-Id"), ev.ID, ev.Type)
	}
	return ""
}

// hookEvent is the part of a webhook body the soak reads.
type hookEvent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	App  *struct {
		ID string `json:"id"`
	} `json:"app"`
	Data struct {
		Key string `json:"key"`
	} `json:"data"`
}

// apiCall sends one request with the process's token through client and
// decodes a 2xx answer into out (when not nil). A refusal is an error that
// names the status and body.
func apiCall(ctx context.Context, client *http.Client, p *proc, method, path string, body, out any) (int, error) {
	base := p.Base()
	if base == "" {
		return 0, fmt.Errorf("%s is not serving", p.name)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+"/api/v1"+path, rd)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	req.Header.Set("Authorization", "Bearer "+p.token)
	p.mu.Unlock()
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s via %s: %d %s", method, path, p.name, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode %s: %w", method, path, b, err)
		}
	}
	return resp.StatusCode, nil
}

// secretWrites sets app secrets through random serving nodes, one unique
// key per write, each retried with the same key until a node acknowledges
// it: an answer that is not 200 leaves the outcome unknown (it may have
// committed), and the retry is the same change again.
type secretWrites struct {
	nodes  []*proc
	apps   []string
	total  int
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time
	took   time.Duration

	next, nAcked, nRetried atomic.Int64

	fails failureTally

	mu     sync.Mutex
	acked  map[string]string // key -> app
	gaveUp []string
}

// maxTriesPerWrite bounds the retries of one write: a write refused this
// often is refused for good, which the test reports.
const maxTriesPerWrite = 500

func startSecretWrites(nodes []*proc, apps []string, total, writers int) *secretWrites {
	ctx, cancel := context.WithCancel(context.Background())
	w := &secretWrites{nodes: nodes, apps: apps, total: total, cancel: cancel, start: time.Now(),
		client: &http.Client{Timeout: scaled(10 * time.Second), Transport: &http.Transport{MaxIdleConnsPerHost: writers}},
		acked:  map[string]string{},
	}
	for range writers {
		w.wg.Add(1)
		go w.write(ctx)
	}
	return w
}

func (w *secretWrites) write(ctx context.Context) {
	defer w.wg.Done()
	for ctx.Err() == nil {
		n := int(w.next.Add(1) - 1)
		if n >= w.total {
			return
		}
		key, app := fmt.Sprintf("SOAK_%06d", n), w.apps[n%len(w.apps)]
		for try := 1; ctx.Err() == nil; try++ {
			if try > maxTriesPerWrite {
				w.mu.Lock()
				w.gaveUp = append(w.gaveUp, key)
				w.mu.Unlock()
				break
			}
			if try > 1 {
				w.nRetried.Add(1)
			}
			p := anyServing(w.nodes)
			if p == nil {
				sleepCtx(ctx, 20*time.Millisecond)
				continue
			}
			status, err := apiCall(ctx, w.client, p, "PUT", "/apps/"+app+"/secrets/"+key, map[string]string{"value": "v"}, nil)
			if err == nil && status == http.StatusOK {
				w.mu.Lock()
				w.acked[key] = app
				w.mu.Unlock()
				w.nAcked.Add(1)
				break
			}
			if ctx.Err() != nil {
				return
			}
			class := errorClass(err)
			if status != 0 {
				class = strconv.Itoa(status)
			}
			w.fails.add(class, err)
			sleepCtx(ctx, 25*time.Millisecond)
		}
	}
}

// wait waits until every write is acknowledged or given up, or timeout.
func (w *secretWrites) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		w.cancel()
		<-done
		t.Fatalf("the writers acknowledged only %d of %d writes within %s; failures:%s", w.nAcked.Load(), w.total, timeout, w.fails.summary())
	}
	w.cancel()
	w.took = time.Since(w.start)
}

// waitAcked waits until n writes are acknowledged, or all are done.
func (w *secretWrites) waitAcked(t *testing.T, n int64, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for w.nAcked.Load() < min(n, int64(w.total)) {
		w.mu.Lock()
		gaveUp := len(w.gaveUp)
		w.mu.Unlock()
		if w.nAcked.Load()+int64(gaveUp) >= int64(w.total) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d writes acknowledged (wanted %d) after waiting %s; failures so far:%s", what, w.nAcked.Load(), n, timeout, w.fails.summary())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// soakInt reads a positive count from the environment, def when unset.
func soakInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a whole number", name, v)
	}
	return n
}

// soakSchedule is the retry schedule of the soak: fast, and long enough
// (20 steps, the most accepted) that a receiver failing a fifth of the
// attempts at random never makes a delivery give up (0.2^21).
const soakSchedule = "100ms,200ms,400ms,800ms,1s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s"

// TestWebhooksDeliveredThroughLeaderKills: a three-node cluster, an
// install-wide subscription to app.secret_changed, a receiver that answers
// 500 to a seeded random fifth of the requests, writers setting secrets
// through whichever node answers (one unique key per write, an unknown
// outcome retried), and the leader killed with SIGKILL again and again
// (and restarted). Afterwards every delivery of the log is delivered, and:
// every acknowledged write's event reached the receiver and was answered
// 2xx; every request verified with the subscription's key; repeats of an
// event carry the same body; every event and delivery the receiver saw is
// in the final delivery log; each event was fanned out once; and each key's
// events are exactly its committed changes (as many as the secret's
// version), so nothing was sent for a change that never committed.
//
// SVC_SOAK_EVENTS (300) and SVC_SOAK_KILLS (3) size it; `make
// soak-events` runs 10,000 events through 20 kills. SVC_SOAK_SEED seeds the
// receiver's failures.
func TestWebhooksDeliveredThroughLeaderKills(t *testing.T) {
	const (
		secretsPerApp = 400 // below the 500 an app may hold
		writers       = 4
		failRate      = 0.2
		waitLimit     = 60 * time.Second
	)
	total := soakInt(t, "SVC_SOAK_EVENTS", 300)
	killsWanted := soakInt(t, "SVC_SOAK_KILLS", 3)
	if testing.Short() && os.Getenv("SVC_SOAK_EVENTS") == "" && os.Getenv("SVC_SOAK_KILLS") == "" {
		total, killsWanted = 100, 1
	}
	seed := uint64(soakInt(t, "SVC_SOAK_SEED", 19))
	started := time.Now()

	rc := newSoakReceiver(t, seed, failRate)
	nodes := startClusterWith(t, []string{
		"SVC_POLICY_ALLOW_PRIVATE_WEBHOOKS=true", // the receiver is on loopback
		"SVC_EVENTS_RETRY_SCHEDULE=" + soakSchedule,
		"SVC_EVENTS_ATTEMPT_TIMEOUT=5s",
		"SVC_EVENTS_DISABLE_AFTER=24h",
		// A restarted node catches up from the leader's log when it was
		// down for fewer than this many entries, and by installing a
		// snapshot otherwise. With a single trailing entry, as the cluster
		// test has, a follower at this write rate installs snapshot after
		// snapshot (each older than the log when it lands) and never
		// catches up.
		"SVC_CLUSTER_TRAILING_LOGS=512",
	}, "e2e-webhooks-secret-0123456789", "e2e-webhooks-secret-0123456789", "e2e-webhooks-secret-0123456789")
	leader := waitLeader(t, nodes, scaled(waitLimit))
	client := &http.Client{Timeout: scaled(30 * time.Second)}
	ctx := context.Background()

	apps := make([]string, (total+secretsPerApp-1)/secretsPerApp)
	for i := range apps {
		var a api.AppAnswer
		if _, err := apiCall(ctx, client, leader, "POST", "/apps", api.NewApp{Name: fmt.Sprintf("Soak %d", i)}, &a); err != nil {
			t.Fatalf("create an app: %v", err)
		}
		apps[i] = a.App.ID
	}
	var sub struct {
		Subscription struct{ ID string } `json:"subscription"`
		SigningKey   string              `json:"signing_key"`
	}
	if _, err := apiCall(ctx, client, leader, "POST", "/subscriptions",
		map[string]any{"events": []string{"app.secret_changed"}, "url": rc.srv.URL + "/hook"}, &sub); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	rc.setKey(sub.SigningKey)
	t.Logf("cluster up, %d apps and subscription %s in %s; leader %s; %d events, %d kills, receiver seed %d",
		len(apps), sub.Subscription.ID, time.Since(started).Round(time.Millisecond), leader.name, total, killsWanted, seed)

	load := startSecretWrites(nodes, apps, total, writers)
	defer load.cancel()

	// The kills are spread over the writes: the i-th once i/(K+1) of them
	// are acknowledged.
	kills := 0
	var elections []time.Duration
	for i := 1; i <= killsWanted; i++ {
		load.waitAcked(t, int64(i*total/(killsWanted+1)), scaled(5*waitLimit), fmt.Sprintf("before kill %d", i))
		leader := waitLeader(t, nodes, scaled(waitLimit))
		var rest []*proc
		for _, n := range nodes {
			if n != leader {
				rest = append(rest, n)
			}
		}
		killedAt, sentBefore := time.Now(), len(rc.requests())
		leader.kill()
		kills++
		next := waitLeader(t, rest, scaled(waitLimit))
		elections = append(elections, time.Since(killedAt))
		// Some writes, or deliveries, go through without the killed node
		// before it comes back.
		load.waitAcked(t, load.nAcked.Load()+10, scaled(waitLimit), fmt.Sprintf("kill %d: %s and %s without %s", i, rest[0].name, rest[1].name, leader.name))
		leader.restart()
		leader.waitReady(scaled(waitLimit))
		if kills%5 == 0 || killsWanted <= 5 {
			t.Logf("kill %d: leader %s killed, %s led after %s, %s back; %d writes acknowledged, %d requests received meanwhile",
				i, leader.name, next.name, elections[len(elections)-1].Round(time.Millisecond), leader.name,
				load.nAcked.Load(), len(rc.requests())-sentBefore)
		}
	}
	load.wait(t, scaled(5*waitLimit+time.Duration(total)*50*time.Millisecond))
	load.mu.Lock()
	acked, gaveUp := load.acked, load.gaveUp
	load.mu.Unlock()
	if len(gaveUp) > 0 {
		t.Errorf("%d writes were refused %d times each and given up (%v); failures:%s", len(gaveUp), maxTriesPerWrite, firstIDs(gaveUp, 5), load.fails.summary())
	}

	// Every acknowledged write's event reaches the receiver, answered 2xx.
	drain := scaled(2*time.Minute + time.Duration(total)*20*time.Millisecond)
	deadline := time.Now().Add(drain)
	rc.waitKeys(t, acked, deadline)

	// Then the delivery log ends: nothing waits for an attempt.
	var entries []deliveryEntry
	for {
		leader = waitLeader(t, nodes, scaled(waitLimit))
		var err error
		entries, err = deliveryLog(ctx, client, leader, sub.Subscription.ID)
		if err != nil {
			t.Fatalf("the delivery log: %v", err)
		}
		waiting := 0
		for _, d := range entries {
			if d.State == "pending" || d.State == "retry_scheduled" {
				waiting++
			}
		}
		if waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries still wait for an attempt after %s", waiting, len(entries), drain)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The receiver's record is taken before the final state is read:
	// whatever it got was sent for a delivery that state holds.
	reqs := rc.requests()
	sts := waitConverged(t, nodes, scaled(waitLimit))
	for i, st := range sts[1:] {
		if st.Digest != sts[0].Digest {
			t.Errorf("%s's digest %s differs from %s's %s at applied_index %d", nodes[i+1].name, st.Digest, nodes[0].name, sts[0].Digest, st.AppliedIndex)
		}
	}
	entries, err := deliveryLog(ctx, client, leader, sub.Subscription.ID)
	if err != nil {
		t.Fatalf("the final delivery log: %v", err)
	}
	versions := map[string]int64{} // key -> the secret's version in the final state
	for _, app := range apps {
		ss, err := secretList(ctx, client, leader, app)
		if err != nil {
			t.Fatalf("the secrets of %s: %v", app, err)
		}
		for _, s := range ss {
			versions[s.Key] = s.Version
		}
	}

	tally := checkHooks(t, reqs, entries, versions)
	for key := range acked {
		if versions[key] == 0 {
			t.Errorf("acknowledged write %s is not in the final state", key)
		}
	}

	epochs, installs := 0, 0
	for _, n := range nodes {
		text := n.logText()
		epochs += strings.Count(text, `msg="dispatcher started"`)
		installs += len(installedSnapshot.FindAllStringIndex(text, -1))
	}
	t.Logf("events %d (acknowledged writes %d, write retries %d, %d unacknowledged changes that committed), deliveries %d, attempts %d (recorded in the log %d), "+
		"duplicates %d (requests beyond an event's first; %d events answered 2xx more than once), failures injected %d (%.1f%%), kills %d (elections %v), dispatcher epochs %d, snapshots installed %d, "+
		"writes took %s (%.1f/s), elapsed %s; write failures by class:%s",
		tally.events, len(acked), load.nRetried.Load(), tally.events-len(acked), len(entries), len(reqs), tally.recorded,
		tally.duplicates, tally.twiceOK, tally.injected, 100*float64(tally.injected)/float64(max(len(reqs), 1)), kills, roundAll(elections), epochs, installs,
		load.took.Round(time.Millisecond), float64(len(acked))/load.took.Seconds(), time.Since(started).Round(time.Millisecond), load.fails.summary())
	if len(acked) < total-len(gaveUp) || kills != killsWanted {
		t.Errorf("%d writes acknowledged of %d, %d kills of %d", len(acked), total, kills, killsWanted)
	}
	if tally.injected == 0 && len(reqs) >= 50 {
		t.Errorf("the receiver failed none of %d requests", len(reqs))
	}
}

// hookTally is what the soak counts of the receiver's requests.
type hookTally struct{ events, duplicates, twiceOK, injected, recorded int }

// checkHooks checks the receiver's requests against the final delivery log
// and the secrets' versions in the final state: every request verified;
// the repeats of an event carry its first body; each event was fanned out
// once, and its delivery is delivered and was answered 2xx; every event and
// delivery the receiver got is in the log; each key's events are its
// committed changes (as many as its version); recorded retries follow the
// schedule.
func checkHooks(t *testing.T, reqs []hookRequest, entries []deliveryEntry, versions map[string]int64) hookTally {
	t.Helper()
	// What the receiver got, by event.
	type seen struct {
		body                    []byte
		key                     string
		requests, ok, failed500 int
		deliveries              map[string]bool
	}
	byEvent := map[string]*seen{}
	injected, unverified := 0, 0
	for _, r := range reqs {
		if r.bad != "" {
			if unverified++; unverified <= 5 {
				t.Errorf("a request for event %s (delivery %s) does not verify: %s", r.eventID, r.deliveryID, r.bad)
			}
		}
		if r.status == http.StatusInternalServerError {
			injected++
		}
		s := byEvent[r.eventID]
		if s == nil {
			var ev hookEvent
			if err := json.Unmarshal(r.body, &ev); err != nil || ev.Type != "app.secret_changed" || ev.Data.Key == "" || ev.App == nil {
				t.Errorf("event %s: body %s is not an app.secret_changed event with its key and app", r.eventID, r.body)
			}
			s = &seen{body: r.body, key: ev.Data.Key, deliveries: map[string]bool{}}
			byEvent[r.eventID] = s
		} else if !bytes.Equal(s.body, r.body) {
			t.Errorf("event %s came with two different bodies:\n%s\n%s", r.eventID, s.body, r.body)
		}
		s.requests++
		s.deliveries[r.deliveryID] = true
		if r.status/100 == 2 {
			s.ok++
		}
	}
	if unverified > 0 {
		t.Errorf("%d of %d requests do not verify", unverified, len(reqs))
	}

	// The log: one delivery per event, every one delivered, and every
	// event and delivery the receiver saw among them.
	logByEvent := map[string]deliveryEntry{}
	notDelivered := 0
	for _, d := range entries {
		if prev, dup := logByEvent[d.EventID]; dup {
			t.Errorf("event %s was fanned out twice to the subscription: deliveries %s and %s", d.EventID, prev.ID, d.ID)
		}
		logByEvent[d.EventID] = d
		if d.State != "delivered" {
			if notDelivered++; notDelivered <= 5 {
				t.Errorf("delivery %s of event %s ended %s after %d attempts", d.ID, d.EventID, d.State, len(d.Attempts))
			}
		} else if s := byEvent[d.EventID]; s == nil || s.ok == 0 {
			t.Errorf("delivery %s of event %s is delivered, but the receiver never answered 2xx to that event", d.ID, d.EventID)
		}
	}
	for id, s := range byEvent {
		d, ok := logByEvent[id]
		if !ok {
			t.Errorf("the receiver got event %s (key %s), which no delivery of the final log carries: sent for a change that never committed", id, s.key)
			continue
		}
		for dlv := range s.deliveries {
			if dlv != d.ID {
				t.Errorf("the receiver got event %s as delivery %s; the log has it as %s", id, dlv, d.ID)
			}
		}
	}

	// Each key's events are its committed changes: as many as the
	// secret's version, and no event for a key the state does not hold.
	eventsOfKey := map[string]int64{}
	for _, s := range byEvent {
		eventsOfKey[s.key]++
	}
	mismatched := 0
	for key, n := range eventsOfKey {
		if v := versions[key]; v != n {
			if mismatched++; mismatched <= 5 {
				t.Errorf("key %s: %d events delivered; its committed version is %d", key, n, v)
			}
		}
	}
	for key, v := range versions {
		if _, ok := eventsOfKey[key]; !ok {
			if mismatched++; mismatched <= 5 {
				t.Errorf("key %s: committed at version %d; no event of it was delivered", key, v)
			}
		}
	}
	// Recorded retries follow the schedule: a failure recorded by one
	// leader is retried by the next no sooner than the schedule says.
	var schedule []time.Duration
	for _, step := range strings.Split(soakSchedule, ",") {
		d, _ := time.ParseDuration(step)
		schedule = append(schedule, d)
	}
	var early []string
	for _, d := range entries {
		early = append(early, earlyRetries(d, schedule)...)
	}
	if len(early) > 0 {
		t.Errorf("%d retries came before the schedule's wait, e.g.:\n%s", len(early), strings.Join(early[:min(5, len(early))], "\n"))
	}

	duplicates, twiceOK := 0, 0
	for _, s := range byEvent {
		duplicates += s.requests - 1
		if s.ok > 1 {
			twiceOK++
		}
	}
	recorded := 0
	for _, d := range entries {
		recorded += len(d.Attempts)
	}
	return hookTally{events: len(byEvent), duplicates: duplicates, twiceOK: twiceOK, injected: injected, recorded: recorded}
}

// deliveryEntry is a delivery as the log lists it.
type deliveryEntry struct {
	ID       string `json:"id"`
	EventID  string `json:"event_id"`
	State    string `json:"state"`
	Attempts []struct {
		At         time.Time `json:"at"`
		StatusCode *int      `json:"status_code"`
		Error      *string   `json:"error"`
	} `json:"attempts"`
}

// earlyRetries lists the recorded retries of a delivery made before the
// schedule's wait after the failed attempt before them: the n-th failure
// of a delivery is retried no sooner than schedule[n-1] after that
// attempt began.
func earlyRetries(d deliveryEntry, schedule []time.Duration) []string {
	var out []string
	for i := 1; i < len(d.Attempts) && i <= len(schedule); i++ {
		prev, cur := d.Attempts[i-1], d.Attempts[i]
		if prev.Error == nil {
			break // a delivered attempt ends the series
		}
		if gap := cur.At.Sub(prev.At); gap < schedule[i-1] {
			out = append(out, fmt.Sprintf("delivery %s: attempt %d came %s after attempt %d, which failed (%s); the schedule waits %s",
				d.ID, i+1, gap, i, *prev.Error, schedule[i-1]))
		}
	}
	return out
}

// deliveryLog reads a subscription's whole delivery log, page by page.
func deliveryLog(ctx context.Context, client *http.Client, p *proc, subID string) ([]deliveryEntry, error) {
	return allPages[deliveryEntry](ctx, client, p, "/subscriptions/"+subID+"/deliveries")
}

type secretEntry struct {
	Key     string `json:"key"`
	Version int64  `json:"version"`
}

func secretList(ctx context.Context, client *http.Client, p *proc, appID string) ([]secretEntry, error) {
	return allPages[secretEntry](ctx, client, p, "/apps/"+appID+"/secrets")
}

// allPages reads every page of a cursor-paged list.
func allPages[T any](ctx context.Context, client *http.Client, p *proc, path string) ([]T, error) {
	var out []T
	cursor := ""
	for range 10000 {
		q := url.Values{"limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page api.Page[T]
		if _, err := apiCall(ctx, client, p, "GET", path+"?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
	return nil, errors.New(path + ": more than 10,000 pages")
}
