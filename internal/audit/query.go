package audit

import (
	"iter"
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

// match reports whether e passes every filter of f.
func (f *Filter) match(e *Entry) bool {
	return (f.Action == "" || strings.HasPrefix(e.Action, f.Action)) &&
		(f.PrincipalID == "" || e.PrincipalID == f.PrincipalID) &&
		(f.PrincipalKind == "" || e.PrincipalKind == f.PrincipalKind) &&
		(f.AppID == "" || is(e.AppID, f.AppID)) &&
		(f.TargetKind == "" || is(e.TargetKind, f.TargetKind)) &&
		(f.TargetID == "" || is(e.TargetID, f.TargetID)) &&
		(f.Involving == "" || e.PrincipalID == f.Involving || is(e.TargetID, f.Involving)) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since)) &&
		(f.Until.IsZero() || e.Time.Before(f.Until))
}

func is(p *string, s string) bool { return p != nil && *p == s }

// Query returns up to limit entries that match f, newest (highest ID) first,
// with IDs below before when it is set, and whether more match beyond them.
// A limit below 1 means DefaultLimit; above MaxLimit, MaxLimit.
//
// # Plans
//
// Every way of answering walks rows newest first and keeps those that match
// f: the ID index from before down; the principal, app or target index at
// the filter's key; for involving, the principal and target indexes at its
// key merged by ID; for an action prefix, the action index at each distinct
// action under the prefix, merged by ID. A walk stops at limit+1 matches or
// at its end. Secondary index walks cannot seek, so with a before cursor
// they step over the key's newer rows first.
//
// Which walk is cheapest depends on data the store keeps no statistics for
// (how many rows a key has, how many of them are newer than before), so when
// there are several, Query runs them side by side as coroutines, always
// stepping the one that has visited the fewest rows, and answers with the
// first to finish: every walk yields the same sequence of matches, so any
// finished walk is the answer, and the rows visited are at most the number
// of walks times those of the cheapest. The ID walk is left out when there
// is no cursor and a single-key walk exists, which then visits a subset of
// its rows in the same order. The merged walk of an action prefix that spans
// several actions takes index lookups to set up, so it joins only when the
// race runs long (see lateDensity).
//
// Since and until only filter: Entry.Time is not the ID's time, so they
// cannot bound a walk. A query whose only filters are unindexed (times,
// kinds) and that matches little visits the whole table below before.
func Query(r *raftstore.Reader, f Filter, before string, limit int) ([]Entry, bool) {
	if limit < 1 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)

	plans, later, none := planQuery(r, &f, before)
	if none {
		return []Entry{}, false
	}
	var (
		found []*Entry
		more  bool
	)
	if len(plans) == 1 && len(plans[0]) == 1 && later == nil {
		found, more = plans[0][0].run(r, &f, limit)
	} else {
		found, more = race(r, &f, plans, later, limit)
	}
	out := make([]Entry, len(found))
	for i, e := range found {
		out[i] = *e
	}
	return out, more
}

// walk is a walk of one index newest first: the ID index from before down,
// or the rows of one key of a secondary index.
type walk struct {
	index, key string // index "" is the ID index
	before     string
}

// plan is one way of answering: one walk, or several merged by ID.
type plan []walk

// Bounds of planning.
const (
	// maxProbes bounds the index lookups that list the distinct actions
	// under an action prefix.
	maxProbes = 256
	// maxMerge bounds the actions merged for a prefix; a wider prefix
	// matches so much that the ID walk finds its matches soon.
	maxMerge = 16
	// lateDensity: the plan of an action prefix that spans several actions
	// costs up to maxProbes lookups to build, so it joins a race only once
	// the other plans have visited lateDensity rows per row asked for
	// without finishing, that is when matches look sparser than one in
	// lateDensity.
	lateDensity = 8
	// tick is the number of rows without a match after which a walk in a
	// race yields to the others.
	tick = 32
)

