package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/icon"
)

type iconsService interface {
	// Get returns the app's tile, generated (true) when none is set.
	Get(appID string) (icon.Icon, bool, error)
	// Put checks the image and makes it the app's tile.
	Put(ctx context.Context, appID string, b []byte) (apps.App, error)
	// Delete removes the app's tile; NOT_FOUND when none is set.
	Delete(ctx context.Context, appID string) (apps.App, error)
}

var _ iconsService = (*icon.Service)(nil)

// getIcon answers the tile's bytes. They are an image uploaded by someone
// else, so the answer tells the browser never to sniff it into anything
// else nor run anything in it.
func (s *Server) getIcon(c echo.Context) error {
	ic, _, err := s.d.Icons.Get(c.Param("appID"))
	if err != nil {
		return err
	}
	etag := `"` + ic.SHA256 + `"`
	h := c.Response().Header()
	h.Set("Cache-Control", "private, max-age=300")
	h.Set("ETag", etag)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
	if etagMatches(c.Request().Header.Get("If-None-Match"), etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, ic.ContentType, ic.Data)
}

// etagMatches reports whether an If-None-Match header names etag (weak
// comparison, as RFC 9110 asks for it), or is "*".
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// putIcon takes the body as the image, whatever its Content-Type says: the
// format is told by the content. The route caps the body at the image
// limit; one past it is refused as the contract says (400 VALID_INVALID).
func (s *Server) putIcon(c echo.Context) error {
	var body bytes.Buffer
	if _, err := body.ReadFrom(io.LimitReader(c.Request().Body, icon.MaxBytes+1)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return icon.TooLarge()
		}
		return errcode.Wrap(err, errcode.ValidInvalid, "the request body could not be read")
	}
	a, err := s.d.Icons.Put(c.Request().Context(), c.Param("appID"), body.Bytes())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, appAnswer{App: s.withURL(c, a)})
}

func (s *Server) deleteIcon(c echo.Context) error {
	if _, err := s.d.Icons.Delete(c.Request().Context(), c.Param("appID")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
