package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/idempotency"
	"github.com/svchost/svc/internal/ids"
)

const (
	headerRequestID   = "X-Request-Id"
	headerIdemKey     = "Idempotency-Key"
	headerIdemReplay  = "Idempotent-Replayed"
	ctxRequestID      = "svc.request_id"
	ctxPrincipal      = "svc.principal"
	defaultBodyLimit  = 1 << 20 // JSON bodies; uploads declare their own limit
	idempotencyCommit = 10 * time.Second
)

// requestID gives every request a fresh req_ id, on the answer's header and
// in the context for logs and the error envelope. An inbound X-Request-Id is
// not trusted.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := ids.New(ids.Request)
		c.Set(ctxRequestID, id)
		c.Response().Header().Set(headerRequestID, id)
		return next(c)
	}
}

func requestID(c echo.Context) string {
	id, _ := c.Get(ctxRequestID).(string)
	return id
}

// principalID is the authenticated caller, or "" for an anonymous one.
func principalID(c echo.Context) string {
	p, _ := c.Get(ctxPrincipal).(string)
	return p
}

func (s *Server) reqLog(c echo.Context) *slog.Logger {
	return s.log.With("request_id", requestID(c), "method", c.Request().Method, "path", c.Request().URL.Path)
}

// observe records every answer in the metrics and the log. Errors are
// answered here (through the central handler) so that the recorded status is
// the one sent.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			s.handleError(err, c)
		}
		d := time.Since(start)
		route := c.Path()
		if route == "" || c.Handler() == nil {
			route = "unmatched"
		}
		status := c.Response().Status
		s.d.Metrics.ObserveRequest(route, c.Request().Method, status, d)
		level := slog.LevelInfo
		if route == "/healthz" || route == "/readyz" || route == "/metrics" {
			level = slog.LevelDebug
		}
		s.reqLog(c).Log(c.Request().Context(), level, "request",
			"route", route, "status", status, "duration_ms", float64(d.Microseconds())/1000, "bytes", c.Response().Size)
		return nil
	}
}

// caughtUp answers STORE_UNAVAILABLE (503, Retry-After) instead of
// running a route while this node's store has not caught up with the
// cluster since it started or restored a snapshot: its older state would
// deny what it has not seen yet (a valid token unknown, an app not found).
// It runs before authentication, which reads that state. Stateless routes
// (liveness, readiness, metrics) answer anyway.
func (s *Server) caughtUp(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.stateless[c.Path()] {
			return next(c)
		}
		if err := s.d.Ready.CaughtUp(); err != nil {
			return err
		}
		return next(c)
	}
}

// recoverPanic turns a handler's panic into an INTERNAL answer, logging the
// stack under the request id.
func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.reqLog(c).Error("handler panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = errcode.New(errcode.Internal, "unexpected failure; the request id finds the log line")
			}
		}()
		return next(c)
	}
}

// limitBody caps the request body; reading past the cap fails with
// http.MaxBytesError, which answers 413 VALID_INVALID. A body declared
// larger than the cap is refused at once: by refuse when the route names
// its own refusal (the handler then answers the same for a body that goes
// past the cap), else 413.
func limitBody(limit int64, refuse func() *errcode.Error, next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > limit {
			if refuse != nil {
				return refuse()
			}
			return tooLarge(limit)
		}
		req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
		return next(c)
	}
}

// idempotent replays the first answer to a request carrying an
// Idempotency-Key that was already answered. The scope of a key is the
// caller, the method and the path; the same key with another body is
// refused. A server error releases the key so that a retry runs again.
func (s *Server) idempotent(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get(headerIdemKey)
		if key == "" {
			return next(c)
		}
		if err := idempotency.ValidKey(key); err != nil {
			return err
		}
		body, err := readAll(c.Request().Body)
		if err != nil {
			return err
		}
		c.Request().Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(body)
		req := c.Request()
		id := idempotency.ID(principalID(c), req.Method, req.URL.Path, key)
		rec, res, err := s.d.Idempotency.Begin(req.Context(), id, hex.EncodeToString(sum[:]))
		if err != nil {
			return err
		}
		if rec != nil {
			h := c.Response().Header()
			h.Set(headerIdemReplay, "true")
			if rec.Location != "" {
				h.Set("Location", rec.Location)
			}
			return c.Blob(rec.Status, rec.ContentType, rec.Body)
		}
		captured := &recorder{ResponseWriter: c.Response().Writer}
		c.Response().Writer = captured
		// Settle the key however the handler ends: with its answer, or
		// released if it failed on the server's side or panicked. The
		// request's own context may be gone by then.
		settle := func(release bool) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), idempotencyCommit)
			defer cancel()
			var err error
			if h := c.Response().Header(); release {
				err = s.d.Idempotency.Release(ctx, res)
			} else {
				err = s.d.Idempotency.Complete(ctx, res, c.Response().Status, h.Get(echo.HeaderContentType), h.Get("Location"), captured.buf.Bytes())
			}
			if err != nil {
				s.reqLog(c).Warn("could not settle the idempotency key", "err", err)
			}
		}
		defer func() {
			if r := recover(); r != nil {
				settle(true)
				panic(r)
			}
		}()
		if err := next(c); err != nil {
			s.handleError(err, c)
		}
		settle(c.Response().Status >= 500)
		return nil
	}
}

// recorder keeps a copy of what a handler writes.
type recorder struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.buf.Len() <= idempotency.MaxBody {
		r.buf.Write(p)
	}
	return r.ResponseWriter.Write(p)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
