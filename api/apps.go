package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// App is an app: its name and slug, source, state and pinned revision.
type App struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Slug         string `json:"slug"`
	State        string `json:"state"`
	DesiredState string `json:"desired_state"`
	// StoppedBecause says why svc itself stopped the app (idle, insecure,
	// disk_limit); nil when it is meant to run or a person stopped it.
	StoppedBecause *string    `json:"stopped_because"`
	Source         *AppSource `json:"source"`
	Pinned         *AppPin    `json:"pinned"`
	URL            *string    `json:"url"`
	IconUpdatedAt  *time.Time `json:"icon_updated_at"`
	CreatedBy      string     `json:"created_by"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// AppSource is where an app's code comes from: a repository (with ref and
// subdir) or an uploaded archive, and the commit or digest recorded.
type AppSource struct {
	Kind       string `json:"kind"`
	Repository string `json:"repository,omitempty"`
	Ref        string `json:"ref,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Subdir     string `json:"subdir,omitempty"`
	CheckoutID string `json:"checkout_id,omitempty"`
}

// AppPin is the pinned spec revision.
type AppPin struct {
	SpecID   string `json:"spec_id"`
	Revision int    `json:"revision"`
}

// NewApp is an app to create: a name, an optional slug (made from the
// name when empty) and an optional repository to clone.
type NewApp struct {
	Name   string         `json:"name"`
	Slug   string         `json:"slug,omitempty"`
	Source *NewRepository `json:"source,omitempty"`
}

// NewRepository is a git repository to create an app from.
type NewRepository struct {
	Repository string `json:"repository"`
	Ref        string `json:"ref,omitempty"`
	Subdir     string `json:"subdir,omitempty"`
}

// AppAnswer is the API's answer naming one app.
type AppAnswer struct {
	App App `json:"app"`
}

func appPath(appID string) string { return "/api/v1/apps/" + url.PathEscape(appID) }

// Apps returns one page of the apps the caller can administer.
func (c *Client) Apps(ctx context.Context, cursor string, limit int) (Page[App], json.RawMessage, error) {
	return answer[Page[App]](ctx, c, request{method: http.MethodGet, path: "/api/v1/apps", query: pageQuery(cursor, limit)})
}

// AppBySlug finds the ID of the app whose slug is slug among the apps the
// caller may list (every page of GET /api/v1/apps); found is false when
// none has it. The API names apps by ID only; slugs never hold an
// underscore, IDs always do.
func (c *Client) AppBySlug(ctx context.Context, slug string) (id string, found bool, err error) {
	for cursor := ""; ; {
		page, _, err := c.Apps(ctx, cursor, 500)
		if err != nil {
			return "", false, err
		}
		for _, a := range page.Items {
			if a.Slug == slug {
				return a.ID, true, nil
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			return "", false, nil
		}
	}
}

// App returns one app by its ID.
func (c *Client) App(ctx context.Context, appID string) (AppAnswer, json.RawMessage, error) {
	return answer[AppAnswer](ctx, c, request{method: http.MethodGet, path: appPath(appID)})
}

// CreateApp creates an app; it starts in draft.
func (c *Client) CreateApp(ctx context.Context, n NewApp) (AppAnswer, json.RawMessage, error) {
	return answer[AppAnswer](ctx, c, request{method: http.MethodPost, path: "/api/v1/apps", body: n})
}

// DeleteApp deletes an app. An app with volumes needs backup (keep a final
// copy) or force (discard it); the refusal says so.
func (c *Client) DeleteApp(ctx context.Context, appID string, backup, force bool) error {
	q := url.Values{}
	if backup {
		q.Set("backup", strconv.FormatBool(backup))
	}
	if force {
		q.Set("force", strconv.FormatBool(force))
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: appPath(appID), query: q}, nil)
	return err
}

// AppStatus is an app's state and desired state, the deployment and
// revision it runs, each workload's report, and what keeps it from
// serving.
type AppStatus struct {
	State        string                    `json:"state"`
	DesiredState string                    `json:"desired_state"`
	DeploymentID *string                   `json:"deployment_id"`
	Revision     *uint64                   `json:"revision"`
	Workloads    map[string]WorkloadStatus `json:"workloads"`
	Problem      *Problem                  `json:"problem"`
}

// WorkloadStatus is one workload as the status shows it.
type WorkloadStatus struct {
	Primary  bool     `json:"primary"`
	Running  bool     `json:"running"`
	Restarts int      `json:"restarts"`
	Health   string   `json:"health"`
	ExitCode *int     `json:"exit_code"`
	Address  string   `json:"address,omitempty"`
	Problem  *Problem `json:"problem,omitempty"`
}

// Problem is what keeps an app or a workload from serving: a code, a
// message and a remedy.
type Problem struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Remedy       string `json:"remedy,omitempty"`
	DeploymentID string `json:"deployment_id,omitempty"`
	Workload     string `json:"workload,omitempty"`
}

// Status returns an app's status.
func (c *Client) Status(ctx context.Context, appID string) (AppStatus, json.RawMessage, error) {
	return answer[AppStatus](ctx, c, request{method: http.MethodGet, path: appPath(appID) + "/status"})
}