// planQuery returns the ways of answering f, or none when an index shows
// that nothing matches. later, if not nil, builds one more plan, which
// costs more to build than the others (see lateDensity); it returns false
// if it gives up.
func planQuery(r *raftstore.Reader, f *Filter, before string) (plans []plan, later func() (plan, bool), none bool) {
	single := false
	add := func(index, key string) {
		plans = append(plans, plan{{index: index, key: key, before: before}})
		single = true
	}
	if f.PrincipalID != "" {
		add("principal", f.PrincipalID)
	}
	if f.TargetID != "" {
		add("target", f.TargetID)
	}
	if f.AppID != "" {
		add("app", f.AppID)
	}
	if x := f.Involving; x != "" && x != f.PrincipalID && x != f.TargetID {
		plans = append(plans, plan{
			{index: "principal", key: x, before: before},
			{index: "target", key: x, before: before},
		})
	}
	if f.Action != "" && !strings.ContainsRune(f.Action, 0) {
		lo, ok := lowestAction(r, f.Action)
		switch {
		case !ok:
			return nil, nil, true
		case lo == highestAction(r, f.Action):
			add("action", lo)
		default:
			later = func() (plan, bool) {
				actions, ok := actionsUnder(r, f.Action)
				if !ok || len(actions) > maxMerge {
					return nil, false
				}
				p := make(plan, len(actions))
				for i, a := range actions {
					p[i] = walk{index: "action", key: a, before: before}
				}
				return p, true
			}
		}
	}
	if before != "" || !single {
		plans = append(plans, plan{{before: before}})
	}
	return plans, later, false
}

// lowestAction returns the lowest action under a prefix, if any.
func lowestAction(r *raftstore.Reader, prefix string) (string, bool) {
	e, _, ok := Entries.First(r, "action_prefix", prefix)
	return e.Action, ok
}

// highestAction returns the highest action under a prefix that has one.
func highestAction(r *raftstore.Reader, prefix string) string {
	items, _ := Entries.List(r, raftstore.Query{Index: "action", Key: prefix, Prefix: true, Reverse: true, Limit: 1})
	return items[0].Value.Action
}

