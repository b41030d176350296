package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/password"
)

// The identity services the server calls, by area.
type (
	sessionService interface {
		SetupRequired() bool
		// AdminPending: this node has yet to create the administrator
		// from SVC_ADMIN_PASSWORD, and is not ready until it has.
		AdminPending() bool
		Setup(ctx context.Context, username, displayName, pw string, c identity.Client) (identity.SignedIn, error)
		SignIn(ctx context.Context, username, pw string, c identity.Client) (identity.SignedIn, error)
		SignOut(ctx context.Context, cookie string) error
	}
	accountService interface {
		CreateUser(ctx context.Context, n identity.NewUser) (identity.User, string, error)
		User(c authz.Caller, id string) (identity.User, error)
		Users(after string, limit int) ([]identity.User, bool)
		UpdateUser(ctx context.Context, c authz.Caller, id string, p identity.UserPatch) (identity.User, error)
	}
	accountAdmin interface {
		DeleteUser(ctx context.Context, id string) error
		SetUserRole(ctx context.Context, id string, roleID *string) (identity.User, error)
		ResetPassword(ctx context.Context, id, pw string, mustChange bool) error
		ChangeOwnPassword(ctx context.Context, c authz.Caller, client identity.Client, currentSession, current, next string) error
	}
	groupService interface {
		Groups(after string, limit int) ([]identity.Group, bool)
		CreateGroup(ctx context.Context, name string) (identity.Group, error)
		SetMembers(ctx context.Context, id string, userIDs []string) (identity.Group, error)
		AddMember(ctx context.Context, id, userID string) (identity.Group, error)
	}
	groupAdmin interface {
		RemoveMember(ctx context.Context, id, userID string) (identity.Group, error)
		SetGroupRole(ctx context.Context, id string, roleID *string) (identity.Group, error)
		DeleteGroup(ctx context.Context, id string) error
	}
	roleService interface {
		Roles(scope, after string, limit int) ([]authz.Role, bool, error)
		CreateRole(ctx context.Context, name string, scope authz.Scope, verbs []authz.Verb) (authz.Role, error)
		DeleteRole(ctx context.Context, id string) error
	}
	tokenService interface {
		CreateToken(ctx context.Context, c authz.Caller, kind string, n identity.NewToken) (identity.Token, string, error)
		OwnTokens(c authz.Caller, after string, limit int) ([]identity.Token, bool)
		ServiceTokens(after string, limit int) ([]identity.Token, bool)
		RevokeToken(ctx context.Context, c authz.Caller, id string) error
	}
	identityService interface {
		authenticator
		sessionService
		accountService
		accountAdmin
		groupService
		groupAdmin
		roleService
		tokenService
	}
)

// userDTO is an account as the API shows it: never a password hash.
type userDTO struct {
	ID                 string    `json:"id"`
	Username           string    `json:"username"`
	DisplayName        string    `json:"display_name"`
	Email              string    `json:"email"`
	EmailVerified      bool      `json:"email_verified"`
	Status             string    `json:"status"`
	MustChangePassword bool      `json:"must_change_password"`
	RoleID             *string   `json:"role_id"`
	Source             string    `json:"source"`
	CreatedAt          time.Time `json:"created_at"`
}

func toUser(u identity.User) userDTO {
	return userDTO{ID: u.ID, Username: u.Username, DisplayName: u.DisplayName, Email: u.Email, EmailVerified: u.EmailVerified, Status: u.Status,
		MustChangePassword: u.MustChangePassword, RoleID: u.RoleID, Source: u.Source, CreatedAt: u.CreatedAt}
}

func toUsers(us []identity.User) []userDTO {
	out := make([]userDTO, len(us))
	for i, u := range us {
		out[i] = toUser(u)
	}
	return out
}

type userAnswer struct {
	User     userDTO `json:"user"`
	Password string  `json:"password,omitempty"`
}

