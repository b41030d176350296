package server

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

type restartDTO struct {
	Restarting bool      `json:"restarting"`
	StartedAt  time.Time `json:"started_at"` // of the generation that answers; the next one's is later
}

// postRestart records the request, answers, and only once the answer is
// flushed asks for the restart, which then drains this server (this request
// included) before anything stops. Once recorded, the restart happens even
// if the caller has gone; one asked for while another is pending joins it.
func (s *Server) postRestart(c echo.Context) error {
	if err := s.d.Operator.RecordRestart(c.Request().Context()); err != nil {
		return err
	}
	err := c.JSON(http.StatusAccepted, restartDTO{Restarting: true, StartedAt: s.d.StartedAt})
	c.Response().Flush()
	if s.d.Restart != nil {
		s.d.Restart()
	}
	return err
}
