package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/backups"
)

type (
	backupsService interface {
		List(f backups.Filter) ([]backups.Backup, error)
		Get(id string) (backups.Backup, error)
		Create(ctx context.Context, req backups.Request) (backups.Backup, error)
		Verify(ctx context.Context, id string) (backups.Verified, error)
	}
	restorer interface {
		Restore(ctx context.Context, backupID string) (backups.Backup, error)
		RestoreApp(ctx context.Context, appID, backupID string) (backups.Backup, error)
	}
	backupsAll interface {
		backupsService
		restorer
	}
)

// Body types of the route table.
type (
	backupRequest  = backups.Request
	restoreRequest = backups.RestoreRequest
	backupVerified = backups.Verified
	backupAnswer   struct {
		Backup backups.Backup `json:"backup"`
	}
)

func (s *Server) listBackups(c echo.Context) error {
	bs, err := s.d.Backups.List(backups.Filter{AppID: c.QueryParam("app_id"), Kind: c.QueryParam("kind")})
	return pagedList(c, bs, err, func(b backups.Backup) string { return b.ID }, descending)
}

func (s *Server) getBackup(c echo.Context) error {
	b, err := s.d.Backups.Get(c.Param("backupID"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, backupAnswer{Backup: b})
}

func (s *Server) postBackup(c echo.Context) error {
	var req backups.Request
	if err := bind(c, &req); err != nil {
		return err
	}
	b, err := s.d.Backups.Create(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, backupAnswer{Backup: b})
}

func (s *Server) verifyBackup(c echo.Context) error {
	v, err := s.d.Backups.Verify(c.Request().Context(), c.Param("backupID"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) restoreBackup(c echo.Context) error {
	b, err := s.d.Backups.Restore(c.Request().Context(), c.Param("backupID"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, backupAnswer{Backup: b})
}

func (s *Server) restoreApp(c echo.Context) error {
	var req backups.RestoreRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	b, err := s.d.Backups.RestoreApp(c.Request().Context(), c.Param("appID"), req.BackupID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, backupAnswer{Backup: b})
}
