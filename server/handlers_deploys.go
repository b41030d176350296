package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/scheduler"
)

// The scheduler's deploys, as the deploy routes use them.
type (
	deploysService interface {
		Create(ctx context.Context, appID string, revision uint64, trigger string) (scheduler.Deployment, error)
		List(appID, cursor string, limit int) ([]scheduler.Deployment, bool, error)
		Get(appID, depID string) (scheduler.Deployment, error)
		Rollback(ctx context.Context, appID string) (scheduler.Deployment, error)
	}
	approvalsService interface {
		Approve(ctx context.Context, appID, depID string) (scheduler.Deployment, error)
		Reject(ctx context.Context, appID, depID, reason string) (scheduler.Deployment, error)
	}
	deployLogsService interface {
		FollowLogs(ctx context.Context, appID, depID string, emit func(scheduler.LogLine) error) (scheduler.Deployment, error)
	}
)

var (
	_ deploysService    = (*scheduler.Service)(nil)
	_ approvalsService  = (*scheduler.Service)(nil)
	_ deployLogsService = (*scheduler.Service)(nil)
)

// deploymentDTO is a deployment as the API shows it: API.md's fields, who
// asked and when it started, its approvals, and what it shipped: the
// source, and per workload the build key, the artifact's ID and whether
// the deploy built it or started a kept one. Never an artifact's
// directory (a path on the host).
type deploymentDTO struct {
	ID                string        `json:"id"`
	AppID             string        `json:"app_id"`
	SpecID            string        `json:"spec_id"`
	Revision          uint64        `json:"revision"`
	State             string        `json:"state"`
	Trigger           string        `json:"trigger"`
	ErrorCode         *string       `json:"error_code"`
	ErrorMessage      *string       `json:"error_message"`
	CreatedBy         string        `json:"created_by"`
	CreatedAt         time.Time     `json:"created_at"`
	StartedAt         *time.Time    `json:"started_at"`
	FinishedAt        *time.Time    `json:"finished_at"`
	ApprovalsRequired int           `json:"approvals_required"`
	ApprovalReasons   []string      `json:"approval_reasons"`
	Approvals         []approvalDTO `json:"approvals"`
	RejectedReason    *string       `json:"rejected_reason"`
	// Source is the source the deploy ships (null: none was recorded).
	Source *deploySourceDTO `json:"source"`
	// Redeploys names the deployment whose release this one ships again
	// (a rollback's target, a secret rotation's release).
	Redeploys *string `json:"redeploys"`
	// Builds is each workload's build, once the deploy has them.
	Builds map[string]workloadBuildDTO `json:"builds"`
}

// deploySourceDTO is the source a deploy ships: a repository's commit or
// an uploaded archive's digest (commit: sha256:<hex>), and the checkout
// that holds it; the repository's address without credentials.
type deploySourceDTO struct {
	Kind       string `json:"kind"`
	Commit     string `json:"commit"`
	CheckoutID string `json:"checkout_id,omitempty"`
	Repository string `json:"repository,omitempty"`
	Ref        string `json:"ref,omitempty"`
	Subdir     string `json:"subdir,omitempty"`
}

// workloadBuildDTO is how a deploy got a workload's artifact: reused is
// true when it started the kept artifact of an earlier deploy's build
// (built_by) instead of building.
type workloadBuildDTO struct {
	BuildKey   string `json:"build_key"`
	ArtifactID string `json:"artifact_id"`
	Reused     bool   `json:"reused"`
	BuiltBy    string `json:"built_by"`
}

type approvalDTO struct {
	PrincipalID string    `json:"principal_id"`
	At          time.Time `json:"at"`
}

