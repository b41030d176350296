package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rollingStatus is GET /api/v1/upgrade's answer with a rollout's steps.
type rollingStatus struct {
	Upgrade *struct {
		ID, State, From, To string
		Reason              *string
		Nodes               []struct {
			ID, Version, State string
			StartedAt          *time.Time `json:"started_at"`
			FinishedAt         *time.Time `json:"finished_at"`
		}
	} `json:"upgrade"`
	Version string `json:"version"`
}

// startRollingCluster starts three nodes of the old build, each from its
// own copy of the binary, with a webhook receiver subscribed to the
// upgrade events.
func startRollingCluster(t *testing.T) (nodes []*proc, leader *proc, rc *soakReceiver) {
	t.Helper()
	dir := t.TempDir()
	old := versionBuild(t, oldVersion)
	bins := make([]string, 3)
	for i := range bins {
		bins[i] = installBinary(t, old, filepath.Join(dir, fmt.Sprintf("bin%d", i+1)))
	}
	secret := "e2e-rolling-secret-0123456789"
	nodes = startClusterOf(t, bins, []string{
		"SVC_UPGRADE_READY_TIMEOUT=" + scaled(90*time.Second).String(),
		"SVC_POLICY_ALLOW_PRIVATE_WEBHOOKS=true", // the receiver is on loopback
	}, secret, secret, secret)
	leader = waitLeader(t, nodes, scaled(60*time.Second))
	rc = subscribeUpgrades(t, leader)
	return nodes, leader, rc
}

// startRollout uploads bin to p and returns the accepted rollout.
func startRollout(t *testing.T, p *proc, bin string) rollingStatus {
	t.Helper()
	status, body := postUpgrade(t, p, bin, "")
	var st rollingStatus
	if status != http.StatusAccepted || json.Unmarshal(body, &st) != nil || st.Upgrade == nil {
		t.Fatalf("%s: POST /api/v1/upgrade: %d %s", p.name, status, body)
	}
	return st
}

