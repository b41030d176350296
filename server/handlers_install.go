package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
)

type policyService interface {
	Current() policy.Policy
	Fixed() []string
	Replace(ctx context.Context, body map[string]any) (policy.Policy, error)
	Candidate(body map[string]any) (policy.Policy, error)
}

type policyDTO struct {
	Policy policy.Policy `json:"policy"`
	Fixed  []string      `json:"fixed"`
}

func (s *Server) getPolicy(c echo.Context) error {
	return c.JSON(http.StatusOK, policyDTO{Policy: s.d.Policy.Current(), Fixed: s.d.Policy.Fixed()})
}

type policyRequest struct {
	Policy json.RawMessage `json:"policy" doc:"the whole policy document, as GET /api/v1/policy shows it"`
}

// policyBody binds {"policy": {...}} and decodes the settings exactly.
func policyBody(c echo.Context) (map[string]any, error) {
	var req policyRequest
	if err := bind(c, &req); err != nil {
		return nil, err
	}
	if len(req.Policy) == 0 {
		return nil, errcode.Invalid("policy", "policy is required")
	}
	return policy.DecodeBody(req.Policy)
}

func (s *Server) putPolicy(c echo.Context) error {
	body, err := policyBody(c)
	if err != nil {
		return err
	}
	p, err := s.d.Policy.Replace(c.Request().Context(), body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, policyDTO{Policy: p, Fixed: s.d.Policy.Fixed()})
}

type previewDTO struct {
	Blocked []plan.Blocked `json:"blocked"`
}

// postPolicyPreview names the apps a candidate policy would block that the
// policy in force does not, with the reasons.
func (s *Server) postPolicyPreview(c echo.Context) error {
	body, err := policyBody(c)
	if err != nil {
		return err
	}
	candidate, err := s.d.Policy.Candidate(body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, previewDTO{Blocked: s.d.Plans.Preview(candidate)})
}

type auditDTO struct {
	Items []audit.Entry `json:"items"`
	// NextBefore, when more entries match, is the before= of the next page
	// (the ID of the last entry of this one).
	NextBefore string `json:"next_before,omitempty"`
}

func (s *Server) getAudit(c echo.Context) error {
	f, before, limit, err := audit.ParseFilter(c.QueryParams())
	if err != nil {
		return err
	}
	entries, more := audit.Query(s.d.Facts.Read(), f, before, limit)
	page := auditDTO{Items: entries}
	if more && len(entries) > 0 {
		page.NextBefore = entries[len(entries)-1].ID
	}
	return c.JSON(http.StatusOK, page)
}
