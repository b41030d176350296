package server

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
)

type (
	specRevisions interface {
		List(appID string, before uint64, limit int) (spec.Listing, error)
		Create(ctx context.Context, appID string, d spec.Document) (spec.View, error)
		Get(appID string, n uint64) (spec.View, error)
		Pin(ctx context.Context, appID string, n uint64) (spec.View, error)
	}
	specViews interface {
		Diff(appID string, a, b uint64) (spec.DiffResult, error)
		Export(appID string) (spec.Export, error)
	}
	specsService interface {
		specRevisions
		specViews
	}
)

var _ specsService = (*spec.Service)(nil)

// specBodyLimit caps POST /specs: a document of the largest size, wrapped.
const specBodyLimit = spec.MaxDocumentBytes + 16<<10

// specList is GET /specs's answer: revisions without documents, newest
// first, and the pinned revision (null when none is).
type specList struct {
	Items          []spec.Summary `json:"items"`
	NextCursor     string         `json:"next_cursor,omitempty"`
	PinnedRevision *uint64        `json:"pinned_revision"`
}

// createSpecRequest is POST /specs's JSON body. details.field of a problem
// in the document is its path inside the document (workloads.web.run.port),
// as it is for a YAML body; a problem with the document as a whole names
// spec.
type createSpecRequest struct {
	Spec json.RawMessage `json:"spec" doc:"the spec document (docs/spec-document.md), as JSON"`
}

type specAnswer struct {
	Spec spec.View `json:"spec"`
}

func (s *Server) listSpecs(c echo.Context) error {
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	before, err := revisionCursor(p.after)
	if err != nil {
		return err
	}
	l, err := s.d.Specs.List(c.Param("appID"), before, p.limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newSpecList(l))
}

func newSpecList(l spec.Listing) specList {
	out := specList{Items: l.Items}
	if out.Items == nil {
		out.Items = []spec.Summary{}
	}
	if l.More && len(l.Items) > 0 {
		out.NextCursor = encodeCursor(strconv.FormatUint(l.Items[len(l.Items)-1].Number, 10))
	}
	if l.Pinned != 0 {
		out.PinnedRevision = &l.Pinned
	}
	return out
}

// revisionCursor reads the revision number a cursor resumes below.
func revisionCursor(after string) (uint64, error) {
	if after == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(after, 10, 64)
	if err != nil || n == 0 {
		return 0, errcode.Invalid("cursor", "the cursor is not one this server issued")
	}
	return n, nil
}

func (s *Server) postSpec(c echo.Context) error {
	d, err := specBody(c)
	if err != nil {
		return err
	}
	v, err := s.d.Specs.Create(c.Request().Context(), c.Param("appID"), d)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, specAnswer{Spec: v})
}

// specBody reads POST /specs's body: {"spec": document} as JSON, or the
// document itself as YAML (Content-Type application/yaml).
func specBody(c echo.Context) (spec.Document, error) {
	if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); isYAML(mt) {
		b, err := readAll(c.Request().Body)
		if err != nil {
			return spec.Document{}, err
		}
		return spec.Parse(b)
	}
	var req createSpecRequest
	if err := bind(c, &req); err != nil {
		return spec.Document{}, err
	}
	if len(req.Spec) == 0 || string(req.Spec) == "null" {
		return spec.Document{}, errcode.Invalid("spec", "spec is required: the spec document")
	}
	d, err := spec.Parse(req.Spec)
	if e, ok := errcode.As(err); ok && e.Details["field"] == nil {
		e.WithDetail("field", "spec") // the document as a whole
	}
	return d, err
}

func isYAML(mediaType string) bool {
	switch mediaType {
	case "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml":
		return true
	}
	return false
}

func (s *Server) getSpec(c echo.Context) error {
	n, err := revisionParam(c, "rev")
	if err != nil {
		return err
	}
	v, err := s.d.Specs.Get(c.Param("appID"), n)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, specAnswer{Spec: v})
}

func (s *Server) pinSpec(c echo.Context) error {
	n, err := revisionParam(c, "rev")
	if err != nil {
		return err
	}
	v, err := s.d.Specs.Pin(c.Request().Context(), c.Param("appID"), n)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, specAnswer{Spec: v})
}

func (s *Server) diffSpecs(c echo.Context) error {
	a, err := revisionParam(c, "a")
	if err != nil {
		return err
	}
	b, err := revisionParam(c, "b")
	if err != nil {
		return err
	}
	d, err := s.d.Specs.Diff(c.Param("appID"), a, b)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// revisionParam reads a revision number from the path.
func revisionParam(c echo.Context, name string) (uint64, error) {
	n, err := strconv.ParseUint(c.Param(name), 10, 64)
	if err != nil || n == 0 {
		return 0, errcode.Invalid(name, "%s must be a revision number: 1, 2, 3…", name)
	}
	return n, nil
}

// getExport answers the export document as JSON, or as YAML with
// ?format=yaml.
func (s *Server) getExport(c echo.Context) error {
	format := c.QueryParam("format")
	if format != "" && format != "json" && format != "yaml" {
		return errcode.Invalid("format", "format is json (the default) or yaml")
	}
	e, err := s.d.Specs.Export(c.Param("appID"))
	if err != nil {
		return err
	}
	if format != "yaml" {
		return c.JSON(http.StatusOK, e)
	}
	b, err := spec.MarshalYAML(e)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "application/yaml", b)
}
