package scheduler

import (
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Deployment states. queued, waiting_approval, building and starting are
// active; the rest are final.
const (
	DepQueued          = "queued"
	DepWaitingApproval = "waiting_approval"
	DepBuilding        = "building"
	DepStarting        = "starting"
	DepSucceeded       = "succeeded"
	DepFailed          = "failed"
	DepRejected        = "rejected"
	DepSuperseded      = "superseded"
)

// Deploy triggers.
const (
	TriggerAPI            = "api"
	TriggerRollback       = "rollback"
	TriggerAccept         = "accept"
	TriggerSecretRotation = "secret_rotation"
)

// Deployment is one deploy of an app's spec revision.
type Deployment struct {
	ID       string `json:"id"`
	AppID    string `json:"app_id"`
	SpecID   string `json:"spec_id"`
	Revision uint64 `json:"revision"`
	State    string `json:"state"`
	Trigger  string `json:"trigger"`
	// Runtime is the runtime adapter the deploy uses (chosen by the plan).
	Runtime      string  `json:"runtime"`
	ErrorCode    *string `json:"error_code"`
	ErrorMessage *string `json:"error_message"`
	// ErrorRemedy is what to do about the failure, when the error said.
	ErrorRemedy *string    `json:"error_remedy,omitempty"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	// Approval holds: how many approvals the deploy needs, why, who gave
	// them, and why it was rejected.
	ApprovalsRequired int        `json:"approvals_required"`
	ApprovalReasons   []string   `json:"approval_reasons"`
	Approvals         []Approval `json:"approvals"`
	RejectedReason    *string    `json:"rejected_reason"`
	// Source is the source the deploy ships (releases.go): the app's
	// recorded source when the deploy was asked for, or, for a rollback
	// and a secret rotation, that of the release it ships again; nil when
	// the app had none recorded then. A build runs from this checkout,
	// never from whatever is current when it runs.
	Source *apps.Source `json:"source,omitempty"`
	// Redeploys names the deployment whose release this one ships again:
	// a rollback's target, or the release a secret rotation runs anew.
	Redeploys string `json:"redeploys,omitempty"`
	// RequestID is the request that asked for the deploy (empty for one
	// the service started itself), for the operator's log lines.
	RequestID string `json:"request_id,omitempty"`
	// Artifacts are the built workloads, once built: the release the
	// reconciler restarts from.
	Artifacts map[string]Artifact `json:"artifacts,omitempty"`
	// Builds say, per workload, the build key and whether this deploy
	// built the artifact or started a kept one (set with Artifacts).
	Builds map[string]WorkloadBuild `json:"builds,omitempty"`
	// PriorState is the app's state when the deploy began, which a failed
	// deploy returns it to.
	PriorState string `json:"prior_state,omitempty"`
}

// Approval is one person's approval of a held deploy.
type Approval struct {
	PrincipalID string    `json:"principal_id"`
	At          time.Time `json:"at"`
}

// Active says whether the deployment has not ended.
func (d *Deployment) Active() bool {
	switch d.State {
	case DepQueued, DepWaitingApproval, DepBuilding, DepStarting:
		return true
	}
	return false
}

// Running says whether the deployment is past its approvals and not ended:
// it holds the app's deploy slot.
func (d *Deployment) Running() bool {
	switch d.State {
	case DepQueued, DepBuilding, DepStarting:
		return true
	}
	return false
}

// Deployments is the table of deployments, by app newest first through the
// "app" index (app ID, then deployment ID).
var Deployments = &raftstore.Table[Deployment]{
	Name: "deployments",
	ID:   func(d *Deployment) string { return d.ID },
	Indexes: []raftstore.Index[Deployment]{
		{Name: "app", Key: func(d *Deployment) (string, bool) { return raftstore.Key(d.AppID, d.ID), true }},
		{Name: "active", Key: func(d *Deployment) (string, bool) { return d.ID, d.Active() }},
	},
	Validate: func(_ *raftstore.Reader, old, d *Deployment) error {
		if d == nil {
			return nil
		}
		if d.AppID == "" || d.SpecID == "" || d.Revision == 0 {
			return errcode.New(errcode.ValidInvalid, "a deployment needs an app and a revision")
		}
		if old != nil && !old.Active() && d.State != old.State {
			return errcode.New(errcode.StateInvalid, "deployment %s has ended (%s)", d.ID, old.State)
		}
		return nil
	},
}

// Release is what an app runs: the last deployment that succeeded, with the
// job the runtime runs for it. The reconciler converges on it.
type Release struct {
	AppID        string `json:"app_id"`
	DeploymentID string `json:"deployment_id"`
	SpecID       string `json:"spec_id"`
	Revision     uint64 `json:"revision"`
	Runtime      string `json:"runtime"`
	// JobID names the runtime's job. The job is made again from the spec
	// revision and Artifacts whenever it must run again; its environment
	// (slots, secrets) is resolved then and never stored.
	JobID     string              `json:"job_id"`
	Artifacts map[string]Artifact `json:"artifacts"`
	// Source and Builds are the deployment's: what the release was made
	// from.
	Source *apps.Source             `json:"source,omitempty"`
	Builds map[string]WorkloadBuild `json:"builds,omitempty"`
	// Primary names the revision's primary workload, the one the edge
	// routes to (so routing need not read the spec document).
	Primary string `json:"primary,omitempty"`
	// SecretVersions are the bound secrets' versions the job's environment
	// was made from.
	SecretVersions map[string]int64 `json:"secret_versions"`
	// RestartGen counts the restarts asked for; the reconciler restarts the
	// job when it has seen fewer (RestartedGen).
	RestartGen   uint64    `json:"restart_gen"`
	RestartedGen uint64    `json:"restarted_gen"`
	At           time.Time `json:"at"`
}

// Releases is the table of releases, one per app (ID: the app's ID).
var Releases = &raftstore.Table[Release]{
	Name: "releases",
	ID:   func(r *Release) string { return r.AppID },
}

// LogLine is one line of a deploy's output.
type LogLine struct {
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"` // build, run or system
	Line   string    `json:"line"`
}

// Streams of a deploy log.
const (
	LogBuild  = "build"
	LogRun    = "run"
	LogSystem = "system"
)

// DeployLog is a finished deploy's kept output (ID: the deployment's ID).
type DeployLog struct {
	DeploymentID string    `json:"deployment_id"`
	AppID        string    `json:"app_id"`
	Lines        []LogLine `json:"lines"`
	// Dropped counts the lines left out to keep the log under its cap.
	Dropped int `json:"dropped"`
}

// DeployLogs is the table of finished deploys' output, written once when a
// deploy ends and dropped with its deployment (prune). It is a history
// table: the logs live in each node's history store on disk, not in memory.
var DeployLogs = &raftstore.Table[DeployLog]{
	Name:    "deploy_logs",
	ID:      func(l *DeployLog) string { return l.DeploymentID },
	History: true,
	Indexes: []raftstore.Index[DeployLog]{
		{Name: "app", Key: func(l *DeployLog) (string, bool) { return l.AppID, true }},
	},
}

// Port is a host port held by an app (ID: the app's ID), from the
// configured range, for port-mode routing.
type Port struct {
	AppID string `json:"app_id"`
	Port  int    `json:"port"`
}

// Ports is the table of allocated host ports; a port is held by one app.
var Ports = &raftstore.Table[Port]{
	Name: "app_ports",
	ID:   func(p *Port) string { return p.AppID },
	Indexes: []raftstore.Index[Port]{
		{Name: "port", Unique: true, Key: func(p *Port) (string, bool) { return raftstore.Uint(uint64(p.Port)), true }},
	},
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def {
	return []raftstore.Def{Deployments, Releases, DeployLogs, Ports}
}
