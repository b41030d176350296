package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/spec"
)

type detectionService interface {
	Get(appID string) (detection.Record, error)
	Rerun(ctx context.Context, appID string) (detection.Record, error)
	Answer(ctx context.Context, appID string, answers map[string]string) (detection.Record, error)
	Diff(appID string) (spec.DiffResult, error)
	Accept(ctx context.Context, appID string, a detection.Accept) (spec.View, error)
}

func (s *Server) getDetection(c echo.Context) error {
	rec, err := s.d.Detection.Get(c.Param("appID"))
	return jsonOr(c, http.StatusOK, rec, err)
}

func (s *Server) postDetectionRerun(c echo.Context) error {
	rec, err := s.d.Detection.Rerun(c.Request().Context(), c.Param("appID"))
	return jsonOr(c, http.StatusOK, rec, err)
}

type answersRequest struct {
	Answers map[string]string `json:"answers" doc:"answers by question ID (never a secret: give secrets at accept)"`
}

func (s *Server) postDetectionAnswers(c echo.Context) error {
	var req answersRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	rec, err := s.d.Detection.Answer(c.Request().Context(), c.Param("appID"), req.Answers)
	return jsonOr(c, http.StatusOK, rec, err)
}

func (s *Server) getDetectionDiff(c echo.Context) error {
	d, err := s.d.Detection.Diff(c.Param("appID"))
	return jsonOr(c, http.StatusOK, d, err)
}

type acceptRequest struct {
	Values  []detection.Value `json:"values,omitempty" doc:"values to set: key, value, secret (true sends it to the secrets adapter), workload"`
	Confirm bool              `json:"confirm,omitempty" doc:"true to replace the configuration of an app that has one"`
}

// postDetectionAccept writes the proposal as a pinned revision; a secret
// value also needs app.secrets.write, which the caller's verbs on the app
// say.
func (s *Server) postDetectionAccept(c echo.Context) error {
	var req acceptRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	a := authOf(c)
	canWrite := authz.AppVerbs(a.facts, a.Principal, c.Param("appID"), a.floor).Has(authz.AppSecretsW)
	v, err := s.d.Detection.Accept(c.Request().Context(), c.Param("appID"), detection.Accept{Values: req.Values, Confirm: req.Confirm, CanWriteSecrets: canWrite})
	return jsonOr(c, http.StatusCreated, specAnswer{Spec: v}, err)
}

// jsonOr answers v with status, or err.
func jsonOr(c echo.Context, status int, v any, err error) error {
	if err != nil {
		return err
	}
	return c.JSON(status, v)
}
