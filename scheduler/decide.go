package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
)

// The reconciler's decisions, apart from I/O (after Nomad's
// AllocReconciler.Compute and RestartTracker): decide says what to do for
// one app from its desired state, its release and what the runtime
// reports, and track.fail whether to retry a failure or give up. The shell
// (reconciler.go) reads, calls the runtime, writes and logs; it decides
// nothing itself.

// Actions the reconciler takes: the "action" of its log lines and of
// svc_reconcile_actions_total.
const (
	// actionStart runs the release's job, which the runtime does not
	// have (it was lost with a crash of svc, or removed behind svc's
	// back), or runs it again after a failure.
	actionStart = "start"
	// actionStop stops the job of an app meant to be stopped, of a
	// failed app, or of a deleted one.
	actionStop = "stop"
	// actionRestart restarts the job in place, as someone asked.
	actionRestart = "restart"
	// actionRecover stops a job with a workload the runtime gave up
	// restarting; the failure is counted and the job run again on the
	// backoff schedule.
	actionRecover = "recover"
	// actionRedeploy deploys the release's revision again: a bound
	// secret changed since its job's environment was made.
	actionRedeploy = "redeploy"
	// actionState moves the app's state to what was observed.
	actionState = "state"
	// actionGiveUp fails an app that failed more often than the backoff
	// schedule allows (app.gave_up).
	actionGiveUp = "give_up"
)

// observation is what the reconciler knows of one app at a pass.
type observation struct {
	desired string // the app's desired state
	state   string // the app's state
	// known says the runtime has the release's job; status is what it
	// reports of it then.
	known  bool
	status JobStatus
	// workloads are the release's workloads (those it built).
	workloads []string
	// restartAsked: a restart in place was asked for and not done yet.
	restartAsked bool
	// secretsRotated: a bound secret changed since the job's environment
	// was made.
	secretsRotated bool
	// deploying: a deploy is under way; no redeploy starts meanwhile.
	deploying bool
}

// decision is what to do for an app: at most one action (why says why),
// then the state to report ("" for none; stateWhy says why).
type decision struct {
	action   string
	why      string
	state    string
	stateWhy string
}

// decide says what to do for an app, and the app's track after it. now is
// the time of the pass; stableAfter how long an app must run healthy for
// its failures to be forgotten.
//
//   - an app meant to be stopped: its job stops, it is stopped (a failed
//     app stays failed), its failures are forgotten;
//   - a failed app: its job stops if it runs; it stays failed until
//     somebody deploys it;
//   - a job the runtime does not have: the app is restarting, and its job
//     runs again once the backoff's wait has passed;
//   - a workload the runtime gave up on (dead): recover (stop, count the
//     failure, retry on the backoff);
//   - else the app is running when every workload runs and no health
//     check fails, degraded otherwise (naming what is down); a restart
//     asked for is done, and a rotated secret deploys again when nothing
//     else deploys.
func decide(o observation, t track, now time.Time, stableAfter time.Duration) (decision, track) {
	switch {
	case o.desired == apps.DesiredStopped:
		d := decision{state: apps.StateStopped, stateWhy: "the app is meant to be stopped"}
		if o.state == apps.StateFailed {
			d.state, d.stateWhy = "", ""
		}
		if o.known {
			d.action, d.why = actionStop, "the app is meant to be stopped"
		}
		return d, track{}
	case o.state == apps.StateFailed:
		if o.known {
			return decision{action: actionStop, why: "the app failed: it stays stopped until somebody deploys it"}, t
		}
		return decision{}, t
	case !o.known:
		if now.Before(t.nextTry) {
			return decision{state: StateRestarting, stateWhy: fmt.Sprintf("its job runs again at %s, after: %s",
				t.nextTry.UTC().Format(time.RFC3339), t.lastReason)}, t
		}
		why := "the runtime does not have the app's job (svc was restarted, or the job was removed behind svc's back)"
		if t.failures > 0 {
			why = fmt.Sprintf("retry %d after: %s", t.failures, t.lastReason)
		}
		return decision{action: actionStart, why: why, state: StateRestarting, stateWhy: why}, t
	}
	if why := deadWorkload(o.status); why != "" {
		return decision{action: actionRecover, why: why}, t
	}
	d := decision{}
	if o.restartAsked {
		d.action, d.why = actionRestart, "a restart was asked for"
	}
	if down := downWorkloads(o.status, o.workloads); len(down) > 0 {
		t.healthySince = time.Time{}
		d.state, d.stateWhy = apps.StateDegraded, strings.Join(down, "; ")
		return d, t
	}
	if t.healthySince.IsZero() {
		t.healthySince = now
	}
	if t.failures > 0 && now.Sub(t.healthySince) >= stableAfter {
		t = track{healthySince: t.healthySince}
	}
	d.state, d.stateWhy = apps.StateRunning, "every workload runs and passes its health check"
	if d.action == "" && o.secretsRotated && !o.deploying {
		d.action, d.why = actionRedeploy, "a bound secret changed since the job's environment was made"
	}
	return d, t
}

