package server

import (
	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
)

// serveConsole hands a page or file of the console to its handler.
func (s *Server) serveConsole(c echo.Context) error {
	if s.d.Console == nil {
		return errcode.New(errcode.NotFound, "this server has no console").WithRemedy("use the API at /api/v1")
	}
	s.d.Console.ServeHTTP(c.Response(), c.Request())
	return nil
}
