package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/security"
)

// securityService answers and starts apps' security scans.
type securityService interface {
	Get(appID string) (security.View, error)
	Request(ctx context.Context, appID string) (security.View, error)
}

var _ securityService = (*security.Service)(nil)

// securityAnswer is GET /apps/{appID}/security's body (API.md).
type securityAnswer struct {
	Security security.View `json:"security"`
}

func (s *Server) getSecurity(c echo.Context) error {
	v, err := s.d.Security.Get(c.Param("appID"))
	return jsonOr(c, http.StatusOK, securityAnswer{Security: v}, err)
}

func (s *Server) postSecurityScan(c echo.Context) error {
	v, err := s.d.Security.Request(c.Request().Context(), c.Param("appID"))
	return jsonOr(c, http.StatusAccepted, securityAnswer{Security: v}, err)
}
