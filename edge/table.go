package edge

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Table is the in-process route table: the builtin routes adapter
// (RoutesKind). Whoever knows where apps run (cmd/svc, from the
// scheduler) replaces its whole content with Replace; lookups read an
// immutable snapshot through one atomic load and take no lock, so a request
// never sees a half-built table.
type Table struct {
	cur atomic.Pointer[snapshot]
	mu  sync.Mutex // serializes Replace; readers never take it
}

var _ RouteTable = (*Table)(nil)

// snapshot is one content of the table. It never changes once published.
type snapshot struct {
	routes []Route        // sorted by AppID
	bySlug map[string]int // lower-cased slug -> index in routes
	byPort map[int]int    // host port -> index in routes
	change chan struct{}  // closed when a later snapshot replaces this one
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{}
	t.cur.Store(newSnapshot(nil))
	return t
}

func newSnapshot(routes []Route) *snapshot {
	s := &snapshot{routes: routes, bySlug: make(map[string]int, len(routes)), byPort: make(map[int]int, len(routes)), change: make(chan struct{})}
	for i, r := range routes {
		if slug := strings.ToLower(r.Slug); slug != "" {
			if _, dup := s.bySlug[slug]; !dup {
				s.bySlug[slug] = i
			}
		}
		if r.Port > 0 {
			if _, dup := s.byPort[r.Port]; !dup {
				s.byPort[r.Port] = i
			}
		}
	}
	return s
}

// Replace makes routes the table's whole content and reports whether it
// changed. The table keeps its own copy. Of two routes with the same slug
// or port, the one whose app ID sorts first wins (the store keeps both
// unique, so this only settles a transient overlap).
func (t *Table) Replace(routes []Route) bool {
	next := slices.Clone(routes)
	slices.SortStableFunc(next, func(a, b Route) int { return cmp.Compare(a.AppID, b.AppID) })
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.cur.Load()
	if slices.Equal(prev.routes, next) {
		return false
	}
	if len(next) == 0 {
		next = nil
	}
	t.cur.Store(newSnapshot(next))
	close(prev.change)
	return true
}

// BySlug returns the route of the app with this slug, in any case.
func (t *Table) BySlug(slug string) (Route, bool) {
	s := t.cur.Load()
	i, ok := s.bySlug[strings.ToLower(slug)]
	if !ok {
		return Route{}, false
	}
	return s.routes[i], true
}

// ByPort returns the route of the app holding this host port.
func (t *Table) ByPort(port int) (Route, bool) {
	s := t.cur.Load()
	i, ok := s.byPort[port]
	if !ok {
		return Route{}, false
	}
	return s.routes[i], true
}

// All returns every route, sorted by app ID.
func (t *Table) All() []Route { return slices.Clone(t.cur.Load().routes) }

// Changed returns a channel closed when the table's content next changes.
func (t *Table) Changed() <-chan struct{} { return t.cur.Load().change }
