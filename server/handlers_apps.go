package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/source"
)

type appsService interface {
	Create(ctx context.Context, c authz.Caller, n apps.New) (apps.App, error)
	Get(id string) (apps.App, error)
	List(c authz.Caller, facts authz.Facts, floor authz.Floor, after string, limit int) ([]apps.App, bool)
	Update(ctx context.Context, id string, p apps.Patch) (apps.App, error)
}

// appAddresser says where the edge serves an app in the current routing
// mode, for a client that asked at r; "" when nowhere (no port held in
// port mode).
type appAddresser interface {
	AppURL(r *http.Request, appID, slug string) string
}

// withURL fills the App's url field: where the edge serves it, or null.
// Every handler that answers an App passes it through here.
func (s *Server) withURL(c echo.Context, a apps.App) apps.App {
	a.URL = s.appURL(c, a.ID, a.Slug)
	return a
}

// appURL is the url field of an app (an App, a launcher entry): where the
// edge serves it for this request, or nil.
func (s *Server) appURL(c echo.Context, appID, slug string) *string {
	if s.d.AppURLs == nil || appID == "" {
		return nil
	}
	if u := s.d.AppURLs.AppURL(c.Request(), appID, slug); u != "" {
		return &u
	}
	return nil
}

type createAppRequest struct {
	Name   string             `json:"name" doc:"the app's name"`
	Slug   string             `json:"slug,omitempty" doc:"its slug: lowercase letters, digits and dashes (default: made from the name)"`
	Source *repositoryRequest `json:"source,omitempty" doc:"a git repository to clone and detect"`
}

// repositoryRequest is a git repository to create an app from.
type repositoryRequest struct {
	Repository string `json:"repository" doc:"the repository's URL"`
	Ref        string `json:"ref,omitempty" doc:"a branch, tag or commit (default: the default branch)"`
	Subdir     string `json:"subdir,omitempty" doc:"the app's directory in the repository"`
}

type appAnswer struct {
	App apps.App `json:"app"`
	// Verbs are the caller's verbs on the app, host policy applied: what a
	// client may offer them. Only GET /apps/{appID} says them.
	Verbs []authz.Verb `json:"verbs,omitempty"`
}

func (s *Server) postApp(c echo.Context) error {
	var req createAppRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	var src *apps.Source
	if req.Source != nil {
		src = &apps.Source{Kind: source.KindRepository, Repository: req.Source.Repository, Ref: req.Source.Ref, Subdir: req.Source.Subdir}
		if err := s.d.Sources.Check(*src); err != nil {
			return err
		}
	}
	ctx := c.Request().Context()
	a, err := s.d.Apps.Create(ctx, callerOf(c), apps.New{Name: req.Name, Slug: req.Slug})
	if err == nil && src != nil {
		err = s.d.Sources.Fetch(ctx, a.ID, *src) // the clone and detection run behind the answer
	}
	return jsonOr(c, http.StatusCreated, appAnswer{App: s.withURL(c, a)}, err)
}

func (s *Server) listApps(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	a := authOf(c)
	as, more := s.d.Apps.List(a.caller, a.facts, a.floor, p.after, p.limit)
	for i := range as {
		as[i] = s.withURL(c, as[i])
	}
	return c.JSON(http.StatusOK, newList(as, more, lastID(as, func(a apps.App) string { return a.ID })))
}

func (s *Server) getApp(c echo.Context) error {
	a, err := s.d.Apps.Get(c.Param("appID"))
	if err != nil {
		return err
	}
	held := authz.AppVerbs(authOf(c).facts, authOf(c).Principal, a.ID, authOf(c).floor)
	return c.JSON(http.StatusOK, appAnswer{App: s.withURL(c, a), Verbs: held.Verbs()})
}

func (s *Server) deleteApp(c echo.Context) error {
	backup, err := queryBool(c, "backup")
	if err != nil {
		return err
	}
	force, err := queryBool(c, "force")
	if err != nil {
		return err
	}
	d := apps.Decision{Backup: backup, Force: force, RequireBackup: s.d.Policy.Current().RequireBackupBeforeDestroy}
	if err := s.d.Deleter.DeleteApp(c.Request().Context(), c.Param("appID"), d, ""); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
