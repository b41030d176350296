package upgrade

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func rollout(state string, steps ...string) *Rollout {
	ro := &Rollout{Record: Record{ID: "upg_1", State: state, From: "1.0", To: "1.1", StartedAt: t0}, Digest: strings.Repeat("a", 64)}
	for _, s := range steps {
		node, st, _ := strings.Cut(s, "=")
		step := Step{Node: node, State: st}
		if st == StepUpgrading {
			at := t0
			step.StartedAt = &at
		}
		ro.Steps = append(ro.Steps, step)
	}
	return ro
}

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		servers []string
		leader  string
		want    []string
	}{
		{[]string{"c", "a", "b"}, "a", []string{"b", "c", "a"}},
		{[]string{"c", "a", "b"}, "c", []string{"a", "b", "c"}},
		{[]string{"b", "a"}, "", []string{"a", "b"}},
		{[]string{"a"}, "a", []string{"a"}},
		{[]string{"a", "a", "b"}, "b", []string{"a", "b"}},
	} {
		if got := Order(tc.servers, tc.leader); !slices.Equal(got, tc.want) {
			t.Errorf("Order(%v, %q) = %v; want %v", tc.servers, tc.leader, got, tc.want)
		}
	}
}

func TestNextStep(t *testing.T) {
	const timeout = 10 * time.Minute
	for _, tc := range []struct {
		name   string
		ro     *Rollout
		self   string
		leader string
		at     time.Duration // after t0
		want   StepAction
		step   int
	}{
		{"no rollout", nil, "a", "a", 0, Idle, -1},
		{"done", rollout(StateDone, "a=done", "b=done"), "a", "b", 0, Idle, -1},
		{"failed", rollout(StateFailed, "a=failed", "b=pending"), "b", "b", 0, Idle, -1},
		{"a failed step in a rolling one", rollout(StateRolling, "a=failed", "b=pending"), "b", "a", 0, Idle, -1},
		{"my turn, a follower", rollout(StateRolling, "a=pending", "b=pending", "c=pending"), "a", "c", 0, Upgrade, 0},
		{"another's turn", rollout(StateRolling, "a=pending", "b=pending", "c=pending"), "b", "c", 0, Wait, 0},
		{"the leader waits for the followers", rollout(StateRolling, "a=pending", "b=pending", "c=pending"), "c", "c", 0, Wait, 0},
		{"my turn, after the first", rollout(StateRolling, "a=done", "b=pending", "c=pending"), "b", "c", 0, Upgrade, 1},
		{"my turn, and I lead: hand it on", rollout(StateRolling, "a=done", "b=done", "c=pending"), "c", "c", 0, Transfer, 2},
		{"my turn after leadership moved", rollout(StateRolling, "a=done", "b=done", "c=pending"), "c", "a", 0, Upgrade, 2},
		{"leadership moved to the one whose turn it is", rollout(StateRolling, "a=pending", "b=pending", "c=pending"), "a", "a", 0, Transfer, 0},
		{"no leader known: wait", rollout(StateRolling, "a=pending", "b=pending"), "a", "", 0, Wait, 0},
		{"a single server upgrades without a transfer", rollout(StateRolling, "a=pending"), "a", "a", 0, Upgrade, 0},
		{"one under way: wait", rollout(StateRolling, "a=upgrading", "b=pending"), "b", "b", time.Minute, Wait, 0},
		{"one under way too long: the leader gives up on it", rollout(StateRolling, "a=upgrading", "b=pending"), "b", "b", timeout + time.Second, Abandon, 0},
		{"one under way too long: a follower waits", rollout(StateRolling, "a=upgrading", "b=pending", "c=pending"), "b", "c", timeout + time.Second, Wait, 0},
		{"my own step under way", rollout(StateRolling, "a=upgrading", "b=pending"), "a", "b", time.Minute, Wait, 0},
		{"a server not in the rollout", rollout(StateRolling, "a=pending", "b=pending"), "z", "a", 0, Wait, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, step := NextStep(tc.ro, tc.self, tc.leader, t0.Add(tc.at), timeout)
			if got != tc.want || step != tc.step {
				t.Errorf("NextStep = %v, step %d; want %v, step %d", got, step, tc.want, tc.step)
			}
		})
	}
}