// waitRollout waits until rollout id has ended, asking any node that
// answers (each restarts on its turn).
func waitRollout(t *testing.T, nodes []*proc, id string, timeout time.Duration) rollingStatus {
	t.Helper()
	client := &http.Client{Timeout: scaled(10 * time.Second)}
	deadline := time.Now().Add(timeout)
	last := ""
	for i := 0; ; i++ {
		var st rollingStatus
		n := nodes[i%len(nodes)]
		status, err := apiCall(context.Background(), client, n, http.MethodGet, "/upgrade", nil, &st)
		switch {
		case err != nil:
			last = n.name + ": " + err.Error()
		case status != http.StatusOK:
			last = fmt.Sprintf("%s: status %d", n.name, status)
		case st.Upgrade != nil && st.Upgrade.ID == id && (st.Upgrade.State == "done" || st.Upgrade.State == "failed"):
			return st
		default:
			b, _ := json.Marshal(st)
			last = n.name + ": " + string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollout %s did not end within %s; last: %s", id, timeout, last)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// eventsOf are the distinct delivered events of type typ (a delivery may
// be repeated when leadership moves), by event ID.
func eventsOf(t *testing.T, rc *soakReceiver, typ string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, r := range rc.requests() {
		if r.eventType == typ && r.status/100 == 2 {
			out[r.eventID] = deliveryData(t, r)
		}
	}
	return out
}

// TestUpgradeClusterRolling upgrades a three-node cluster of the old build
// from one POST /api/v1/upgrade to a follower, while writers keep writing:
// the servers upgrade one at a time (each step starts after the previous
// one ended), the followers by ID and the leader last, each in place (the
// same process); the rollout ends done with every node on the new
// version, one svc.upgraded per node, and every acknowledged write on
// every node.
func TestUpgradeClusterRolling(t *testing.T) {
	nodes, leader, rc := startRollingCluster(t)
	pids := map[string]int{}
	var followers []string
	var entry *proc
	for _, n := range nodes {
		pids[n.name] = n.current().cmd.Process.Pid
		if n != leader {
			followers = append(followers, n.name)
			if entry == nil {
				entry = n
			}
		}
	}
	slices.Sort(followers)
	wantOrder := append(followers, leader.name)

	load := startLoad(nodes, 2)
	stopped := false
	defer func() {
		if !stopped {
			load.stop()
		}
	}()
	load.waitAcked(t, 20, scaled(60*time.Second), "before the rollout")

	started := startRollout(t, entry, versionBuild(t, newVersion))
	var order []string
	for _, n := range started.Upgrade.Nodes {
		order = append(order, n.ID)
	}
	if started.Upgrade.State != "rolling" || !slices.Equal(order, wantOrder) || started.Upgrade.To != newVersion {
		t.Fatalf("the accepted rollout: %+v with nodes %v; want rolling to %s in the order %v", started.Upgrade, order, newVersion, wantOrder)
	}
	// A second upload while it rolls is refused.
	if status, body := postUpgrade(t, leader, versionBuild(t, newVersion), ""); status != http.StatusConflict || !strings.Contains(string(body), "STATE_INVALID") {
		t.Errorf("a second upload during the rollout: %d %s; want 409 STATE_INVALID", status, body)
	}

	st := waitRollout(t, nodes, started.Upgrade.ID, scaled(10*time.Minute))
	if st.Upgrade.State != "done" {
		t.Fatalf("the rollout ended %s (reason %v); want done", st.Upgrade.State, st.Upgrade.Reason)
	}
	for i, n := range st.Upgrade.Nodes {
		if n.State != "done" || n.Version != newVersion || n.StartedAt == nil || n.FinishedAt == nil {
			t.Errorf("node %s: %+v; want done on %s with its times", n.ID, n, newVersion)
			continue
		}
		if i > 0 {
			if prev := st.Upgrade.Nodes[i-1]; prev.FinishedAt == nil || n.StartedAt.Before(*prev.FinishedAt) {
				t.Errorf("%s began upgrading at %s, before %s had finished (%v): not one at a time", n.ID, n.StartedAt, prev.ID, prev.FinishedAt)
			}
		}
	}
	for _, n := range nodes {
		n.waitReady(scaled(60 * time.Second))
		var cur rollingStatus
		if _, err := apiCall(context.Background(), &http.Client{Timeout: scaled(10 * time.Second)}, n, http.MethodGet, "/upgrade", nil, &cur); err != nil || cur.Version != newVersion {
			t.Errorf("%s runs %q (%v); want %s", n.name, cur.Version, err, newVersion)
		}
		if got := n.current().cmd.Process.Pid; got != pids[n.name] {
			t.Errorf("%s: pid %d after the rollout; want %d (upgraded in place)", n.name, got, pids[n.name])
		}
	}
	waitLeader(t, nodes, scaled(60*time.Second))
	load.waitAcked(t, load.nAcked.Load()+10, scaled(60*time.Second), "after the rollout")
	load.stop()
	stopped = true

	deadline := time.Now().Add(scaled(60 * time.Second))
	for len(eventsOf(t, rc, "svc.upgraded")) < len(nodes) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if got := eventsOf(t, rc, "svc.upgraded"); len(got) != len(nodes) {
		t.Errorf("%d svc.upgraded events delivered; want one per node (%d)", len(got), len(nodes))
	} else {
		for _, d := range got {
			if d["from"] != oldVersion || d["to"] != newVersion {
				t.Errorf("svc.upgraded data %v; want from %s to %s", d, oldVersion, newVersion)
			}
		}
	}
	if got := eventsOf(t, rc, "svc.upgrade_failed"); len(got) != 0 {
		t.Errorf("svc.upgrade_failed delivered: %v", got)
	}

	// The console's upgrade page shows the rollout, server by server.
	t.Run("console", func(t *testing.T) {
		n := nodes[0]
		tab := consoleTab(t, browse(t))
		(&webServer{console: n.Base()}).signInTab(t, tab, "admin", adminPassword)
		tab.Go(n.Base() + "/admin/upgrade")
		waitFor(t, tab, "the rollout's servers, each done", `(() => {
			const rows = [...document.querySelectorAll('[data-table="upgrade-nodes"] tr[data-node]')];
			return document.querySelector('[data-upgrade-state="done"]') && rows.length === 3 &&
				rows.map(r => r.dataset.node).join() === `+strconv.Quote(strings.Join(wantOrder, ","))+` &&
				rows.every(r => r.innerText.includes("done") && r.innerText.includes(`+strconv.Quote(newVersion)+`));
		})()`)
		accessible(t, tab, "the upgrade page after a rollout")
		noProblems(t, tab)
	})

	waitConverged(t, nodes, scaled(60*time.Second))
	load.mu.Lock()
	acked := load.acked
	load.mu.Unlock()
	for _, n := range nodes {
		probes, err := n.Client().AllProbes(ctxTimeout(t, 2*time.Minute))
		if err != nil {
			t.Fatalf("%s: list probes: %v", n.name, err)
		}
		held := map[string]bool{}
		for _, p := range probes {
			held[p.ID] = true
		}
		lost := 0
		for id := range acked {
			if !held[id] {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("%s lacks %d of %d acknowledged writes after the rollout", n.name, lost, len(acked))
		}
	}
	t.Logf("%d writes acknowledged across the rollout, %d failed", len(acked), load.nFailed.Load())
}

// TestUpgradeClusterRollingStopsAtABrokenBinary uploads a binary that
// passes the check but cannot serve: the first server's step fails (its
// previous binary restored), the rollout stops there, failed, naming the
// server; no other server tries it; svc.upgrade_failed is delivered once,
// naming it; every server still runs the old version.
func TestUpgradeClusterRollingStopsAtABrokenBinary(t *testing.T) {
	nodes, leader, rc := startRollingCluster(t)
	var entry *proc
	for _, n := range nodes {
		if n != leader {
			entry = n
			break
		}
	}
	started := startRollout(t, entry, brokenBuild(t))
	first := started.Upgrade.Nodes[0].ID
	st := waitRollout(t, nodes, started.Upgrade.ID, scaled(6*time.Minute))
	if st.Upgrade.State != "failed" || st.Upgrade.Reason == nil || !strings.HasPrefix(*st.Upgrade.Reason, first+": ") {
		t.Fatalf("the rollout: %+v; want failed, its reason naming %s", st.Upgrade, first)
	}
	for i, n := range st.Upgrade.Nodes {
		want := "pending"
		if i == 0 {
			want = "failed"
		}
		if n.State != want {
			t.Errorf("node %s: %s; want %s", n.ID, n.State, want)
		}
	}
	for _, n := range nodes {
		n.waitReady(scaled(60 * time.Second))
		var cur rollingStatus
		if _, err := apiCall(context.Background(), &http.Client{Timeout: scaled(10 * time.Second)}, n, http.MethodGet, "/upgrade", nil, &cur); err != nil || cur.Version != oldVersion {
			t.Errorf("%s runs %q (%v); want %s still", n.name, cur.Version, err, oldVersion)
		}
	}
	deadline := time.Now().Add(scaled(60 * time.Second))
	for len(eventsOf(t, rc, "svc.upgrade_failed")) == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(scaled(3 * time.Second)) // a second one, were there one, has had time
	failed := eventsOf(t, rc, "svc.upgrade_failed")
	if len(failed) != 1 {
		t.Fatalf("%d svc.upgrade_failed events delivered; want 1", len(failed))
	}
	for _, d := range failed {
		if reason, _ := d["reason"].(string); !strings.HasPrefix(reason, first+": ") || d["to"] != "9.9.9-broken" {
			t.Errorf("svc.upgrade_failed data %v; want to 9.9.9-broken, the reason naming %s", d, first)
		}
	}
	if got := eventsOf(t, rc, "svc.upgraded"); len(got) != 0 {
		t.Errorf("svc.upgraded delivered: %v", got)
	}
}
