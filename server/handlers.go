package server

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/operator"
	"github.com/svchost/svc/internal/policy"
)

type setupStatusDTO struct {
	SetupRequired bool `json:"setup_required"`
}

func (s *Server) getSetup(c echo.Context) error {
	return c.JSON(http.StatusOK, setupStatusDTO{SetupRequired: s.d.Identity.SetupRequired()})
}

type configDTO struct {
	Settings    []config.Setting    `json:"settings"`
	PolicyFixed []policy.FixedEntry `json:"policy_fixed"`
	// Adapters are the adapters declared at startup, with their origin;
	// their credentials name where they are read from, never a value.
	Adapters []config.Adapter `json:"adapters"`
}

func (s *Server) getConfig(c echo.Context) error {
	fixed := s.d.Config.Policy.Entries()
	if fixed == nil {
		fixed = []policy.FixedEntry{}
	}
	declared := s.d.Config.Adapters
	if declared == nil {
		declared = []config.Adapter{}
	}
	return c.JSON(http.StatusOK, configDTO{Settings: s.d.Config.Settings, PolicyFixed: fixed, Adapters: declared})
}

type raftStatusDTO = operator.RaftStatus

func (s *Server) getRaft(c echo.Context) error {
	withDigest, err := queryBool(c, "digest")
	if err != nil {
		return err
	}
	st, err := s.d.Operator.Status(withDigest)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) getHistory(c echo.Context) error {
	rep, err := s.d.History.VerifyHistory(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

type probeRequestDTO struct {
	PayloadBytes int `json:"payload_bytes" doc:"the size of the probe's payload"`
}

type probeResultDTO struct {
	Probe operator.ProbeResult `json:"probe"`
}

func (s *Server) postProbe(c echo.Context) error {
	var req probeRequestDTO
	if err := bindOptional(c, &req); err != nil {
		return err
	}
	res, err := s.d.Operator.WriteProbe(c.Request().Context(), req.PayloadBytes)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, probeResultDTO{Probe: res})
}

type probeDTO struct {
	Probe       operator.Probe `json:"probe"`
	CreateIndex uint64         `json:"create_index"`
}

func (s *Server) getProbe(c echo.Context) error {
	id := c.Param("probeID")
	if !ids.Valid(ids.Probe, id) {
		return errcode.New(errcode.NotFound, "no probe %q", id)
	}
	p, meta, err := s.d.Operator.Probe(id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, probeDTO{Probe: p, CreateIndex: meta.CreateIndex})
}

func (s *Server) listProbes(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	items, more := s.d.Operator.Probes(p.after, p.limit)
	return c.JSON(http.StatusOK, newList(items, more, lastID(items, func(p operator.Probe) string { return p.ID })))
}

type healthDTO struct {
	Status string `json:"status"`
	Leader string `json:"leader,omitempty"`
	Reason string `json:"reason,omitempty"`
	Time   string `json:"time"`
	// StartedAt is when the server last started or restarted (healthz only).
	StartedAt string `json:"started_at,omitempty"`
}

func (s *Server) getHealth(c echo.Context) error {
	return c.JSON(http.StatusOK, healthDTO{Status: "ok", Time: now(), StartedAt: s.d.StartedAt.UTC().Format(time.RFC3339Nano)})
}

func (s *Server) getReady(c echo.Context) error {
	leader, _ := s.d.Ready.Leader()
	if err := s.d.Ready.CaughtUp(); err != nil {
		return c.JSON(http.StatusServiceUnavailable, healthDTO{Status: "not_ready", Reason: publicError(err).Message, Leader: leader, Time: now()})
	}
	if leader == "" {
		return c.JSON(http.StatusServiceUnavailable, healthDTO{Status: "not_ready", Reason: "no leader of the replicated store is known", Time: now()})
	}
	if s.d.Identity.AdminPending() {
		return c.JSON(http.StatusServiceUnavailable, healthDTO{Status: "not_ready", Reason: "the administrator account from SVC_ADMIN_PASSWORD is not created yet", Leader: leader, Time: now()})
	}
	return c.JSON(http.StatusOK, healthDTO{Status: "ready", Leader: leader, Time: now()})
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }

// bindOptional binds a JSON body when there is one; an empty body leaves v
// at its zero value.
func bindOptional(c echo.Context, v any) error {
	body, err := readAll(c.Request().Body)
	if err != nil || len(body) == 0 {
		return err
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(body))
	return bind(c, v)
}

// queryBool reads an optional boolean query parameter.
func queryBool(c echo.Context, name string) (bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errcode.Invalid(name, "%s must be true or false", name)
	}
	return b, nil
}