// TestRolloutRunsOneServerAtATime plays a rollout of three servers round
// by round through the real store: in each round every server acts on
// NextStep as Follow does (a transfer moves leadership; an upgrade's
// step goes to upgrading, and in the next round its new binary ends it
// done). At most one server is ever upgrading, the leader goes last and
// only once it no longer leads, and the rollout ends done.
func TestRolloutRunsOneServerAtATime(t *testing.T) {
	store := raftstoretest.Open(t, Rollouts, audit.Entries, events.Events, events.Cursors)
	servers, leader := []string{"n3", "n1", "n2"}, "n2"
	ro := rollout(StateRolling)
	for _, id := range Order(servers, leader) {
		ro.Steps = append(ro.Steps, Step{Node: id, State: StepPending})
	}
	update(t, store, func(r *raftstore.Reader) ([]raftstore.Op, error) { return startRolloutOps(r, ro) })

	var upgraded []string
	upgrading := ""
	for round := 0; round < 20; round++ {
		cur := LatestRollout(store.Read())
		if cur.State != StateRolling {
			break
		}
		if upgrading != "" { // its new binary serves: the step ends
			update(t, store, func(r *raftstore.Reader) ([]raftstore.Op, error) {
				_, ops, err := stepOps(r, cur.ID, upgrading, []string{StepUpgrading}, StepDone, "", t0)
				return ops, err
			})
			upgrading = ""
			continue
		}
		for _, self := range servers {
			a, _ := NextStep(cur, self, leader, t0, time.Hour)
			switch a {
			case Transfer:
				leader = servers[(slices.Index(servers, self)+1)%len(servers)]
			case Upgrade:
				if self == leader {
					t.Fatalf("round %d: %s upgrades while it leads", round, self)
				}
				if upgrading != "" {
					t.Fatalf("round %d: %s upgrades while %s does", round, self, upgrading)
				}
				update(t, store, func(r *raftstore.Reader) ([]raftstore.Op, error) {
					_, ops, err := stepOps(r, cur.ID, self, []string{StepPending}, StepUpgrading, "", t0)
					return ops, err
				})
				upgrading = self
				upgraded = append(upgraded, self)
			}
		}
	}
	final := LatestRollout(store.Read())
	if final.State != StateDone || final.FinishedAt == nil {
		t.Fatalf("the rollout ended %s; want done", final.State)
	}
	if want := []string{"n1", "n3", "n2"}; !slices.Equal(upgraded, want) {
		t.Errorf("servers upgraded in the order %v; want %v (followers by ID, the leader last)", upgraded, want)
	}
	for _, st := range final.Steps {
		if st.State != StepDone || st.StartedAt == nil || st.FinishedAt == nil {
			t.Errorf("step %+v; want done with its times", st)
		}
	}
}

func TestRolloutSteps(t *testing.T) {
	store := raftstoretest.Open(t, Rollouts, audit.Entries, events.Events, events.Cursors)
	ro := rollout(StateRolling, "a=pending", "b=pending")
	update(t, store, func(r *raftstore.Reader) ([]raftstore.Op, error) { return startRolloutOps(r, ro) })

	// A second rollout is refused while one rolls.
	second := rollout(StateRolling, "a=pending")
	second.ID = "upg_2"
	_, err := store.Update(context.Background(), func(r *raftstore.Reader) ([]raftstore.Op, error) { return startRolloutOps(r, second) })
	if e, ok := errcode.As(err); !ok || e.Code != errcode.StateInvalid {
		t.Fatalf("a second rollout: %v; want STATE_INVALID", err)
	}
	step := func(node, from, to, reason string) error {
		_, err := store.Update(context.Background(), func(r *raftstore.Reader) ([]raftstore.Op, error) {
			_, ops, err := stepOps(r, "upg_1", node, []string{from}, to, reason, t0)
			return ops, err
		})
		return err
	}
	if err := step("a", StepPending, StepUpgrading, ""); err != nil {
		t.Fatal(err)
	}
	// Two servers claiming the same step: only the first does.
	if err := step("a", StepPending, StepUpgrading, ""); !errors.Is(err, errStepMoved) {
		t.Fatalf("a step claimed twice: %v; want errStepMoved", err)
	}
	if err := step("z", StepPending, StepUpgrading, ""); !errors.Is(err, errStepMoved) {
		t.Fatalf("a server not in the rollout: %v; want errStepMoved", err)
	}
	if err := step("a", StepUpgrading, StepFailed, "the new binary did not become ready"); err != nil {
		t.Fatal(err)
	}
	got := LatestRollout(store.Read())
	if got.State != StateFailed || got.Reason == nil || *got.Reason != "a: the new binary did not become ready" || got.Steps[1].State != StepPending {
		t.Fatalf("after a failed step: %+v; want the rollout failed naming a, b left pending", got)
	}
	if err := step("b", StepPending, StepUpgrading, ""); !errors.Is(err, errStepMoved) {
		t.Fatalf("a step of a failed rollout: %v; want errStepMoved", err)
	}
	// Once it failed, a new rollout may start.
	update(t, store, func(r *raftstore.Reader) ([]raftstore.Op, error) { return startRolloutOps(r, second) })
	if got := LatestRollout(store.Read()); got.ID != "upg_2" {
		t.Fatalf("latest rollout %s; want upg_2", got.ID)
	}
}

