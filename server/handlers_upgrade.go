package server

import (
	"context"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/upgrade"
)

// upgrader replaces the running binary in place (internal/upgrade).
type upgrader interface {
	Start(ctx context.Context, body io.Reader, signature string) (upgrade.Status, func(), error)
	Latest() (upgrade.Current, error)
}

var _ upgrader = (*upgrade.Service)(nil)

type upgradeAnswer struct {
	Upgrade upgrade.Status `json:"upgrade"`
}

// postUpgrade checks the uploaded binary and answers 202; only once the
// answer is flushed does the process swap it in and restart (as
// postRestart does).
func (s *Server) postUpgrade(c echo.Context) error {
	if s.d.Upgrades == nil {
		return errcode.New(errcode.NotFound, "in-place upgrades are not available on this server")
	}
	st, begin, err := s.d.Upgrades.Start(c.Request().Context(), c.Request().Body, c.QueryParam("signature"))
	if err != nil {
		return err
	}
	err = c.JSON(http.StatusAccepted, upgradeAnswer{Upgrade: st})
	c.Response().Flush()
	begin()
	return err
}

func (s *Server) getUpgrade(c echo.Context) error {
	if s.d.Upgrades == nil {
		return errcode.New(errcode.NotFound, "in-place upgrades are not available on this server")
	}
	cur, err := s.d.Upgrades.Latest()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, cur)
}
