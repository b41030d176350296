package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/edge"
)

// edgeKeysService is the edge's signing keys: the public halves for the
// JWKS, and their rotation.
type edgeKeysService interface {
	JWKS() edge.JWKS
	List() []edge.KeyInfo
	Rotate(ctx context.Context) ([]edge.KeyInfo, error)
}

var _ edgeKeysService = (*edge.SigningKeys)(nil)

// jwksMaxAge is how long verifiers may keep the key set. A rotation signs
// with the new key at once: verifiers that meet an unknown kid fetch again
// sooner, and the previous key stays published long after.
const jwksMaxAge = "public, max-age=60"

func (s *Server) getJWKS(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", jwksMaxAge)
	return c.JSON(http.StatusOK, s.d.EdgeKeys.JWKS())
}

type edgeKeysDTO struct {
	Items []edge.KeyInfo `json:"items"`
}

func (s *Server) listEdgeKeys(c echo.Context) error {
	return pagedList(c, s.d.EdgeKeys.List(), nil, func(k edge.KeyInfo) string { return k.KID }, descending)
}

func (s *Server) postEdgeKeysRotate(c echo.Context) error {
	keys, err := s.d.EdgeKeys.Rotate(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, edgeKeysDTO{Items: keys})
}