func TestRolloutStatus(t *testing.T) {
	ro := rollout(StateRolling, "a=done", "b=upgrading", "c=pending")
	st := ro.status("c", "1.0")
	want := []Node{{ID: "a", Version: "1.1", State: StepDone}, {ID: "b", Version: "1.0", State: StepUpgrading, StartedAt: ro.Steps[1].StartedAt}, {ID: "c", Version: "1.0", State: StepPending}}
	if !slices.Equal(st.Nodes, want) || st.State != StateRolling || st.ID != "upg_1" {
		t.Errorf("status = %+v; want nodes %v", st, want)
	}
}

func update(t *testing.T, store *raftstore.Store, build raftstore.Build) {
	t.Helper()
	if _, err := store.Update(context.Background(), build); err != nil {
		t.Fatal(err)
	}
}

func TestDropBlobs(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"upg_1", "upg_2", "upg_3"} {
		if err := keepBlob(dir, BlobPrefix+id, writeFile(t, "binary "+id)); err != nil {
			t.Fatal(err)
		}
	}
	left := func() (names []string) {
		entries, _ := os.ReadDir(filepath.Join(dir, blobDir))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	dropBlobs(dir, nil)
	if got := left(); len(got) != 3 {
		t.Fatalf("with no rollout: %v left; want all three", got)
	}
	ro := rollout(StateRolling, "a=pending")
	ro.ID = "upg_2"
	dropBlobs(dir, ro)
	if got, want := left(), []string{BlobPrefix + "upg_2", BlobPrefix + "upg_3"}; !slices.Equal(got, want) {
		t.Fatalf("while upg_2 rolls: %v left; want %v (its binary, and a newer one being started)", got, want)
	}
	ro.State = StateDone
	dropBlobs(dir, ro)
	if got, want := left(), []string{BlobPrefix + "upg_3"}; !slices.Equal(got, want) {
		t.Fatalf("once upg_2 ended: %v left; want %v", got, want)
	}
	rc, size, err := OpenBlob(dir, BlobPrefix+"upg_3")
	if err != nil || size != int64(len("binary upg_3")) {
		t.Fatalf("OpenBlob: %v, %d bytes", err, size)
	}
	rc.Close()
	for _, name := range []string{"upg_3", BlobPrefix + "../upgrade.json", "src-x"} {
		if _, _, err := OpenBlob(dir, name); err == nil {
			t.Errorf("OpenBlob(%q) opened a file; want it refused", name)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReportEndsTheStep: a rollout step's upgrade, reported by the
// server's new (or restored) binary, ends its step in the write of its
// event; a failure names the server in the event and the rollout.
func TestReportEndsTheStep(t *testing.T) {
	for _, tc := range []struct {
		state, wantStep, wantRollout, event string
	}{
		{StateDone, StepDone, StateRolling, "svc.upgraded"},
		{StateFailed, StepFailed, StateFailed, "svc.upgrade_failed"},
	} {
		t.Run(tc.state, func(t *testing.T) {
			store := raftstoretest.Open(t, Rollouts, audit.Entries, events.Events, events.Cursors)
			ro := rollout(StateRolling, "a=upgrading", "b=pending")
			update(t, store, func(r *raftstore.Reader) ([]raftstore.Op, error) { return startRolloutOps(r, ro) })
			m := &Marker{Record: Record{ID: ro.ID, State: tc.state, From: "1.0", To: "1.1"}, Rollout: ro.ID}
			if tc.state == StateFailed {
				reason := "it did not become ready"
				m.Reason = &reason
			}
			if err := Report(context.Background(), store, t.TempDir(), m, "a", t0); err != nil {
				t.Fatal(err)
			}
			got := LatestRollout(store.Read())
			if got.Steps[0].State != tc.wantStep || got.State != tc.wantRollout || got.Steps[1].State != StepPending {
				t.Fatalf("after the report: %+v; want a %s, the rollout %s, b pending", got, tc.wantStep, tc.wantRollout)
			}
			evs, _ := events.Events.List(store.Read(), raftstore.Query{})
			if len(evs) != 1 || evs[0].Value.Type != tc.event {
				t.Fatalf("events %v; want one %s", evs, tc.event)
			}
			if tc.state == StateFailed {
				if r := evs[0].Value.Data["reason"]; r != "a: it did not become ready" || *got.Reason != "a: it did not become ready" || *got.Steps[0].Reason != "it did not become ready" {
					t.Errorf("event reason %v, rollout reason %v, step reason %v; want the server named once", r, *got.Reason, *got.Steps[0].Reason)
				}
			}
		})
	}
}
