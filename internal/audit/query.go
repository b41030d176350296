package audit

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// Page sizes of the API contract: a query answers DefaultLimit entries unless
// it asks otherwise, and never more than MaxLimit (a larger ask is clamped).
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// maxParamLen bounds every query parameter value (IDs are at most 256 bytes
// in the store).
const maxParamLen = 256

// Filter selects audit entries; every field set must match. Empty strings
// and zero times are unset.
type Filter struct {
	Action        string // prefix of Entry.Action
	PrincipalID   string
	PrincipalKind string
	AppID         string
	TargetKind    string
	TargetID      string
	Involving     string // PrincipalID or TargetID
	// Since (inclusive) and Until (exclusive) bound Entry.Time.
	Since, Until time.Time
}

// params are the query parameters of GET /api/v1/audit, in the order they
// are checked.
var params = []string{
	"action", "principal_id", "principal_kind", "app_id", "target_kind", "target_id",
	"involving", "since", "until", "before", "limit",
}

// ParseFilter reads the query parameters of GET /api/v1/audit: the filter,
// the `before` cursor ("" for the first page) and the page size. Errors are
// VALID_INVALID naming the parameter in details.field.
func ParseFilter(q url.Values) (Filter, string, int, error) {
	var unknown []string
	for k := range q {
		if !slices.Contains(params, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		quoted := make([]string, len(unknown))
		for i, k := range unknown {
			quoted[i] = strconv.Quote(k)
		}
		return Filter{}, "", 0, errcode.New(errcode.ValidInvalid,
			"unknown query parameter %s; known are %s", strings.Join(quoted, ", "), strings.Join(params, ", ")).
			WithDetail("field", unknown[0])
	}

	vals := make(map[string]string, len(q))
	for _, name := range params {
		vs := q[name]
		switch {
		case len(vs) == 0:
			continue
		case len(vs) > 1:
			return Filter{}, "", 0, errcode.Invalid(name, "%s is given %d times; give it at most once", name, len(vs))
		case vs[0] == "":
			return Filter{}, "", 0, errcode.Invalid(name, "%s is empty; leave it out to not filter on it", name)
		case len(vs[0]) > maxParamLen:
			return Filter{}, "", 0, errcode.Invalid(name, "%s is longer than %d bytes", name, maxParamLen)
		case strings.ContainsFunc(vs[0], isControl):
			return Filter{}, "", 0, errcode.Invalid(name, "%s contains a control character", name)
		}
		vals[name] = vs[0]
	}

	f := Filter{
		Action:        vals["action"],
		PrincipalID:   vals["principal_id"],
		PrincipalKind: vals["principal_kind"],
		AppID:         vals["app_id"],
		TargetKind:    vals["target_kind"],
		TargetID:      vals["target_id"],
		Involving:     vals["involving"],
	}
	switch f.PrincipalKind {
	case "", PrincipalUser, PrincipalToken, PrincipalSystem, PrincipalAnonymous:
	default:
		return Filter{}, "", 0, errcode.Invalid("principal_kind", "principal_kind %q is not one of %s, %s, %s, %s",
			f.PrincipalKind, PrincipalUser, PrincipalToken, PrincipalSystem, PrincipalAnonymous)
	}
	var err error
	if f.Since, err = parseTime("since", vals["since"]); err != nil {
		return Filter{}, "", 0, err
	}
	if f.Until, err = parseTime("until", vals["until"]); err != nil {
		return Filter{}, "", 0, err
	}
	if _, set := vals["until"]; set && !f.Until.After(time.Time{}) {
		// The zero time means "unbounded"; an until at or before it selects
		// nothing and would read as no bound at all.
		return Filter{}, "", 0, errcode.Invalid("until", "until must be after %s", time.Time{}.Format(time.RFC3339))
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return Filter{}, "", 0, errcode.Invalid("until", "until (%s) must be after since (%s)",
			f.Until.Format(time.RFC3339Nano), f.Since.Format(time.RFC3339Nano))
	}

	before := vals["before"]
	if before != "" && !ids.Valid(ids.Audit, before) {
		return Filter{}, "", 0, errcode.Invalid("before", "before %q is not an audit entry ID (aud_ and a ULID)", before)
	}

	limit := DefaultLimit
	if s, ok := vals["limit"]; ok {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil && isDigits(s):
			n = MaxLimit // too large for an int: clamped like any large value
		case err != nil:
			return Filter{}, "", 0, errcode.Invalid("limit", "limit %q is not an integer", s)
		case n < 1:
			return Filter{}, "", 0, errcode.Invalid("limit", "limit %d is below 1", n)
		}
		limit = min(n, MaxLimit)
	}
	return f, before, limit, nil
}

func parseTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		e := errcode.Invalid(name, "%s %q is not an RFC 3339 time such as 2006-01-02T15:04:05Z", name, s)
		if strings.Contains(s, " ") {
			e.WithRemedy("a + in a query string reads as a space; send the offset's + as %%2B")
		}
		return time.Time{}, e
	}
	return t.UTC(), nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func isDigits(s string) bool {
	s = strings.TrimPrefix(s, "+")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// Query returns up to limit entries that match f, newest (highest ID) first,
// with IDs below before when it is set, and whether more match beyond them.
// A limit below 1 means DefaultLimit; above MaxLimit, MaxLimit.
//
// Every filter but the times is an index of the table: the store walks the
// IDs that every filter's index holds (a leapfrog join: each index seeks to
// the others' position) and reads only entries that match them all, so a
// query costs about its page, however many entries are stored and however
// rare its matches. An action prefix is the union of the actions under it,
// involving the union of the principal and target indexes. Since and until
// bound the walk by ID (an entry's ID carries its time to the millisecond)
// and are then checked exactly.
func Query(r *raftstore.Reader, f Filter, before string, limit int) ([]Entry, bool) {
	if limit < 1 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	q := raftstore.Query{Reverse: true, Before: before, Limit: limit}
	one := func(index, key string) {
		if key != "" {
			q.Where = append(q.Where, []raftstore.Match{{Index: index, Key: key}})
		}
	}
	one("principal", f.PrincipalID)
	one("principal_kind", f.PrincipalKind)
	one("app", f.AppID)
	one("target_kind", f.TargetKind)
	one("target", f.TargetID)
	if x := f.Involving; x != "" {
		q.Where = append(q.Where, []raftstore.Match{{Index: "principal", Key: x}, {Index: "target", Key: x}})
	}
	if f.Action != "" {
		q.Where = append(q.Where, []raftstore.Match{{Index: "action", Key: f.Action, Prefix: true}})
	}
	if !f.Since.IsZero() || !f.Until.IsZero() {
		if !f.Since.IsZero() && f.Since.UnixMilli() > 0 {
			q.After = ids.Highest(ids.Audit, f.Since.Add(-time.Millisecond))
		}
		if !f.Until.IsZero() {
			if b := ids.Lowest(ids.Audit, f.Until.Add(time.Millisecond)); q.Before == "" || b < q.Before {
				q.Before = b
			}
		}
		q.Filter = func(v any) bool { return f.inTime(v.(*Entry)) }
	}
	items, more := Entries.List(r, q)
	out := make([]Entry, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out, more
}

// inTime reports whether e is within the filter's times.
func (f *Filter) inTime(e *Entry) bool {
	return (f.Since.IsZero() || !e.Time.Before(f.Since)) && (f.Until.IsZero() || e.Time.Before(f.Until))
}
