package server

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
)

// Paging of list endpoints: query limit (default 50, at most 500; larger is
// clamped) and an opaque cursor; the answer's next_cursor is absent on the
// last page.
const (
	defaultPageLimit = 50
	maxPageLimit     = 500
	cursorVersion    = "c1:"
	maxCursorLength  = 512
)

type page struct {
	limit int
	after string // the ID of the last item of the previous page
}

func parsePage(c echo.Context) (page, error) {
	p := page{limit: defaultPageLimit}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, errcode.Invalid("limit", "limit must be a whole number from 1 to %d", maxPageLimit)
		}
		p.limit = min(n, maxPageLimit)
	}
	if v := c.QueryParam("cursor"); v != "" {
		after, err := decodeCursor(v)
		if err != nil {
			return p, err
		}
		p.after = after
	}
	return p, nil
}

// encodeCursor makes an opaque cursor that resumes after id.
func encodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + id))
}

func decodeCursor(v string) (string, error) {
	bad := errcode.Invalid("cursor", "the cursor is not one this server issued").
		WithRemedy("pass next_cursor from the previous page unchanged, or omit cursor to start again")
	if len(v) > maxCursorLength {
		return "", bad
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return "", bad
	}
	id, ok := strings.CutPrefix(string(b), cursorVersion)
	if !ok || id == "" {
		return "", bad
	}
	return id, nil
}

// list is the shape of every list answer.
type list[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// newList builds a list answer; lastID is the ID of the last item when more
// items follow.
func newList[T any](items []T, more bool, lastID string) list[T] {
	if items == nil {
		items = []T{}
	}
	l := list[T]{Items: items}
	if more {
		l.NextCursor = encodeCursor(lastID)
	}
	return l
}

// lastID is the ID of the last item of a page, the cursor of the next.
func lastID[T any](items []T, id func(T) string) string {
	if len(items) == 0 {
		return ""
	}
	return id(items[len(items)-1])
}
