package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/backups"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/volumes"
)

type (
	slotsService interface {
		List(appID string) ([]slots.View, error)
		Fill(ctx context.Context, appID, key string, req slots.FillRequest) (slots.View, error)
	}
	// appDeleter deletes an app with the caller's decision about its
	// volumes' data (guarantee 4).
	appDeleter interface {
		DeleteApp(ctx context.Context, appID string, d apps.Decision, backupID string) error
	}
	volumesService interface {
		List(ctx context.Context, appID string) ([]volumes.View, error)
		ListAll(ctx context.Context) []volumes.View
		Create(ctx context.Context, c authz.Caller, appID string, req volumes.Request) (volumes.Created, error)
		Delete(ctx context.Context, id string, guard volumes.Guard) error
	}
)

type slotAnswer struct {
	Slot slots.View `json:"slot"`
}

func (s *Server) listSlots(c echo.Context) error {
	vs, err := s.d.Slots.List(c.Param("appID"))
	return pagedList(c, vs, err, slots.View.ListKey, ascending)
}

func (s *Server) putSlot(c echo.Context) error {
	var req slots.FillRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	v, err := s.d.Slots.Fill(c.Request().Context(), c.Param("appID"), c.Param("key"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, slotAnswer{Slot: v})
}

func (s *Server) listVolumes(c echo.Context) error {
	vs, err := s.d.Volumes.List(c.Request().Context(), c.Param("appID"))
	return pagedList(c, vs, err, func(v volumes.View) string { return v.Name }, ascending)
}

func (s *Server) listAllVolumes(c echo.Context) error {
	return pagedList(c, s.d.Volumes.ListAll(c.Request().Context()), nil, func(v volumes.View) string { return *v.ID }, ascending)
}

func (s *Server) deleteVolume(c echo.Context) error {
	var guard volumes.Guard
	if s.d.Policy.Current().RequireBackupBeforeDestroy {
		guard = backups.RequireFinalCopy
	}
	if err := s.d.Volumes.Delete(c.Request().Context(), c.Param("volumeID"), guard); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) postVolume(c echo.Context) error {
	var req volumes.Request
	if err := bind(c, &req); err != nil {
		return err
	}
	created, err := s.d.Volumes.Create(c.Request().Context(), callerOf(c), c.Param("appID"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, created)
}

// Body types of the route table.
type (
	fillSlotRequest     = slots.FillRequest
	createVolumeRequest = volumes.Request
	volumeAnswer        = volumes.Created
)

// The services satisfy the interfaces the server declares.
var (
	_ slotsService   = (*slots.Service)(nil)
	_ volumesService = (*volumes.Service)(nil)
	_ appDeleter     = (*volumes.Service)(nil)
)
