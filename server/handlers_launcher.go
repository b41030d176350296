package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/launcher"
	"github.com/svchost/svc/internal/source"
)

type launcherService interface {
	Apps(c authz.Caller) launcher.View
	Favor(ctx context.Context, c authz.Caller, appID string) error
	Unfavor(ctx context.Context, c authz.Caller, appID string) error
	CreateSection(ctx context.Context, c authz.Caller, name string) (launcher.Section, error)
	UpdateSection(ctx context.Context, c authz.Caller, id string, name *string, position *int) (launcher.Section, error)
	DeleteSection(ctx context.Context, c authz.Caller, id string) error
	File(ctx context.Context, c authz.Caller, sectionID, appID string) error
	Unfile(ctx context.Context, c authz.Caller, sectionID, appID string) error
}

func (s *Server) getMyApps(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	v := s.d.Launcher.Apps(callerOf(c))
	page := listOf(v.Items, p, launcher.Entry.ListKey, ascending)
	v.Items, v.NextCursor = page.Items, page.NextCursor
	for i := range v.Items {
		v.Items[i].App.URL = s.appURL(c, v.Items[i].App.ID, v.Items[i].App.Slug)
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) putFavorite(c echo.Context) error {
	return noContent(c, s.d.Launcher.Favor(c.Request().Context(), callerOf(c), c.Param("appID")))
}

func (s *Server) deleteFavorite(c echo.Context) error {
	return noContent(c, s.d.Launcher.Unfavor(c.Request().Context(), callerOf(c), c.Param("appID")))
}

type sectionRequest struct {
	Name     *string `json:"name" doc:"the section's name"`
	Position *int    `json:"position,omitempty" doc:"its place among your sections, from 0"`
}

type sectionAnswer struct {
	Section launcher.Section `json:"section"`
}

func (s *Server) postSection(c echo.Context) error {
	var req sectionRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	name := ""
	if req.Name != nil {
		name = *req.Name
	}
	sec, err := s.d.Launcher.CreateSection(c.Request().Context(), callerOf(c), name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, sectionAnswer{Section: sec})
}

func (s *Server) patchSection(c echo.Context) error {
	var req sectionRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	sec, err := s.d.Launcher.UpdateSection(c.Request().Context(), callerOf(c), c.Param("sectionID"), req.Name, req.Position)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sectionAnswer{Section: sec})
}

func (s *Server) deleteSection(c echo.Context) error {
	return noContent(c, s.d.Launcher.DeleteSection(c.Request().Context(), callerOf(c), c.Param("sectionID")))
}

func (s *Server) putFiling(c echo.Context) error {
	return noContent(c, s.d.Launcher.File(c.Request().Context(), callerOf(c), c.Param("sectionID"), c.Param("appID")))
}

func (s *Server) deleteFiling(c echo.Context) error {
	return noContent(c, s.d.Launcher.Unfile(c.Request().Context(), callerOf(c), c.Param("sectionID"), c.Param("appID")))
}

// noContent answers 204 when err is nil.
func noContent(c echo.Context, err error) error {
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

type patchAppRequest struct {
	Name   *string            `json:"name,omitempty" doc:"the app's new name"`
	Slug   *string            `json:"slug,omitempty" doc:"its new slug (its address changes)"`
	Source *repositoryRequest `json:"source,omitempty" doc:"a git repository to take the source from"`
}

func (s *Server) patchApp(c echo.Context) error {
	var req patchAppRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var src *apps.Source
	if req.Source != nil {
		// A new repository is checked now and fetched behind the answer;
		// the app's source changes (audited as source.fetch) when the
		// clone succeeds, and detection runs on it.
		src = &apps.Source{Kind: source.KindRepository, Repository: req.Source.Repository, Ref: req.Source.Ref, Subdir: req.Source.Subdir}
		if err := s.d.Sources.Check(*src); err != nil {
			return err
		}
	}
	a, err := s.d.Apps.Update(ctx, c.Param("appID"), apps.Patch{Name: req.Name, Slug: req.Slug})
	if err == nil && src != nil {
		err = s.d.Sources.Fetch(ctx, a.ID, *src)
	}
	return jsonOr(c, http.StatusOK, appAnswer{App: s.withURL(c, a)}, err)
}
