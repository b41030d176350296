package e2e

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svchost/svc/api"
)

// startCluster starts one node per secret, n1…nN, forming one cluster on
// loopback, and waits until every node serves its API (which it does
// before the cluster has a leader).
func startCluster(t *testing.T, secrets ...string) []*proc {
	t.Helper()
	return startClusterWith(t, nil, secrets...)
}

// startClusterWith is startCluster with extra settings (KEY=VALUE) given
// to every node.
func startClusterWith(t *testing.T, env []string, secrets ...string) []*proc {
	t.Helper()
	return startClusterOf(t, nil, env, secrets...)
}

// startClusterOf is startClusterWith running bins[i] (when bins is not
// nil) for the i-th node.
func startClusterOf(t *testing.T, bins []string, env []string, secrets ...string) []*proc {
	t.Helper()
	addrs := make([]string, len(secrets))
	peers := make([]string, len(secrets))
	for i := range secrets {
		addrs[i] = freeRaftAddr(t)
		peers[i] = fmt.Sprintf("n%d=%s", i+1, addrs[i])
	}
	work := t.TempDir()
	// Every node of a cluster needs the same key-encryption key (the
	// README says to copy the first node's): give them one before they
	// start, or a node cannot open what another sealed.
	kek := make([]byte, 32)
	if _, err := crand.Read(kek); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*proc, len(secrets))
	for i, secret := range secrets {
		id := fmt.Sprintf("n%d", i+1)
		keyDir := filepath.Join(work, id, "keyring")
		if err := os.MkdirAll(keyDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(keyDir, "kek"), kek, 0o600); err != nil {
			t.Fatal(err)
		}
		nodes[i] = newProc(t, id, append([]string{
			"SVC_SERVER_ADDR=127.0.0.1:0",
			"SVC_SERVER_WORK_DIR=" + filepath.Join(work, id),
			"SVC_SERVER_SHUTDOWN_TIMEOUT=5s",
			"SVC_CLUSTER_NODE_ID=" + id,
			"SVC_CLUSTER_RAFT_ADDR=" + addrs[i],
			"SVC_CLUSTER_PEERS=" + strings.Join(peers, ","),
			"SVC_CLUSTER_SECRET=" + secret,
			// Snapshot often and keep one trailing log entry, so that a node
			// that was down catches up by installing the leader's snapshot.
			"SVC_CLUSTER_SNAPSHOT_THRESHOLD=16",
			"SVC_CLUSTER_SNAPSHOT_INTERVAL=300ms",
			"SVC_CLUSTER_TRAILING_LOGS=1",
		}, env...))
		if bins != nil {
			nodes[i].bin = bins[i]
		}
	}
	for _, n := range nodes {
		n.start()
	}
	for _, n := range nodes {
		n.waitServing()
	}
	signIn(t, scaled(60*time.Second), nodes...)
	t.Cleanup(func() {
		for _, n := range nodes {
			log := n.logText()
			for _, s := range secrets {
				if strings.Contains(log, s) {
					t.Errorf("%s: the log contains a cluster secret", n.name)
				}
			}
		}
	})
	return nodes
}

func names(nodes []*proc) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.name)
	}
	return strings.Join(s, ",")
}

// agreedLeader returns the node that every one of nodes names as leader and
// that itself reports it leads, or nil and a description of their views.
func agreedLeader(nodes []*proc) (*proc, string) {
	var views []string
	var leaderID string
	var leader *proc
	agree := true
	for i, n := range nodes {
		st, err := n.status(false)
		if err != nil {
			return nil, fmt.Sprintf("%s: %v", n.name, err)
		}
		views = append(views, fmt.Sprintf("%s: %s term %d leader %q applied %d", n.name, st.State, st.Term, st.LeaderID, st.AppliedIndex))
		if i == 0 {
			leaderID = st.LeaderID
		}
		if st.LeaderID == "" || st.LeaderID != leaderID {
			agree = false
		}
		if st.NodeID == leaderID && st.State == "Leader" {
			leader = n
		}
	}
	if !agree {
		leader = nil
	}
	return leader, strings.Join(views, "; ")
}

