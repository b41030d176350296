package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
)

// The sharing services the server calls.
type (
	grantsService interface {
		Grants(appID string) (identity.AppGrants, error)
		CreateGrant(ctx context.Context, c authz.Caller, appID string, n identity.NewGrant) (identity.GrantInfo, error)
		UpdateGrant(ctx context.Context, c authz.Caller, appID, grantID string, p identity.GrantPatch) (identity.GrantInfo, error)
		DeleteGrant(ctx context.Context, c authz.Caller, appID, grantID string) error
	}
	sharedWithService interface {
		Principals(appID, q string) (identity.PrincipalMatches, error)
		UserApps(c authz.Caller, userID string) ([]identity.AppAccess, error)
		GroupApps(c authz.Caller, groupID string) ([]identity.AppAccess, error)
	}
	passcodeService interface {
		PasscodeApp(appID string) (string, error)
		EnterPasscode(ctx context.Context, appID, code string, c identity.Client) (identity.Admission, error)
	}
	sharingService interface {
		grantsService
		sharedWithService
		passcodeService
	}
)

var _ sharingService = (*identity.Sharing)(nil)

type grantAnswer struct {
	Grant identity.GrantInfo `json:"grant"`
}

func (s *Server) getGrants(c echo.Context) error {
	g, err := s.d.Sharing.Grants(c.Param("appID"))
	return jsonOr(c, http.StatusOK, g, err)
}

type createGrantRequest struct {
	Plane         string  `json:"plane" doc:"control (administer the app, with role_id) or data (reach the app)"`
	PrincipalKind string  `json:"principal_kind" doc:"user, group, token or anonymous (everyone)"`
	PrincipalID   string  `json:"principal_id,omitempty" doc:"the user's, group's or service token's ID (not for anonymous)"`
	RoleID        *string `json:"role_id,omitempty" doc:"an app role, for a control-plane grant"`
	Passcode      *string `json:"passcode,omitempty" doc:"for the grant to everyone: a passcode of 6 to 128 characters to ask"`
}

func (s *Server) postGrant(c echo.Context) error {
	var req createGrantRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	g, err := s.d.Sharing.CreateGrant(c.Request().Context(), callerOf(c), c.Param("appID"), identity.NewGrant(req))
	return jsonOr(c, http.StatusCreated, grantAnswer{Grant: g}, err)
}

type patchGrantRequest struct {
	RoleID   *string `json:"role_id,omitempty" doc:"a management grant's new app role"`
	Passcode *string `json:"passcode,omitempty" doc:"the grant to everyone's new passcode (6 to 128 characters; empty removes it)"`
}

func (s *Server) patchGrant(c echo.Context) error {
	id, err := pathID(c, "grantID", ids.Grant)
	if err != nil {
		return err
	}
	var req patchGrantRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	g, err := s.d.Sharing.UpdateGrant(c.Request().Context(), callerOf(c), c.Param("appID"), id, identity.GrantPatch(req))
	return jsonOr(c, http.StatusOK, grantAnswer{Grant: g}, err)
}

func (s *Server) deleteGrant(c echo.Context) error {
	id, err := pathID(c, "grantID", ids.Grant)
	if err != nil {
		return err
	}
	return noContent(c, s.d.Sharing.DeleteGrant(c.Request().Context(), callerOf(c), c.Param("appID"), id))
}

func (s *Server) getPrincipals(c echo.Context) error {
	m, err := s.d.Sharing.Principals(c.Param("appID"), c.QueryParam("q"))
	return jsonOr(c, http.StatusOK, m, err)
}

type passcodeAppDTO struct {
	Name string `json:"name"`
}

func (s *Server) getPasscode(c echo.Context) error {
	name, err := s.d.Sharing.PasscodeApp(c.Param("appID"))
	return jsonOr(c, http.StatusOK, passcodeAppDTO{Name: name}, err)
}

type passcodeRequest struct {
	Passcode string `json:"passcode" doc:"the app's passcode"`
}

// postPasscode checks a passcode and, when it is right, sets the admission
// cookie (edge.PasscodeCookie): HttpOnly, SameSite=Lax, Secure over TLS,
// for a day, host-only on the console's origin and for the handoff's path
// only, where the handoff reads it to carry the admission to the app's
// origin (nothing else of the console, and no app, receives it).
func (s *Server) postPasscode(c echo.Context) error {
	var req passcodeRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	appID := c.Param("appID")
	a, err := s.d.Sharing.EnterPasscode(c.Request().Context(), appID, req.Passcode, clientOf(c))
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{
		Name: edge.PasscodeCookie(appID), Value: a.Cookie, Path: edge.HandoffEndpoint, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure:  s.secure(c.Request()),
		Expires: a.ExpiresAt, MaxAge: int(identity.AdmissionTTL / time.Second),
	})
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getUserApps(c echo.Context) error {
	items, err := s.d.Sharing.UserApps(callerOf(c), c.Param("userID"))
	return pagedList(c, items, err, identity.AppAccess.ListKey, ascending)
}

func (s *Server) getGroupApps(c echo.Context) error {
	id, err := pathID(c, "groupID", ids.Group)
	if err != nil {
		return err
	}
	items, err := s.d.Sharing.GroupApps(callerOf(c), id)
	return pagedList(c, items, err, identity.AppAccess.ListKey, ascending)
}