// tokenDTO is a token as the API shows it: never its secret or hash.
type tokenDTO struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	Agent      bool       `json:"agent"`
	OwnerID    string     `json:"owner_id"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

func toToken(t identity.Token) tokenDTO {
	return tokenDTO{ID: t.ID, Name: t.Name, Kind: t.Kind, Agent: t.Agent, OwnerID: t.OwnerID, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt}
}

func toTokens(ts []identity.Token, more bool) list[tokenDTO] {
	out := make([]tokenDTO, len(ts))
	for i, t := range ts {
		out[i] = toToken(t)
	}
	return newList(out, more, lastID(out, func(t tokenDTO) string { return t.ID }))
}

type groupDTO struct {
	Group identity.Group `json:"group"`
}

type roleDTO struct {
	Role authz.Role `json:"role"`
}

func clientOf(c echo.Context) identity.Client {
	return identity.Client{IP: c.RealIP(), UserAgent: c.Request().UserAgent()}
}

// pathID reads an ID path parameter; a malformed one names no object.
func pathID(c echo.Context, name string, p ids.Prefix) (string, error) {
	id := c.Param(name)
	if !ids.Valid(p, id) {
		return "", errcode.New(errcode.NotFound, "no %s %q", name, id)
	}
	return id, nil
}

// Setup and sessions.

type setupRequest struct {
	Username    string `json:"username" doc:"the first administrator's username"`
	DisplayName string `json:"display_name" doc:"the name shown for them"`
	Password    string `json:"password" doc:"their password (at least 12 characters)"`
}

func (s *Server) postSetup(c echo.Context) error {
	var req setupRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	in, err := s.d.Identity.Setup(c.Request().Context(), req.Username, req.DisplayName, req.Password, clientOf(c))
	if err != nil {
		return err
	}
	c.SetCookie(s.sessionCookie(c, in.Cookie, in.ExpiresAt))
	return c.JSON(http.StatusCreated, userAnswer{User: toUser(in.User)})
}

type signInRequest struct {
	Username string `json:"username" doc:"the account's username"`
	Password string `json:"password" doc:"its password"`
}

func (s *Server) postSession(c echo.Context) error {
	var req signInRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	in, err := s.d.Identity.SignIn(c.Request().Context(), req.Username, req.Password, clientOf(c))
	if err != nil {
		return err
	}
	c.SetCookie(s.sessionCookie(c, in.Cookie, in.ExpiresAt))
	return c.JSON(http.StatusOK, userAnswer{User: toUser(in.User)})
}

// deleteSession ends the session of the request's cookie (also when a
// bearer token authenticated the request) and clears the cookie.
func (s *Server) deleteSession(c echo.Context) error {
	if cookie, err := s.sessionCookieOf(c); err == nil && cookie != "" {
		if err := s.d.Identity.SignOut(c.Request().Context(), cookie); err != nil {
			return err
		}
	}
	c.SetCookie(s.sessionCookie(c, "", time.Time{}))
	return c.NoContent(http.StatusNoContent)
}

// Personal.

type meDTO struct {
	User  *userDTO     `json:"user"`
	Token *tokenDTO    `json:"token,omitempty"`
	Verbs []authz.Verb `json:"verbs"`
}

func (s *Server) getMe(c echo.Context) error {
	a := authOf(c)
	me := meDTO{Verbs: a.caller.Install.Scoped(authz.ScopeInstall).Verbs()}
	if a.User != nil {
		u := toUser(*a.User)
		me.User = &u
	}
	if a.Token != nil {
		t := toToken(*a.Token)
		me.Token = &t
	}
	return c.JSON(http.StatusOK, me)
}

type changePasswordRequest struct {
	CurrentPassword string `json:"current_password" doc:"your current password"`
	NewPassword     string `json:"new_password" doc:"the new one"`
}

func (s *Server) postMyPassword(c echo.Context) error {
	var req changePasswordRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	err := s.d.Identity.ChangeOwnPassword(c.Request().Context(), callerOf(c), clientOf(c), authOf(c).SessionID, req.CurrentPassword, req.NewPassword)
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Accounts.

func (s *Server) listUsers(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	users, more := s.d.Identity.Users(p.after, p.limit)
	return c.JSON(http.StatusOK, newList(toUsers(users), more, lastID(users, func(u identity.User) string { return u.ID })))
}

type createUserRequest struct {
	Username           string `json:"username" doc:"the account's username"`
	DisplayName        string `json:"display_name" doc:"the name shown for them"`
	Email              string `json:"email" doc:"their email address"`
	Password           string `json:"password" doc:"their first password"`
	MustChangePassword bool   `json:"must_change_password" doc:"make them change it at their first sign-in"`
}

func (s *Server) postUser(c echo.Context) error {
	var req createUserRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	n := identity.NewUser{Username: req.Username, DisplayName: req.DisplayName, Email: req.Email, Password: req.Password, MustChangePassword: req.MustChangePassword}
	u, generated, err := s.d.Identity.CreateUser(c.Request().Context(), n)
	if err != nil {
		return err
	}
	if generated != "" {
		c.Response().Header().Set("Cache-Control", "no-store")
	}
	return c.JSON(http.StatusCreated, userAnswer{User: toUser(u), Password: generated})
}

// getUser, patchUser, getUserApps and deleteToken pass the path's ID to the
// service unchecked (a malformed one names no object): whether the caller
// may ask is decided first, so that without the verb the answer does not
// depend on the ID (pathID would answer NOT_FOUND before it).
func (s *Server) getUser(c echo.Context) error {
	u, err := s.d.Identity.User(callerOf(c), c.Param("userID"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, userAnswer{User: toUser(u)})
}

type patchUserRequest struct {
	Username    *string `json:"username" doc:"a new username"`
	DisplayName *string `json:"display_name" doc:"a new display name"`
	Email       *string `json:"email" doc:"a new email address"`
	Status      *string `json:"status" doc:"active or disabled"`
}

func (s *Server) patchUser(c echo.Context) error {
	var req patchUserRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	u, err := s.d.Identity.UpdateUser(c.Request().Context(), callerOf(c), c.Param("userID"), identity.UserPatch(req))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, userAnswer{User: toUser(u)})
}

func (s *Server) deleteUser(c echo.Context) error {
	id, err := pathID(c, "userID", ids.User)
	if err != nil {
		return err
	}
	if err := s.d.Identity.DeleteUser(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

type roleRequest struct {
	RoleID string `json:"role_id" doc:"an installation role's ID (role_admin, role_member, role_auditor or a custom role)"`
}

func (s *Server) putUserRole(c echo.Context) error {
	id, err := pathID(c, "userID", ids.User)
	if err != nil {
		return err
	}
	var req roleRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.RoleID == "" {
		return errcode.Invalid("role_id", "role_id is required")
	}
	u, err := s.d.Identity.SetUserRole(c.Request().Context(), id, &req.RoleID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, userAnswer{User: toUser(u)})
}

func (s *Server) deleteUserRole(c echo.Context) error {
	id, err := pathID(c, "userID", ids.User)
	if err != nil {
		return err
	}
	if _, err := s.d.Identity.SetUserRole(c.Request().Context(), id, nil); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

type resetPasswordRequest struct {
	Password           string `json:"password" doc:"the new password"`
	MustChangePassword *bool  `json:"must_change_password" doc:"make them change it at their next sign-in (default true)"`
}

func (s *Server) postUserPassword(c echo.Context) error {
	id, err := pathID(c, "userID", ids.User)
	if err != nil {
		return err
	}
	var req resetPasswordRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	must := req.MustChangePassword == nil || *req.MustChangePassword
	if err := s.d.Identity.ResetPassword(c.Request().Context(), id, req.Password, must); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

type passwordDTO struct {
	Password string `json:"password"`
}

func (s *Server) postGeneratePassword(c echo.Context) error {
	pw, err := password.Generate()
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, passwordDTO{Password: pw})
}

// Groups.

func (s *Server) listGroups(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	gs, more := s.d.Identity.Groups(p.after, p.limit)
	return c.JSON(http.StatusOK, newList(gs, more, lastID(gs, func(g identity.Group) string { return g.ID })))
}

type groupRequest struct {
	Name string `json:"name" doc:"the group's name"`
}

func (s *Server) postGroup(c echo.Context) error {
	var req groupRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	g, err := s.d.Identity.CreateGroup(c.Request().Context(), req.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, groupDTO{Group: g})
}

type membersRequest struct {
	UserIDs []string `json:"user_ids" doc:"every member's user ID: the group's whole membership"`
}

// groupChange runs one change of a group named by the path and answers it.
func (s *Server) groupChange(c echo.Context, fn func(ctx context.Context, id string) (identity.Group, error)) error {
	id, err := pathID(c, "groupID", ids.Group)
	if err != nil {
		return err
	}
	g, err := fn(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, groupDTO{Group: g})
}

func (s *Server) putMembers(c echo.Context) error {
	var req membersRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.UserIDs == nil {
		return errcode.Invalid("user_ids", "user_ids is required (an empty list empties the group)")
	}
	return s.groupChange(c, func(ctx context.Context, id string) (identity.Group, error) {
		return s.d.Identity.SetMembers(ctx, id, req.UserIDs)
	})
}

func (s *Server) putMember(c echo.Context) error {
	return s.groupChange(c, func(ctx context.Context, id string) (identity.Group, error) {
		return s.d.Identity.AddMember(ctx, id, c.Param("userID"))
	})
}

func (s *Server) deleteMember(c echo.Context) error {
	return s.groupChange(c, func(ctx context.Context, id string) (identity.Group, error) {
		return s.d.Identity.RemoveMember(ctx, id, c.Param("userID"))
	})
}

func (s *Server) putGroupRole(c echo.Context) error {
	var req roleRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.RoleID == "" {
		return errcode.Invalid("role_id", "role_id is required")
	}
	return s.groupChange(c, func(ctx context.Context, id string) (identity.Group, error) {
		return s.d.Identity.SetGroupRole(ctx, id, &req.RoleID)
	})
}

func (s *Server) deleteGroupRole(c echo.Context) error {
	return s.groupChange(c, func(ctx context.Context, id string) (identity.Group, error) {
		return s.d.Identity.SetGroupRole(ctx, id, nil)
	})
}

func (s *Server) deleteGroup(c echo.Context) error {
	id, err := pathID(c, "groupID", ids.Group)
	if err != nil {
		return err
	}
	if err := s.d.Identity.DeleteGroup(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Roles and verbs.

func (s *Server) listRoles(c echo.Context) error {
	scope := c.QueryParam("scope")
	if scope == "" {
		scope = string(authz.ScopeInstall)
	}
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	roles, more, err := s.d.Identity.Roles(scope, p.after, p.limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newList(roles, more, lastID(roles, func(r authz.Role) string { return r.ID })))
}

type createRoleRequest struct {
	Name  string       `json:"name" doc:"the role's name"`
	Scope authz.Scope  `json:"scope" doc:"install or app"`
	Verbs []authz.Verb `json:"verbs" doc:"the verbs it grants (GET /api/v1/verbs lists them)"`
}

func (s *Server) postRole(c echo.Context) error {
	var req createRoleRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	r, err := s.d.Identity.CreateRole(c.Request().Context(), req.Name, req.Scope, req.Verbs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, roleDTO{Role: r})
}

func (s *Server) deleteRole(c echo.Context) error {
	if err := s.d.Identity.DeleteRole(c.Request().Context(), c.Param("roleID")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

type verbsDTO struct {
	Install []authz.Verb `json:"install"`
	App     []authz.Verb `json:"app"`
}

func (s *Server) getVerbs(c echo.Context) error {
	return c.JSON(http.StatusOK, verbsDTO{Install: authz.Verbs(authz.ScopeInstall), App: authz.Verbs(authz.ScopeApp)})
}

// Tokens.

type tokenRequest struct {
	Name          string `json:"name" doc:"a name to tell the token by"`
	ExpiresInDays *int   `json:"expires_in_days" doc:"days until it expires (default: never, or host policy's max_token_lifetime_days)"`
	Agent         bool   `json:"agent" doc:"true for a token an automated caller (an AI assistant) uses: host policy's agent_disabled_verbs applies to it"`
}

type tokenAnswer struct {
	Token  tokenDTO `json:"token"`
	Secret string   `json:"secret"`
}

func (s *Server) mintToken(c echo.Context, kind string) error {
	var req tokenRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	t, secret, err := s.d.Identity.CreateToken(c.Request().Context(), callerOf(c), kind, identity.NewToken(req))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, tokenAnswer{Token: toToken(t), Secret: secret})
}

func (s *Server) postToken(c echo.Context) error { return s.mintToken(c, identity.TokenDelegated) }

func (s *Server) postServiceToken(c echo.Context) error { return s.mintToken(c, identity.TokenService) }

func (s *Server) listTokens(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toTokens(s.d.Identity.OwnTokens(callerOf(c), p.after, p.limit)))
}

func (s *Server) listServiceTokens(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toTokens(s.d.Identity.ServiceTokens(p.after, p.limit)))
}

func (s *Server) deleteToken(c echo.Context) error {
	if err := s.d.Identity.RevokeToken(c.Request().Context(), callerOf(c), c.Param("tokenID")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