// waitLeader waits until nodes agree on a leader among them.
func waitLeader(t *testing.T, nodes []*proc, timeout time.Duration) *proc {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		leader, views := agreedLeader(nodes)
		if leader != nil {
			return leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not agree on a leader among them within %s; last views: %s", names(nodes), timeout, views)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeLoad runs writers that send probes to random serving nodes and
// record every acknowledged one.
type writeLoad struct {
	nodes  []*proc
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time
	took   time.Duration

	nAcked, nFailed atomic.Int64

	mu    sync.Mutex
	acked map[string]api.ProbeResult
	fails failureTally
}

// failureTally counts failed requests by class, with one error message of
// each class.
type failureTally struct {
	mu       sync.Mutex
	counts   map[string]int
	examples map[string]string
}

func (f *failureTally) add(class string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts, f.examples = map[string]int{}, map[string]string{}
	}
	f.counts[class]++
	if _, ok := f.examples[class]; !ok {
		f.examples[class] = err.Error()
	}
}

// summary lists the classes, one a line, with their counts and examples.
func (f *failureTally) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var classes []string
	for c := range f.counts {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	var b strings.Builder
	for _, c := range classes {
		fmt.Fprintf(&b, "\n  %6d × %s (e.g. %s)", f.counts[c], c, f.examples[c])
	}
	return b.String()
}

func startLoad(nodes []*proc, writers int) *writeLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &writeLoad{
		nodes:  nodes,
		cancel: cancel,
		start:  time.Now(),
		acked:  map[string]api.ProbeResult{},
	}
	for range writers {
		l.wg.Add(1)
		go l.write(ctx)
	}
	return l
}

func (l *writeLoad) stop() {
	l.cancel()
	l.wg.Wait()
	l.took = time.Since(l.start)
}

// pick is the client of a random serving node; nil when none serves.
func (l *writeLoad) pick() *api.Client {
	if p := anyServing(l.nodes); p != nil {
		return p.Client() // nil if it was killed since
	}
	return nil
}

