package server

import (
	"encoding/base64"
	"net/http"
	"reflect"
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

// paging is how a route answering a list pages it.
type paging int

const (
	unpaged paging = iota // the route answers no list
	// pagedCursor: query limit and cursor, the answer's next_cursor
	// (API.md's rule for every list).
	pagedCursor
	// pagedBefore is the audit log's, which the specification fixes:
	// newest first, the next page asked for with before=<the last entry's
	// ID> and limit (defaults and bounds as pagedCursor's). It is an
	// exception because the log is read newest first under filters whose
	// walk resumes from an entry ID (internal/audit), and the
	// specification names before as its paging.
	pagedBefore
)

func (p paging) String() string {
	switch p {
	case pagedCursor:
		return "cursor"
	case pagedBefore:
		return "before"
	}
	return ""
}

// answersList reports whether a response body is a list: an object with
// an items array, which then must page.
func answersList(response any) bool {
	t := reflect.TypeOf(response)
	if t == nil || t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == "items" && f.Type.Kind() == reflect.Slice {
			return true
		}
	}
	return false
}

// order says how the keys of a list run along it.
type order int

const (
	ascending order = iota
	descending
)

// pageOf pages a list a service answers whole (one it computes, or one of
// a few rows): the items after the cursor, at most the page's limit, and
// whether more follow. key must be unique in the list and strictly rise
// along it (fall, descending): the cursor is the last key of a page, so
// the next page resumes at the right place even when items were added or
// removed between the two.
func pageOf[T any](items []T, p page, key func(T) string, o order) ([]T, bool) {
	out := make([]T, 0, min(len(items), p.limit))
	for _, it := range items {
		if c := strings.Compare(key(it), p.after); p.after != "" && (o == ascending && c <= 0 || o == descending && c >= 0) {
			continue
		}
		if len(out) == p.limit {
			return out, true
		}
		out = append(out, it)
	}
	return out, false
}

// listOf is the list answer of one page of a whole list (pageOf).
func listOf[T any](items []T, p page, key func(T) string, o order) list[T] {
	out, more := pageOf(items, p, key, o)
	return newList(out, more, lastID(out, key))
}

// pagedList answers the page the request asks for of a list a service
// answered whole (items, or its error).
func pagedList[T any](c echo.Context, items []T, err error, key func(T) string, o order) error {
	if err != nil {
		return err
	}
	p, err := parsePage(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listOf(items, p, key, o))
}
