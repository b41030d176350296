package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/keyring"
)

type adaptersService interface {
	List() adapters.List
	Kinds() []adapters.Kind
	Configure(ctx context.Context, req adapters.Request) (adapters.View, bool, error)
	Delete(ctx context.Context, id string) error
}

type keyringService interface {
	Info() []keyring.KeyInfo
	Rotate(ctx context.Context) (keyring.Rotation, error)
}

func (s *Server) listAdapters(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	l := s.d.Adapters.List()
	page := listOf(l.Items, p, adapters.View.ListKey, ascending)
	l.Items, l.NextCursor = page.Items, page.NextCursor
	return c.JSON(http.StatusOK, l)
}

type kindList struct {
	Categories []string        `json:"categories"`
	Items      []adapters.Kind `json:"items"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

func (s *Server) listAdapterKinds(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	page := listOf(s.d.Adapters.Kinds(), p, adapters.Kind.ListKey, ascending)
	return c.JSON(http.StatusOK, kindList{Categories: adapters.Categories(), Items: page.Items, NextCursor: page.NextCursor})
}

// configureAdapterRequest names the adapter (adapter_id; else new: true
// for another of the kind; else the category and kind's own) and carries
// settings in config and write-only credentials in credentials (a null
// value returns a setting to its default, removes a credential).
type configureAdapterRequest struct {
	AdapterID   string             `json:"adapter_id,omitempty" doc:"configure this adapter in place"`
	New         bool               `json:"new,omitempty" doc:"true to add another adapter of the kind"`
	Category    string             `json:"category" doc:"runtime, secrets, routes, slots, …"`
	Kind        string             `json:"kind" doc:"the adapter's kind (GET /api/v1/adapters/kinds)"`
	Config      map[string]any     `json:"config,omitempty" doc:"the kind's settings"`
	Credentials map[string]*string `json:"credentials,omitempty" doc:"the kind's credentials (stored encrypted; never shown again)"`
}

type adapterAnswer struct {
	Adapter adapters.View `json:"adapter"`
}

func (s *Server) postAdapter(c echo.Context) error {
	var req configureAdapterRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	v, created, err := s.d.Adapters.Configure(c.Request().Context(), adapters.Request(req))
	if err != nil {
		return err
	}
	return c.JSON(map[bool]int{true: http.StatusCreated, false: http.StatusOK}[created], adapterAnswer{Adapter: v})
}

func (s *Server) deleteAdapter(c echo.Context) error {
	if err := s.d.Adapters.Delete(c.Request().Context(), c.Param("adapterID")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

type keyringDTO struct {
	Keys []keyring.KeyInfo `json:"keys"`
}

func (s *Server) getKeyring(c echo.Context) error {
	return c.JSON(http.StatusOK, keyringDTO{Keys: s.d.Keyring.Info()})
}

func (s *Server) postKeyringRotate(c echo.Context) error {
	rot, err := s.d.Keyring.Rotate(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rot)
}