// anyServing returns a random node of nodes that serves, nil when none
// does.
func anyServing(nodes []*proc) *proc {
	var live []*proc
	for _, n := range nodes {
		if n.Client() != nil {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[rand.IntN(len(live))]
}

func (l *writeLoad) write(ctx context.Context) {
	defer l.wg.Done()
	for ctx.Err() == nil {
		c := l.pick()
		if c == nil {
			sleepCtx(ctx, 20*time.Millisecond)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := c.WriteProbe(rctx, 32)
		cancel()
		if err == nil {
			if res.ID == "" {
				err = errors.New("a write answered without a probe id")
			} else {
				l.mu.Lock()
				l.acked[res.ID] = res
				l.mu.Unlock()
				l.nAcked.Add(1)
				continue
			}
		}
		if ctx.Err() != nil {
			return // stopped mid-request: the outcome is unknown, not a failure
		}
		class := errorClass(err)
		l.nFailed.Add(1)
		l.fails.add(class, err)
		sleepCtx(ctx, 25*time.Millisecond) // no hot loop against a dead port
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func errorClass(err error) string {
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		return fmt.Sprintf("%s %d", ae.Code, ae.Status)
	case errors.Is(err, context.DeadlineExceeded):
		return "client timeout (5s)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed (EOF)"
	}
	return "other"
}

// waitAcked waits until more writes than n have been acknowledged.
func (l *writeLoad) waitAcked(t *testing.T, n int64, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for l.nAcked.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: only %d writes acknowledged in all (wanted %d) after waiting %s; failures so far:%s",
				what, l.nAcked.Load(), n, timeout, l.fails.summary())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// soakDuration is SVC_SOAK_DURATION, 0 when unset.
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("SVC_SOAK_DURATION")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("SVC_SOAK_DURATION=%q: want a Go duration such as 10m", v)
	}
	if dl, ok := t.Deadline(); ok && time.Until(dl) < d+3*time.Minute {
		t.Fatalf("SVC_SOAK_DURATION=%s needs a go test -timeout of at least %s more than that; %s left",
			d, 3*time.Minute, time.Until(dl).Round(time.Second))
	}
	return d
}

func TestClusterKeepsAcknowledgedWritesThroughLeaderKills(t *testing.T) {
	const (
		writers   = 4
		minAcked  = 50
		perPhase  = 20 // writes acknowledged in each phase of a round
		waitLimit = 30 * time.Second
	)
	soak := soakDuration(t)
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	started := time.Now()

	nodes := startCluster(t, "e2e-cluster-secret-0123456789", "e2e-cluster-secret-0123456789", "e2e-cluster-secret-0123456789")
	first := waitLeader(t, nodes, scaled(60*time.Second))
	t.Logf("cluster up in %s, leader %s", time.Since(started).Round(time.Millisecond), first.name)

	load := startLoad(nodes, writers)
	stopped := false
	defer func() {
		if !stopped {
			load.stop()
		}
	}()
	load.waitAcked(t, perPhase, scaled(waitLimit), "three nodes before any kill")

	kills, installs := 0, 0
	var elections []time.Duration
	for round := 1; ; round++ {
		if soak > 0 {
			if time.Since(load.start) >= soak {
				break
			}
		} else if round > rounds {
			break
		}
		leader := waitLeader(t, nodes, scaled(waitLimit))
		var rest []*proc
		for _, n := range nodes {
			if n != leader {
				rest = append(rest, n)
			}
		}
		before, err := leader.status(false)
		if err != nil {
			t.Fatalf("round %d: status of %s: %v", round, leader.name, err)
		}
		killedAt := time.Now()
		leader.kill()
		kills++
		next := waitLeader(t, rest, scaled(waitLimit))
		elected := time.Since(killedAt)
		elections = append(elections, elected)

		load.waitAcked(t, load.nAcked.Load()+perPhase, scaled(waitLimit),
			fmt.Sprintf("round %d: %s and %s without %s", round, rest[0].name, rest[1].name, leader.name))
		// The new leader compacts its log past everything the killed node
		// has: it can come back only by installing a snapshot.
		waitSnapshotPast(t, next, before.LastIndex+2, scaled(waitLimit))
		leader.restart()
		leader.waitReady(scaled(waitLimit))
		if _, ok := leader.waitLog(installedSnapshot, scaled(waitLimit)); !ok {
			t.Fatalf("round %d: %s came back without installing the leader's snapshot:\n%s", round, leader.name, leader.tail(40))
		}
		installs++
		load.waitAcked(t, load.nAcked.Load()+perPhase, scaled(waitLimit),
			fmt.Sprintf("round %d: after %s came back", round, leader.name))
		if soak == 0 || round%10 == 0 {
			t.Logf("round %d: killed leader %s, %s led after %s; %s back; %d acknowledged, %d failed so far",
				round, leader.name, next.name, elected.Round(time.Millisecond), leader.name, load.nAcked.Load(), load.nFailed.Load())
		}
	}
	load.stop()
	stopped = true

	// A write the writers gave up on may still commit a moment later:
	// compare the nodes once their state has settled, and again if it moved
	// while the probes were listed.
	var (
		sts    []api.RaftStatus
		listed [][]api.Probe
	)
	for attempt := 1; ; attempt++ {
		sts = waitConverged(t, nodes, scaled(60*time.Second))
		listed = make([][]api.Probe, len(nodes))
		for i, n := range nodes {
			probes, err := n.Client().AllProbes(ctxTimeout(t, 2*time.Minute))
			if err != nil {
				t.Fatalf("%s: list probes: %v", n.name, err)
			}
			listed[i] = probes
		}
		moved := false
		for _, n := range nodes {
			if st, err := n.status(false); err != nil || st.AppliedIndex != sts[0].AppliedIndex {
				moved = true
			}
		}
		if !moved {
			break
		}
		if attempt == 3 {
			t.Fatalf("the state still moved %d times after the writers stopped", attempt)
		}
		t.Logf("the state moved while the probes were listed; comparing again")
	}

	load.mu.Lock()
	acked := load.acked
	load.mu.Unlock()
	writesPerSec := float64(len(acked)) / load.took.Seconds()
	t.Logf("acknowledged %d, failed %d, kills %d (each node back by snapshot installation: %d), load %s, elapsed %s, %.1f acknowledged writes/s; elections took %v; applied_index %d on every node; failures by class:%s",
		len(acked), load.nFailed.Load(), kills, installs, load.took.Round(time.Millisecond), time.Since(started).Round(time.Millisecond),
		writesPerSec, roundAll(elections), sts[0].AppliedIndex, load.fails.summary())

	// (a) Every node holds the same state.
	for i, st := range sts[1:] {
		if st.Digest != sts[0].Digest {
			t.Errorf("%s's digest %s differs from %s's %s at applied_index %d",
				nodes[i+1].name, st.Digest, nodes[0].name, sts[0].Digest, st.AppliedIndex)
		}
	}

	// (b) Every acknowledged probe is on every node, and the nodes list the
	// same probes.
	sets := make([]map[string]bool, len(nodes))
	for i, n := range nodes {
		sets[i] = make(map[string]bool, len(listed[i]))
		for _, p := range listed[i] {
			sets[i][p.ID] = true
		}
		var missing []api.ProbeResult
		for id, res := range acked {
			if !sets[i][id] {
				missing = append(missing, res)
			}
		}
		if len(missing) > 0 {
			slices.SortFunc(missing, func(a, b api.ProbeResult) int { return strings.Compare(a.ID, b.ID) })
			t.Errorf("%s is missing %d of %d acknowledged probes (it holds %d); the first of them (id@index via the node that answered, the leader it named): %s",
				n.name, len(missing), len(acked), len(listed[i]), describeProbes(missing, 10))
		} else {
			t.Logf("%s holds all %d acknowledged probes (%d probes in all)", n.name, len(acked), len(listed[i]))
		}
	}
	for i := 1; i < len(nodes); i++ {
		var only0, onlyI []string
		for id := range sets[0] {
			if !sets[i][id] {
				only0 = append(only0, id)
			}
		}
		for id := range sets[i] {
			if !sets[0][id] {
				onlyI = append(onlyI, id)
			}
		}
		if len(only0)+len(onlyI) > 0 {
			t.Errorf("%s and %s list different probes: %d only on %s (%v), %d only on %s (%v)",
				nodes[0].name, nodes[i].name, len(only0), nodes[0].name, firstIDs(only0, 5), len(onlyI), nodes[i].name, firstIDs(onlyI, 5))
		}
	}

	// No two acknowledged writes claim the same log index.
	byIndex := map[uint64]string{}
	for id, res := range acked {
		if other, dup := byIndex[res.Index]; dup {
			t.Errorf("probes %s and %s were both acknowledged at index %d", other, id, res.Index)
		}
		byIndex[res.Index] = id
	}

	// (c) The test exercised something.
	if len(acked) < minAcked {
		t.Errorf("only %d writes were acknowledged, want at least %d: the test did not exercise the cluster", len(acked), minAcked)
	}
	if kills == 0 {
		t.Errorf("no leader was killed")
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	if len(out) > 12 {
		out = out[:12]
	}
	return out
}

func firstIDs(ids []string, n int) []string {
	slices.Sort(ids)
	return ids[:min(n, len(ids))]
}

func describeProbes(ps []api.ProbeResult, n int) string {
	var s []string
	for _, p := range ps[:min(n, len(ps))] {
		s = append(s, fmt.Sprintf("%s@%d via %s (leader %s)", p.ID, p.Index, p.Node, p.Leader))
	}
	return strings.Join(s, ", ")
}

// waitConverged waits until every node reports the same applied index in
// two polls in a row, and returns their statuses with digests. Digests that
// differ at a settled applied index are returned as they are, for the
// caller to report.
func waitConverged(t *testing.T, nodes []*proc, timeout time.Duration) []api.RaftStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var prev uint64
	for {
		sts := make([]api.RaftStatus, len(nodes))
		var views []string
		var err error
		for i, n := range nodes {
			if sts[i], err = n.status(true); err != nil {
				views = append(views, fmt.Sprintf("%s: %v", n.name, err))
				break
			}
			views = append(views, fmt.Sprintf("%s: %s leader %q applied %d commit %d", n.name, sts[i].State, sts[i].LeaderID, sts[i].AppliedIndex, sts[i].CommitIndex))
		}
		if err == nil && sameApplied(sts) {
			if sts[0].AppliedIndex == prev {
				return sts
			}
			prev = sts[0].AppliedIndex
		} else {
			prev = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes did not settle on the same applied_index within %s: %s", timeout, strings.Join(views, "; "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func sameApplied(sts []api.RaftStatus) bool {
	for _, st := range sts {
		if st.AppliedIndex == 0 || st.AppliedIndex != sts[0].AppliedIndex {
			return false
		}
	}
	return true
}

var (
	// refusedConn is the server side of a failed cluster handshake.
	refusedConn = regexp.MustCompile(`.*msg="refused cluster connection".*`)
	// handshakeErr is the client side, which names the likely cause.
	handshakeErr = regexp.MustCompile(`.*cluster handshake refused.*cluster secret.*`)
)

func TestClusterRefusesAWrongSecret(t *testing.T) {
	const good, bad = "e2e-good-secret-0123456789", "e2e-wrong-secret-987654321"
	watch := 5 * time.Second
	if testing.Short() {
		watch = 3 * time.Second
	}
	nodes := startCluster(t, good, good, bad)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	leader := waitLeader(t, []*proc{n1, n2}, scaled(60*time.Second))
	t.Logf("%s and %s elected %s", n1.name, n2.name, leader.name)

	// Writes through either good node commit and are read back on both.
	var ids []string
	for _, n := range []*proc{n1, n2} {
		res, err := n.Client().WriteProbe(ctxTimeout(t, 15*time.Second), 8)
		if err != nil {
			t.Fatalf("write through %s: %v", n.name, err)
		}
		ids = append(ids, res.ID)
	}
	for _, id := range ids {
		for _, n := range []*proc{n1, n2} {
			deadline := time.Now().Add(scaled(10 * time.Second))
			for {
				_, err := n.Client().Probe(ctxTimeout(t, 5*time.Second), id)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%s: probe %s not readable within 10s: %v", n.name, id, err)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}

	// The node with the wrong secret never learns a leader.
	checks := 0
	for end := time.Now().Add(watch); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		ok, err := n3.ready()
		if err != nil {
			t.Fatalf("%s: /readyz: %v", n3.name, err)
		}
		if ok {
			st, _ := n3.status(false)
			t.Fatalf("%s, with the wrong secret, is ready: it knows leader %q (state %s, term %d)", n3.name, st.LeaderID, st.State, st.Term)
		}
		checks++
	}
	// It holds none of the cluster's state, not even the account and token
	// the others know, and it knows it has not caught up: it does not
	// refuse the token minted on a good node as invalid, but answers
	// STORE_UNAVAILABLE.
	if _, err := n3.status(false); !api.IsCode(err, "STORE_UNAVAILABLE") {
		t.Errorf("%s, with the wrong secret, answered the cluster's token with %v; want STORE_UNAVAILABLE (it has not caught up with any leader)", n3.name, err)
	}
	if _, err := n3.Client().AllProbes(ctxTimeout(t, 10*time.Second)); !api.IsCode(err, "STORE_UNAVAILABLE") {
		t.Errorf("%s: list probes: %v; want STORE_UNAVAILABLE", n3.name, err)
	}
	t.Logf("%s: /readyz 503 on %d checks over %s", n3.name, checks, watch)

	// It says why: it refuses the leader's connections, and the good nodes
	// refuse its vote requests.
	for _, n := range nodes {
		if line, ok := n.waitLog(refusedConn, scaled(20*time.Second)); !ok {
			t.Errorf("%s: no \"refused cluster connection\" in its log", n.name)
		} else {
			t.Logf("%s logged: %s", n.name, line)
		}
	}
	if line, ok := n3.waitLog(handshakeErr, scaled(20*time.Second)); !ok {
		t.Errorf("%s: no handshake error naming the secret in its log", n3.name)
	} else {
		t.Logf("%s logged: %s", n3.name, line)
	}

	// The good nodes still agree and still take writes.
	if l2 := waitLeader(t, []*proc{n1, n2}, scaled(30*time.Second)); l2 != leader {
		t.Logf("leadership moved from %s to %s while %s knocked", leader.name, l2.name, n3.name)
	}
	if _, err := n1.Client().WriteProbe(ctxTimeout(t, 15*time.Second), 8); err != nil {
		t.Errorf("a write through %s after the watch: %v", n1.name, err)
	}
}

// installedSnapshot is what raft logs when a follower installs the leader's
// snapshot.
var installedSnapshot = regexp.MustCompile(`Installed remote snapshot`)

// waitSnapshotPast waits until p has taken a snapshot at or after index,
// reading the snapshot directories of its store (named term-index-millis).
func waitSnapshotPast(t *testing.T, p *proc, index uint64, timeout time.Duration) {
	t.Helper()
	dir := filepath.Join(envValue(p.env, "SVC_SERVER_WORK_DIR"), "raft", "snapshots")
	deadline := time.Now().Add(timeout)
	for {
		var newest uint64
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			parts := strings.Split(e.Name(), "-")
			if len(parts) != 3 || strings.HasSuffix(e.Name(), ".tmp") {
				continue
			}
			if n, err := strconv.ParseUint(parts[1], 10, 64); err == nil && n > newest {
				newest = n
			}
		}
		if newest >= index {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s took no snapshot at or after index %d (newest %d) within %s", p.name, index, newest, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
