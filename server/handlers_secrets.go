package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
)

type secretsService interface {
	List(appID string) ([]secrets.View, error)
	Put(ctx context.Context, ref secrets.Ref, value string) (secrets.View, error)
	Value(ctx context.Context, ref secrets.Ref) (string, error)
	Delete(ctx context.Context, ref secrets.Ref) error
}

func secretRef(c echo.Context) secrets.Ref {
	return secrets.Ref{AppID: c.Param("appID"), Key: c.Param("key")}
}

func (s *Server) listSecrets(c echo.Context) error {
	vs, err := s.d.Secrets.List(c.Param("appID"))
	return pagedList(c, vs, err, func(v secrets.View) string { return v.Key }, ascending)
}

type putSecretRequest struct {
	Value *string `json:"value" doc:"the secret's value"`
}

type secretAnswer struct {
	Secret secrets.View `json:"secret"`
}

func (s *Server) putSecret(c echo.Context) error {
	var req putSecretRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.Value == nil {
		return errcode.Invalid("value", "value is required: a string, which may be empty")
	}
	v, err := s.d.Secrets.Put(c.Request().Context(), secretRef(c), *req.Value)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, secretAnswer{Secret: v})
}

func (s *Server) deleteSecret(c echo.Context) error {
	if err := s.d.Secrets.Delete(c.Request().Context(), secretRef(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

type secretValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// getSecretValue is the one answer that carries a secret's value; the read
// is audited before the value leaves, and nothing may cache the answer.
func (s *Server) getSecretValue(c echo.Context) error {
	ref := secretRef(c)
	v, err := s.d.Secrets.Value(c.Request().Context(), ref)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, secretValue{Key: ref.Key, Value: v})
}
