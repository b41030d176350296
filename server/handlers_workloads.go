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
	// appLogFollower is the optional capability of following an app's
	// runtime output (GET …/logs?follow=true).
	appLogFollower interface {
		FollowAppLogs(ctx context.Context, appID, workload string, tail int, emit func(lines []string) error) (string, error)
	}
	capacityService interface {
		Capacity(ctx context.Context) (scheduler.Capacity, error)
	}
)

var (
	_ appControlService = (*scheduler.Service)(nil)
	_ workloadsService  = (*scheduler.Service)(nil)
	_ capacityService   = (*scheduler.Service)(nil)
	_ appLogFollower    = (*scheduler.Service)(nil)
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

// appLogEvent is a line of a followed app log (event: log); appLogsEnd
// says why the output ended (event: end): stopped (the workload's job
// stopped: a redeploy replaced it, the app was stopped) or lagged (the
// reader fell behind; follow again).
type (
	appLogEvent struct {
		Line string `json:"line"`
	}
	appLogsEnd struct {
		Reason string `json:"reason"`
	}
)

func (s *Server) getAppLogs(c echo.Context) error {
	tail, err := queryInt(c, "tail", defaultTail, 1, scheduler.MaxTail)
	if err != nil {
		return err
	}
	follow, err := queryBool(c, "follow")
	switch {
	case err != nil:
		return err
	case follow:
		return s.followAppLogs(c, tail)
	}
	lines, workload, err := s.d.Workloads.Logs(c.Request().Context(), c.Param("appID"), c.QueryParam("workload"), tail)
	if lines == nil {
		lines = []string{}
	}
	return jsonOr(c, http.StatusOK, appLogsDTO{Workload: workload, Lines: lines}, err)
}

// followAppLogs streams the last tail lines of a workload's output as
// server-sent events, then each line as it is written, until the output
// ends (event: end), the client goes or the server shuts down. A refusal
// comes before the stream opens, as an error envelope.
func (s *Server) followAppLogs(c echo.Context, tail int) error {
	lf, ok := s.d.Workloads.(appLogFollower)
	if !ok {
		return errcode.New(errcode.PlanCapabilityUnsupp, "this server cannot follow logs")
	}
	ctx, cancel := s.untilClosing(c.Request().Context())
	defer cancel()
	out := &lazySSE{c: c}
	ended, err := lf.FollowAppLogs(ctx, c.Param("appID"), c.QueryParam("workload"), tail, func(lines []string) error {
		return out.sendAll("log", lines, func(l string) any { return appLogEvent{Line: l} })
	})
	return out.end("end", appLogsEnd{Reason: ended}, err)
}

// untilClosing is ctx, also ended when the server shuts down (a restart,
// the process stopping): for answers that last as long as the client
// wants.
func (s *Server) untilClosing(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// lazySSE is an event stream opened by its first use, so that a refusal
// before it is still an error envelope.
type lazySSE struct {
	c  echo.Context
	st *sseStream
}

// sendAll opens the stream (even for no items) and sends each item as an
// event of its own.
func (l *lazySSE) sendAll(event string, items []string, data func(string) any) error {
	if l.st == nil {
		l.st = openSSE(l.c)
	}
	for _, it := range items {
		if err := l.st.send(event, data(it)); err != nil {
			return err
		}
	}
	return nil
}

// end sends the last event when the work ended without an error, and
// closes the stream; before the stream opened, err is the answer.
func (l *lazySSE) end(event string, data any, err error) error {
	if l.st == nil && err != nil {
		return err
	}
	if l.st == nil {
		l.st = openSSE(l.c)
	}
	defer l.st.close()
	if err == nil {
		_ = l.st.send(event, data)
	}
	return nil
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