func toDeploymentDTO(d scheduler.Deployment) deploymentDTO {
	out := deploymentDTO{
		ID: d.ID, AppID: d.AppID, SpecID: d.SpecID, Revision: d.Revision, State: d.State, Trigger: d.Trigger,
		ErrorCode: d.ErrorCode, ErrorMessage: d.ErrorMessage, CreatedBy: d.CreatedBy, CreatedAt: d.CreatedAt.UTC(),
		StartedAt: utcPtr(d.StartedAt), FinishedAt: utcPtr(d.FinishedAt), ApprovalsRequired: d.ApprovalsRequired,
		ApprovalReasons: d.ApprovalReasons, Approvals: make([]approvalDTO, len(d.Approvals)), RejectedReason: d.RejectedReason,
	}
	if out.ApprovalReasons == nil {
		out.ApprovalReasons = []string{}
	}
	for i, a := range d.Approvals {
		out.Approvals[i] = approvalDTO{PrincipalID: a.PrincipalID, At: a.At.UTC()}
	}
	if src := d.Source; src != nil {
		out.Source = &deploySourceDTO{Kind: src.Kind, Commit: src.Commit, CheckoutID: src.CheckoutID, Repository: source.Redact(src.Repository), Ref: src.Ref, Subdir: src.Subdir}
	}
	if d.Redeploys != "" {
		out.Redeploys = &d.Redeploys
	}
	out.Builds = make(map[string]workloadBuildDTO, len(d.Builds))
	for name, b := range d.Builds {
		out.Builds[name] = workloadBuildDTO{BuildKey: b.Key, ArtifactID: d.Artifacts[name].ID, Reused: b.BuiltBy != d.ID, BuiltBy: b.BuiltBy}
	}
	return out
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

type deploymentAnswer struct {
	Deployment deploymentDTO `json:"deployment"`
}

// deployRequest asks for a deploy of a revision; absent or 0 is the pinned
// revision.
type deployRequest struct {
	Revision *int64 `json:"revision,omitempty" doc:"the spec revision to deploy (default: the pinned one)"`
}

type rejectRequest struct {
	Reason *string `json:"reason" doc:"why, for the deployment's record"`
}

// deployed answers a deploy the scheduler accepted: 202, with where to
// follow it.
func deployed(c echo.Context, d scheduler.Deployment, err error) error {
	if err != nil {
		return err
	}
	c.Response().Header().Set("Location", fmt.Sprintf("%s/apps/%s/deployments/%s", api, d.AppID, d.ID))
	return c.JSON(http.StatusAccepted, deploymentAnswer{Deployment: toDeploymentDTO(d)})
}

func (s *Server) postDeployment(c echo.Context) error {
	var req deployRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	var n uint64
	if req.Revision != nil {
		if *req.Revision < 0 {
			return errcode.Invalid("revision", "revision is a revision number, 1 or more (0 or absent: the pinned revision)")
		}
		n = uint64(*req.Revision)
	}
	d, err := s.d.Deploys.Create(c.Request().Context(), c.Param("appID"), n, scheduler.TriggerAPI)
	return deployed(c, d, err)
}

func (s *Server) postRollback(c echo.Context) error {
	d, err := s.d.Deploys.Rollback(c.Request().Context(), c.Param("appID"))
	return deployed(c, d, err)
}

func (s *Server) listDeployments(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	ds, more, err := s.d.Deploys.List(c.Param("appID"), p.after, p.limit)
	if err != nil {
		return err
	}
	items := make([]deploymentDTO, len(ds))
	for i, d := range ds {
		items[i] = toDeploymentDTO(d)
	}
	return c.JSON(http.StatusOK, newList(items, more, lastID(items, func(d deploymentDTO) string { return d.ID })))
}

func (s *Server) getDeployment(c echo.Context) error {
	d, err := s.d.Deploys.Get(c.Param("appID"), c.Param("depID"))
	return jsonOr(c, http.StatusOK, deploymentAnswer{Deployment: toDeploymentDTO(d)}, err)
}

func (s *Server) postApprove(c echo.Context) error {
	d, err := s.d.Approvals.Approve(c.Request().Context(), c.Param("appID"), c.Param("depID"))
	return jsonOr(c, http.StatusOK, deploymentAnswer{Deployment: toDeploymentDTO(d)}, err)
}

func (s *Server) postReject(c echo.Context) error {
	var req rejectRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.Reason == nil || strings.TrimSpace(*req.Reason) == "" {
		return errcode.Invalid("reason", "reason is required: say why the deploy is rejected")
	}
	d, err := s.d.Approvals.Reject(c.Request().Context(), c.Param("appID"), c.Param("depID"), *req.Reason)
	return jsonOr(c, http.StatusOK, deploymentAnswer{Deployment: toDeploymentDTO(d)}, err)
}

// The deploy log stream's events: "log" for each line, then one "end".
type (
	deployLogEvent struct {
		Time   time.Time `json:"time"`
		Stream string    `json:"stream"`
		Line   string    `json:"line"`
	}
	deployEndEvent struct {
		State     string  `json:"state"`
		ErrorCode *string `json:"error_code"`
	}
)

// sseKeepAlive is how often a quiet stream sends a comment, so that
// proxies in between keep it open.
const sseKeepAlive = 15 * time.Second

// getDeploymentLogs streams a deployment's output as server-sent events:
// "event: log" with a deployLogEvent per line, flushed as each is written
// while the deploy runs, then "event: end" with a deployEndEvent. A
// finished deployment replays its whole kept log, then the end.
func (s *Server) getDeploymentLogs(c echo.Context) error {
	appID, depID := c.Param("appID"), c.Param("depID")
	if _, err := s.d.Deploys.Get(appID, depID); err != nil {
		return err // before the stream opens: an error envelope
	}
	ctx := c.Request().Context()
	st := openSSE(c)
	defer st.close()
	d, err := s.d.DeployLogs.FollowLogs(ctx, appID, depID, func(l scheduler.LogLine) error {
		return st.send("log", deployLogEvent{Time: l.Time.UTC(), Stream: l.Stream, Line: l.Line})
	})
	if err != nil {
		if ctx.Err() == nil {
			s.reqLog(c).Warn("deploy log stream ended early", "deployment", depID, "err", err)
		}
		return nil // the stream is open: nothing else can be said
	}
	_ = st.send("end", deployEndEvent{State: d.State, ErrorCode: d.ErrorCode})
	return nil
}

// sseStream writes server-sent events, each flushed at once, and a
// keep-alive comment when it has been quiet.
type sseStream struct {
	c    echo.Context
	mu   sync.Mutex
	stop chan struct{}
	done chan struct{}
}

func openSSE(c echo.Context) *sseStream {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	c.Response().WriteHeader(http.StatusOK)
	c.Response().Flush()
	st := &sseStream{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go st.keepAlive()
	return st
}

func (st *sseStream) keepAlive() {
	defer close(st.done)
	t := time.NewTicker(sseKeepAlive)
	defer t.Stop()
	for {
		select {
		case <-st.stop:
			return
		case <-t.C:
			st.mu.Lock()
			_, err := st.c.Response().Write([]byte(": keep-alive\n\n"))
			if err == nil {
				st.c.Response().Flush()
			}
			st.mu.Unlock()
		}
	}
}

func (st *sseStream) send(event string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, err := fmt.Fprintf(st.c.Response(), "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	st.c.Response().Flush()
	return nil
}

func (st *sseStream) close() {
	close(st.stop)
	<-st.done
}
