package server

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// The scheduler's control of running apps, as the app routes use it.
type (
	appControlService interface {
		Start(ctx context.Context, appID string) (apps.App, error)
		Stop(ctx context.Context, appID string) (apps.App, error)
		Restart(ctx context.Context, appID string) (apps.App, error)
	}
	workloadsService interface {
		Status(ctx context.Context, appID string) (scheduler.Status, error)
		Usage(ctx context.Context, appID string) (scheduler.Usage, error)
		Logs(ctx context.Context, appID, workload string, tail int) ([]string, string, error)
		Exec(ctx context.Context, appID, workload string, command []string, rows, cols uint16) (scheduler.ExecSession, error)
	}
	capacityService interface {
		Capacity(ctx context.Context) (scheduler.Capacity, error)
	}
)

var (
	_ appControlService = (*scheduler.Service)(nil)
	_ workloadsService  = (*scheduler.Service)(nil)
	_ capacityService   = (*scheduler.Service)(nil)
)

func (s *Server) postStart(c echo.Context) error {
	a, err := s.d.AppControl.Start(c.Request().Context(), c.Param("appID"))
	return jsonOr(c, http.StatusOK, appAnswer{App: s.withURL(c, a)}, err)
}

func (s *Server) postStop(c echo.Context) error {
	a, err := s.d.AppControl.Stop(c.Request().Context(), c.Param("appID"))
	return jsonOr(c, http.StatusOK, appAnswer{App: s.withURL(c, a)}, err)
}

// postAppRestart asks for a restart in place; the reconciler does it
// behind the answer.
func (s *Server) postAppRestart(c echo.Context) error {
	a, err := s.d.AppControl.Restart(c.Request().Context(), c.Param("appID"))
	return jsonOr(c, http.StatusAccepted, appAnswer{App: s.withURL(c, a)}, err)
}

func (s *Server) getStatus(c echo.Context) error {
	st, err := s.d.Workloads.Status(c.Request().Context(), c.Param("appID"))
	return jsonOr(c, http.StatusOK, st, err)
}

func (s *Server) getUsage(c echo.Context) error {
	u, err := s.d.Workloads.Usage(c.Request().Context(), c.Param("appID"))
	return jsonOr(c, http.StatusOK, u, err)
}

// Tail of GET /apps/{appID}/logs: 100 lines unless asked, at most
// scheduler.MaxTail.
const defaultTail = 100

type appLogsDTO struct {
	Workload string   `json:"workload"`
	Lines    []string `json:"lines"`
}

func (s *Server) getAppLogs(c echo.Context) error {
	tail, err := queryInt(c, "tail", defaultTail, 1, scheduler.MaxTail)
	if err != nil {
		return err
	}
	lines, workload, err := s.d.Workloads.Logs(c.Request().Context(), c.Param("appID"), c.QueryParam("workload"), tail)
	if lines == nil {
		lines = []string{}
	}
	return jsonOr(c, http.StatusOK, appLogsDTO{Workload: workload, Lines: lines}, err)
}

func (s *Server) getCapacity(c echo.Context) error {
	cp, err := s.d.Capacity.Capacity(c.Request().Context())
	return jsonOr(c, http.StatusOK, cp, err)
}

// queryInt reads an optional whole-number query parameter from lo to hi.
func queryInt(c echo.Context, name string, def, lo, hi int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, errcode.Invalid(name, "%s must be a whole number from %d to %d", name, lo, hi)
	}
	return n, nil
}
