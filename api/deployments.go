package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Deployment is one deploy of an app: the revision and source it ships,
// each workload's build, and how it ended.
type Deployment struct {
	ID           string  `json:"id"`
	AppID        string  `json:"app_id"`
	SpecID       string  `json:"spec_id"`
	Revision     uint64  `json:"revision"`
	State        string  `json:"state"`
	Trigger      string  `json:"trigger"`
	ErrorCode    *string `json:"error_code"`
	ErrorMessage *string `json:"error_message"`
	// Source is the source the deploy ships; nil when the app had none
	// recorded.
	Source *DeploymentSource `json:"source"`
	// Redeploys names the deployment whose release this one ships again
	// (a rollback's target, a secret rotation's release).
	Redeploys *string `json:"redeploys"`
	// Builds is each workload's build, once the deploy has them.
	Builds            map[string]WorkloadBuild `json:"builds"`
	CreatedBy         string                   `json:"created_by"`
	CreatedAt         time.Time                `json:"created_at"`
	StartedAt         *time.Time               `json:"started_at"`
	FinishedAt        *time.Time               `json:"finished_at"`
	ApprovalsRequired int                      `json:"approvals_required"`
	ApprovalReasons   []string                 `json:"approval_reasons"`
	RejectedReason    *string                  `json:"rejected_reason"`
}

// DeploymentSource is the source a deploy ships: a repository's commit, or
// an uploaded archive's digest (sha256:<hex>), and the checkout holding it.
type DeploymentSource struct {
	Kind       string `json:"kind"`
	Commit     string `json:"commit"`
	CheckoutID string `json:"checkout_id,omitempty"`
	Repository string `json:"repository,omitempty"`
	Ref        string `json:"ref,omitempty"`
	Subdir     string `json:"subdir,omitempty"`
}

// WorkloadBuild is how a deploy got a workload's artifact. Reused is true
// when it started the kept artifact of an earlier deploy's build (BuiltBy)
// instead of building; builds with one BuildKey make the same artifact.
type WorkloadBuild struct {
	BuildKey   string `json:"build_key"`
	ArtifactID string `json:"artifact_id"`
	Reused     bool   `json:"reused"`
	BuiltBy    string `json:"built_by"`
}

func deploymentsPath(appID string) string {
	return "/api/v1/apps/" + url.PathEscape(appID) + "/deployments"
}

// DeploymentAnswer is the API's answer naming one deployment.
type DeploymentAnswer struct {
	Deployment Deployment `json:"deployment"`
}

// Deploy asks for a deploy of a revision (0: the pinned one) with the
// app's current source; the build and start run behind the answer.
func (c *Client) Deploy(ctx context.Context, appID string, revision uint64) (Deployment, json.RawMessage, error) {
	body := map[string]uint64{}
	if revision > 0 {
		body["revision"] = revision
	}
	v, raw, err := answer[DeploymentAnswer](ctx, c, request{method: http.MethodPost, path: deploymentsPath(appID), body: body})
	return v.Deployment, raw, err
}

// Rollback ships again the app's last release before the one it runs:
// its revision, source and kept builds.
func (c *Client) Rollback(ctx context.Context, appID string) (Deployment, error) {
	var v struct {
		Deployment Deployment `json:"deployment"`
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: deploymentsPath(appID) + "/rollback"}, &v)
	return v.Deployment, err
}

// Deployment returns one of an app's deployments.
func (c *Client) Deployment(ctx context.Context, appID, depID string) (Deployment, error) {
	var v struct {
		Deployment Deployment `json:"deployment"`
	}
	err := c.get(ctx, deploymentsPath(appID)+"/"+url.PathEscape(depID), nil, &v)
	return v.Deployment, err
}
