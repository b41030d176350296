package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
)

type plansService interface {
	Plan(appID string, revision uint64) (plan.Result, error)
	Preview(candidate policy.Policy) []plan.Blocked
}

type planRequest struct {
	Revision *int64 `json:"revision,omitempty" doc:"the spec revision to plan (default: the pinned one)"`
}

// postPlan answers what a deploy would do and every reason it would be
// refused; it creates nothing.
func (s *Server) postPlan(c echo.Context) error {
	var req planRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	var n uint64
	if req.Revision != nil {
		if *req.Revision < 1 {
			return errcode.Invalid("revision", "revision is a revision number, 1 or more")
		}
		n = uint64(*req.Revision)
	}
	r, err := s.d.Plans.Plan(c.Param("appID"), n)
	return jsonOr(c, http.StatusOK, r, err)
}
