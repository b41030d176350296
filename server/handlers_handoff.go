package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
)

// handoffService is the console's side of the handoff that signs a
// browser in to an app on the app's own origin (the edge's): the handoff
// itself, and where a console page may send the browser next (a path of
// the console's origin, or an address of one of the apps; else
// VALID_INVALID), which the edge alone decides.
type handoffService interface {
	Handoff(r *http.Request, caller identity.Authenticated) (string, error)
	NextPage(r *http.Request, next string) (string, error)
}

var _ handoffService = (*edge.Proxy)(nil)

// getHandoff sends the browser where the edge says: the app's origin with a
// code, a sign-in page, or back to the app. The caller is the one the
// session cookie authenticated (a top-level navigation: isolation lets the
// cookie count); a bearer token is the edge's refusal to give.
func (s *Server) getHandoff(c echo.Context) error {
	if s.d.Handoff == nil {
		return errcode.New(errcode.NotFound, "this server serves no apps")
	}
	to, err := s.d.Handoff.Handoff(c.Request(), authOf(c).Authenticated)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	return c.Redirect(http.StatusSeeOther, to)
}

type nextPageDTO struct {
	Next string `json:"next" doc:"where the page may send the browser: a path of this console, or an app's address"`
}

// getNextPage says where a console page may send the browser next, as the
// edge decides (a page that follows only this answer is no open redirect).
func (s *Server) getNextPage(c echo.Context) error {
	if s.d.Handoff == nil {
		return errcode.New(errcode.NotFound, "this server serves no apps, so a page follows no next")
	}
	nexts := c.QueryParams()["next"]
	if len(nexts) != 1 {
		return errcode.Invalid("next", "give exactly one next")
	}
	to, err := s.d.Handoff.NextPage(c.Request(), nexts[0])
	return jsonOr(c, http.StatusOK, nextPageDTO{Next: to}, err)
}
