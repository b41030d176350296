package api

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// User is an account. EmailVerified says an administrator set Email (or an
// identity provider verified it); it is false when the person set it.
type User struct {
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

// Token is an API token; its secret is shown only when it is created.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	Agent      bool       `json:"agent"`
	OwnerID    string     `json:"owner_id"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// SignIn signs in with a username and password; the client then sends the
// session cookie with every request (a bearer token, if set, still wins).
func (c *Client) SignIn(ctx context.Context, username, password string) (User, error) {
	var v struct {
		User User `json:"user"`
	}
	meta, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/sessions", body: map[string]string{"username": username, "password": password}}, &v)
	if err != nil {
		return User{}, err
	}
	c.session = meta.session
	return v.User, nil
}

// SignOut ends the client's session.
func (c *Client) SignOut(ctx context.Context) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/sessions"}, nil)
	c.session = ""
	return err
}

// Me is the caller and the installation verbs it holds.
type Me struct {
	User  *User    `json:"user"`
	Token *Token   `json:"token,omitempty"`
	Verbs []string `json:"verbs"`
}

// Me returns the caller.
func (c *Client) Me(ctx context.Context) (Me, error) {
	var v Me
	return v, c.get(ctx, "/api/v1/me", nil, &v)
}

// NewToken is a token to mint.
type NewToken struct {
	Name          string `json:"name"`
	ExpiresInDays *int   `json:"expires_in_days,omitempty"`
	Agent         bool   `json:"agent,omitempty"`
}

// CreateToken mints a delegated token (acting as the caller), or with
// service set a service token; the secret is returned once.
func (c *Client) CreateToken(ctx context.Context, n NewToken, service bool) (Token, string, error) {
	path := "/api/v1/tokens"
	if service {
		path += "/service"
	}
	var v struct {
		Token  Token  `json:"token"`
		Secret string `json:"secret"`
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: path, body: n}, &v)
	return v.Token, v.Secret, err
}

// CompleteSetup creates the first account, as administrator, on an
// installation that waits for setup, and signs the client in with it.
func (c *Client) CompleteSetup(ctx context.Context, username, displayName, password string) (User, error) {
	var v struct {
		User User `json:"user"`
	}
	body := map[string]string{"username": username, "display_name": displayName, "password": password}
	meta, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/setup", body: body}, &v)
	if err != nil {
		return User{}, err
	}
	c.session = meta.session
	return v.User, nil
}

// RevokeToken revokes a token: the caller's own needs no verb.
func (c *Client) RevokeToken(ctx context.Context, tokenID string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/tokens/" + url.PathEscape(tokenID)}, nil)
	return err
}
