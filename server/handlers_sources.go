package server

import (
	"context"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/source"
)

type sourcesService interface {
	FromArchive(ctx context.Context, appID, contentType string, body io.Reader) (source.Checkout, error)
	Check(src apps.Source) error
	Fetch(ctx context.Context, appID string, src apps.Source) error
}

type sourceAnswer struct {
	Source     apps.Source `json:"source"`
	CheckoutID string      `json:"checkout_id"`
}

// postSource takes an uploaded archive as the app's source. The body is
// the archive itself; its Content-Type names the format.
func (s *Server) postSource(c echo.Context) error {
	if s.d.Sources == nil {
		return errcode.New(errcode.AdapterUnavailable, "source uploads are not available on this server")
	}
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if _, err := source.KindOf(ct); err != nil {
		return err
	}
	co, err := s.d.Sources.FromArchive(c.Request().Context(), c.Param("appID"), ct, c.Request().Body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, sourceAnswer{Source: co.Source, CheckoutID: co.ID})
}