// observed is the state of an app whose job just ran (or was observed):
// running when every workload runs and no health check fails, else
// degraded, with what is down.
func observed(st JobStatus, workloads []string) (state, why string) {
	if down := downWorkloads(st, workloads); len(down) > 0 {
		return apps.StateDegraded, strings.Join(down, "; ")
	}
	return apps.StateRunning, "every workload runs and passes its health check"
}

// shown is the state GET …/status reports: the stored one, except that
// an app stored as running whose job is down is shown as the reconciler
// will find it (degraded; restarting when the runtime does not have its
// job), so that status never says running with nothing serving between
// two of the reconciler's passes.
func shown(stored string, known bool, st JobStatus, workloads []string) string {
	if stored != apps.StateRunning {
		return stored
	}
	if !known {
		return StateRestarting
	}
	state, _ := observed(st, workloads)
	return state
}

// deadWorkload names the first workload (by name) the runtime gave up
// restarting, and how it ended; "" when none.
func deadWorkload(st JobStatus) string {
	for _, name := range slices.Sorted(maps.Keys(st.Workloads)) {
		ws := st.Workloads[name]
		if !ws.Dead {
			continue
		}
		code := "unknown"
		if ws.ExitCode != nil {
			code = fmt.Sprint(*ws.ExitCode)
		}
		return fmt.Sprintf("workload %s kept exiting (last exit code %s, %d restarts)", name, code, ws.Restarts)
	}
	return ""
}

// downWorkloads says what of a job is not serving: a workload of the
// release the job lacks, one not running, one whose health check fails;
// a job with no workload at all. Empty when everything serves (a health
// not known yet counts as serving: it is no failure).
func downWorkloads(st JobStatus, workloads []string) []string {
	names := map[string]bool{}
	for _, name := range workloads {
		names[name] = true
	}
	for name := range st.Workloads {
		names[name] = true
	}
	if len(names) == 0 {
		return []string{"the job runs no workload"}
	}
	var down []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		ws, ok := st.Workloads[name]
		switch {
		case !ok:
			down = append(down, "workload "+name+" is not in the job")
		case !ws.Running:
			down = append(down, "workload "+name+" is not running")
		case ws.Health == HealthFailing:
			down = append(down, "workload "+name+" fails its health check")
		}
	}
	return down
}

// fail counts a failure of the app at now: the track after it, the wait
// before the next try, and whether to give up instead (the failure after
// the last wait of the backoff schedule).
func (t track) fail(now time.Time, reason string, backoff []time.Duration) (track, time.Duration, bool) {
	if t.failures == 0 {
		t.firstFailure = now
	}
	t.failures++
	t.lastReason = reason
	t.healthySince = time.Time{}
	if t.failures > len(backoff) {
		return t, 0, true
	}
	wait := backoff[t.failures-1]
	t.nextTry = now.Add(wait)
	return t, wait, false
}

// problemOf is what keeps an app from serving (nil when nothing does):
// its newest deployment when that failed and is not the release it runs
// (rel nil: it runs none), else the first workload (by name) whose
// problem the runtime reports, else one it gave up restarting.
func problemOf(appID string, last *Deployment, rel *Release, st JobStatus) *Problem {
	if last != nil && last.State == DepFailed && (rel == nil || rel.DeploymentID != last.ID) && last.ErrorCode != nil {
		p := &Problem{Code: *last.ErrorCode, DeploymentID: last.ID}
		if last.ErrorMessage != nil {
			p.Message = *last.ErrorMessage
		}
		if last.ErrorRemedy != nil {
			p.Remedy = *last.ErrorRemedy
		}
		return p
	}
	for _, name := range slices.Sorted(maps.Keys(st.Workloads)) {
		if p := st.Workloads[name].Problem; p != nil {
			out := *p
			out.Workload = name
			return &out
		}
	}
	if dead := deadWorkload(st); dead != "" {
		return &Problem{Code: string(errcode.StateAppExited), Message: dead,
			Remedy: fmt.Sprintf("read its logs (GET /api/v1/apps/%s/logs), fix the app, and deploy it again", appID)}
	}
	return nil
}