// actionsUnder returns the distinct actions of stored entries that start
// with prefix, or false if finding them takes more than maxProbes lookups.
// Each step looks up the lowest and highest action under a prefix; if they
// differ it descends into each next byte between them after their common
// prefix, so the lookups grow with the branching of the actions, not with
// the number of entries.
func actionsUnder(r *raftstore.Reader, prefix string) ([]string, bool) {
	var out []string
	probes := 0
	lowest := func(p string) (string, bool) {
		probes++
		return lowestAction(r, p)
	}
	highest := func(p string) string {
		probes++
		return highestAction(r, p)
	}
	var under func(p string) bool
	under = func(p string) bool {
		if probes+2 > maxProbes {
			return false
		}
		lo, ok := lowest(p)
		if !ok {
			return true
		}
		hi := highest(p)
		if lo == hi {
			out = append(out, lo)
			return true
		}
		q := hi[:commonPrefix(lo, hi)] // lo < hi, so hi is longer than q
		from := byte(1)
		if len(lo) > len(q) {
			from = lo[len(q)]
		} else {
			out = append(out, lo) // lo is q itself
		}
		for c := int(from); c <= int(hi[len(q)]); c++ {
			if !under(q + string([]byte{byte(c)})) {
				return false
			}
		}
		return true
	}
	if !under(prefix) {
		return nil, false
	}
	return out, true
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// query is the store query of the walk. Secondary walks skip rows at or
// above before themselves, so that stepping over them counts as work in a
// race; the ID walk seeks to before.
func (w walk) query() raftstore.Query {
	if w.index == "" {
		return raftstore.Query{Reverse: true, Before: w.before}
	}
	return raftstore.Query{Index: w.index, Key: w.key, Reverse: true}
}

// run returns the first limit matches of the walk and whether there are
// more, stopping at the match past limit.
func (w walk) run(r *raftstore.Reader, f *Filter, limit int) ([]*Entry, bool) {
	var found []*Entry
	more := false
	w.each(r, f, new(int), func(e *Entry) bool {
		if e == nil {
			return true
		}
		if len(found) == limit {
			more = true
			return false
		}
		found = append(found, e)
		return true
	})
	return found, more
}

// each walks the rows and calls fn with every match, and with nil after
// every tick rows without one, until fn returns false or the walk ends. It
// adds the rows it visits to *work. The entries are the store's: never
// modify them.
func (w walk) each(r *raftstore.Reader, f *Filter, work *int, fn func(*Entry) bool) {
	q := w.query()
	// List stops at the second row Filter keeps when Limit is 1: Filter
	// keeps nothing until fn asks to stop, and then everything.
	q.Limit = 1
	stopped := false
	misses := 0
	q.Filter = func(v any) bool {
		if stopped {
			return true
		}
		e := v.(*Entry)
		*work++
		var cont bool
		if (w.index != "" && w.before != "" && e.ID >= w.before) || !f.match(e) {
			if misses++; misses < tick {
				return false
			}
			misses = 0
			cont = fn(nil)
		} else {
			misses = 0
			cont = fn(e)
		}
		stopped = !cont
		return stopped
	}
	Entries.List(r, q)
}

// cursor steps through the matches of a plan: a match, nil after a bounded
// amount of work without one, or false at the end.
type cursor interface {
	next() (*Entry, bool)
	close()
}

// pull is a cursor over one walk, run as a coroutine.
type pull struct {
	next_ func() (*Entry, bool)
	stop  func()
}

func (p *pull) next() (*Entry, bool) { return p.next_() }
func (p *pull) close()               { p.stop() }

func newPull(r *raftstore.Reader, f *Filter, w walk, work *int) *pull {
	next, stop := iter.Pull(iter.Seq[*Entry](func(yield func(*Entry) bool) { w.each(r, f, work, yield) }))
	return &pull{next_: next, stop: stop}
}

// merge is a cursor over the union of walks, each newest first, that yields
// an entry found by several of them once.
type merge struct {
	subs  []cursor
	heads []*Entry
	ended []bool
}

func (m *merge) next() (*Entry, bool) {
	for i, c := range m.subs {
		if m.heads[i] != nil || m.ended[i] {
			continue
		}
		e, ok := c.next()
		switch {
		case !ok:
			m.ended[i] = true
		case e == nil:
			return nil, true // work without a match: let the other plans run
		default:
			m.heads[i] = e
		}
	}
	var top *Entry
	for _, h := range m.heads {
		if h != nil && (top == nil || h.ID > top.ID) {
			top = h
		}
	}
	if top == nil {
		return nil, false
	}
	for i, h := range m.heads {
		if h != nil && h.ID == top.ID {
			m.heads[i] = nil
		}
	}
	return top, true
}

func (m *merge) close() {
	for _, c := range m.subs {
		c.close()
	}
}

// race steps the plans, always the one that has visited the fewest rows so
// far, and answers with the first to reach limit+1 matches or its end. The
// plan later builds joins when the others have visited lateDensity rows per
// row asked for.
func race(r *raftstore.Reader, f *Filter, plans []plan, later func() (plan, bool), limit int) ([]*Entry, bool) {
	var (
		cursors []cursor
		work    []*int // rows visited by each plan
		found   [][]*Entry
	)
	start := func(p plan) {
		n := new(int)
		work, found = append(work, n), append(found, nil)
		if len(p) == 1 {
			cursors = append(cursors, newPull(r, f, p[0], n))
			return
		}
		m := &merge{heads: make([]*Entry, len(p)), ended: make([]bool, len(p))}
		for _, w := range p {
			m.subs = append(m.subs, newPull(r, f, w, n))
		}
		cursors = append(cursors, m)
	}
	for _, p := range plans {
		start(p)
	}
	defer func() {
		for _, c := range cursors {
			c.close()
		}
	}()
	for {
		i := 0
		for j := range work {
			if *work[j] < *work[i] {
				i = j
			}
		}
		if later != nil && *work[i] >= lateDensity*(limit+1) {
			if p, ok := later(); ok {
				start(p)
				i = len(cursors) - 1
			}
			later = nil
		}
		e, ok := cursors[i].next()
		switch {
		case !ok:
			return found[i], false
		case e != nil:
			if len(found[i]) == limit {
				return found[i], true
			}
			found[i] = append(found[i], e)
		}
	}
}
