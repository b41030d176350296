package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
)

// envelope is the body of every error answer.
type envelope struct {
	Code      errcode.Code   `json:"code"`
	Message   string         `json:"message"`
	Remedy    string         `json:"remedy,omitempty"`
	Details   map[string]any `json:"details"`
	RequestID string         `json:"request_id"`
}

// handleError is the one place where errors become HTTP answers. Handlers
// return errors unchanged; this maps their codes to statuses through the
// catalogue, and logs what the caller does not see.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		s.reqLog(c).Warn("error after the answer was sent", "err", err)
		return
	}
	e := publicError(err)
	if e.Code == errcode.Internal {
		s.reqLog(c).Error("internal error", "err", err)
	}
	if e.Status() == http.StatusUnauthorized {
		// RFC 9110: a 401 names the scheme that would authenticate.
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="svc"`)
	}
	if e.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	body := envelope{Code: e.Code, Message: e.Message, Remedy: e.Remedy, Details: details, RequestID: requestID(c)}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(e.Status())
		return
	}
	if werr := c.JSON(e.Status(), body); werr != nil {
		s.reqLog(c).Warn("could not write the error answer", "err", werr)
	}
}

// publicError turns any error into the coded error the caller sees. Anything
// without a code is INTERNAL, and its text never reaches the caller.
func publicError(err error) *errcode.Error {
	if e, ok := errcode.As(err); ok {
		return e
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return errcode.New(errcode.NotFound, "no such endpoint")
		case http.StatusMethodNotAllowed:
			return errcode.New(errcode.ValidInvalid, "method not allowed on this endpoint").WithStatus(http.StatusMethodNotAllowed)
		case http.StatusRequestEntityTooLarge:
			return errcode.New(errcode.ValidInvalid, "request body too large").WithStatus(http.StatusRequestEntityTooLarge)
		case http.StatusBadRequest, http.StatusUnsupportedMediaType:
			return errcode.New(errcode.ValidInvalid, "malformed request").WithStatus(he.Code)
		}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(mbe.Limit)
	}
	return errcode.Wrap(err, errcode.Internal, "unexpected failure; the request id finds the log line")
}

func tooLarge(limit int64) *errcode.Error {
	return errcode.New(errcode.ValidInvalid, "request body exceeds %d bytes", limit).
		WithStatus(http.StatusRequestEntityTooLarge).WithDetail("limit_bytes", limit)
}

// bind decodes a JSON request body into v strictly: the content type must be
// JSON, unknown fields and trailing data are refused, and every failure is a
// VALID_INVALID naming the field where it is known.
func bind(c echo.Context, v any) error {
	req := c.Request()
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return errcode.New(errcode.ValidInvalid, "the body must be JSON (Content-Type: application/json)").
				WithStatus(http.StatusUnsupportedMediaType).WithDetail("content_type", ct)
		}
	}
	return decodeJSON(req.Body, v)
}

func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(mbe.Limit)
		}
		return errcode.New(errcode.ValidInvalid, "unexpected data after the JSON body")
	}
	return nil
}

func jsonError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit)
	case errors.Is(err, io.EOF):
		return errcode.New(errcode.ValidInvalid, "the request body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errcode.New(errcode.ValidInvalid, "the JSON body ends too early")
	case errors.As(err, &syn):
		return errcode.New(errcode.ValidInvalid, "malformed JSON at byte %d: %s", syn.Offset, syn.Error()).
			WithDetail("offset", syn.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return errcode.New(errcode.ValidInvalid, "the body must be a JSON %s, not %s", jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return errcode.Invalid(field, "%s must be %s, not %s", field, jsonKind(typ.Type.Kind().String()), typ.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return errcode.Invalid(name, "unknown field %q", name)
	}
	return errcode.Wrap(err, errcode.ValidInvalid, "malformed JSON body")
}

// jsonKind names a Go kind the way a JSON author thinks of it.
func jsonKind(kind string) string {
	switch {
	case kind == "struct" || kind == "map":
		return "an object"
	case kind == "slice" || kind == "array":
		return "an array"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "true or false"
	case strings.HasPrefix(kind, "int") || strings.HasPrefix(kind, "uint"):
		return "an integer"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	}
	return fmt.Sprintf("a %s", kind)
}

// readAll reads a body that the body limit already bounds.
func readAll(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(mbe.Limit)
		}
		return nil, errcode.Wrap(err, errcode.ValidInvalid, "the request body could not be read")
	}
	return buf.Bytes(), nil
}
