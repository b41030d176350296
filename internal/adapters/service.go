package adapters

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

// Sealer seals credentials (the keyring). Once Ready has returned, Seal
// writes nothing, so a store Update's build may call it.
type Sealer interface {
	Ready(ctx context.Context) error
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(sealed, aad []byte) ([]byte, error)
}

var _ Store = (*raftstore.Store)(nil)

// Deps are the service's collaborators.
type Deps struct {
	Store  Store
	Ring   Sealer
	Kinds  []Kind
	Now    func() time.Time
	Logger *slog.Logger
	// StartedAt is when this server started: GET /adapters reports it,
	// and a restart changes it.
	StartedAt time.Time
	// Dependents finds what the store records as depending on an adapter
	// (Delete refuses while anything does); nil finds nothing.
	Dependents DependentsFunc
	// Declared are the adapters declared at startup (the config file or
	// SVC_ADAPTERS), checked by New.
	Declared []Declared
}

// Service configures adapters, loads them at a server's start, reports
// them, and checks their health.
type Service struct {
	d     Deps
	kinds []Kind

	mu     sync.Mutex
	set    *Set // what this server loaded at its start
	closed bool
}

// New returns the adapters service over the kinds this build can run. It
// refuses a malformed kind list: that is a wiring mistake.
func New(d Deps) (*Service, error) {
	seen := map[string]bool{}
	defaults := map[string]bool{}
	for _, k := range d.Kinds {
		if !slices.Contains(Categories(), k.Category) || k.Name == "" || k.Open == nil {
			return nil, fmt.Errorf("adapters: malformed kind %s/%s", k.Category, k.Name)
		}
		if seen[k.Category+"/"+k.Name] {
			return nil, fmt.Errorf("adapters: kind %s/%s declared twice", k.Category, k.Name)
		}
		seen[k.Category+"/"+k.Name] = true
		if k.Default {
			if defaults[k.Category] || k.DefaultID == "" {
				return nil, fmt.Errorf("adapters: category %s needs exactly one default with an ID", k.Category)
			}
			defaults[k.Category] = true
		}
	}
	if err := checkDeclared(d.Kinds, d.Declared); err != nil {
		return nil, err
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{d: d, kinds: d.Kinds}, nil
}

func (s *Service) kind(category, name string) (Kind, bool) {
	for _, k := range s.kinds {
		if k.Category == category && k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Kinds lists the kinds this build can run, by category, then by name.
func (s *Service) Kinds() []Kind {
	out := slices.Clone(s.kinds)
	slices.SortFunc(out, func(a, b Kind) int { return strings.Compare(a.ListKey(), b.ListKey()) })
	for i := range out {
		out[i].Settings = slices.Clone(out[i].Settings)
		if out[i].Settings == nil {
			out[i].Settings = []Setting{}
		}
	}
	return out
}

// Loaded is one adapter as this server loaded it.
type Loaded struct {
	Adapter  Adapter
	Instance Instance // nil when it did not open
	Err      error    // why it did not open
	Virtual  bool     // not in the store: an embedded default or declared at startup
	Primary  bool     // the one its category uses by default
	// Origin is OriginAPI (stored), OriginDefault (an embedded default),
	// or where it was declared (OriginConfigFile, OriginEnvironment).
	Origin string
}

// Set is what a server loaded at its start.
type Set struct {
	StartedAt time.Time
	items     []*Loaded
	ready     bool
}

// Ready says whether the adapters have been loaded (a server loads them
// once its store has caught up).
func (s *Set) Ready() bool { return s.ready }

// Get returns a loaded adapter by ID.
func (s *Set) Get(id string) (*Loaded, bool) {
	for _, l := range s.items {
		if l.Adapter.ID == id {
			return l, true
		}
	}
	return nil, false
}

// Of returns the loaded adapters of a category, primary first.
func (s *Set) Of(category string) []*Loaded {
	var out []*Loaded
	for _, l := range s.items {
		if l.Adapter.Category == category {
			out = append(out, l)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Primary && !out[j].Primary })
	return out
}

// Primary returns the adapter a category uses by default.
func (s *Set) Primary(category string) (*Loaded, bool) {
	for _, l := range s.items {
		if l.Adapter.Category == category && l.Primary {
			return l, true
		}
	}
	return nil, false
}

// Close closes every instance that holds resources.
func (s *Set) Close() error {
	var errs []error
	for _, l := range s.items {
		if c, ok := l.Instance.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Load opens the declared adapters, the configured ones (but those a
// declaration overrides by ID) and the embedded defaults not configured
// otherwise, as this server's set until its next start. The primary
// adapter of a category (the one it uses by default, and the one new
// secrets go to) is, in this order: the declared one with primary: true;
// the first declared one not marked primary: false; the one configured
// through the API most recently; the embedded default; and, when the
// category has nothing else, the first declared one marked primary: false.
// An adapter that
// does not open is kept with its error: the server starts anyway, the
// adapter reports unhealthy, and what needs it answers
// ADAPTER_UNAVAILABLE.
func (s *Service) Load(ctx context.Context) *Set {
	stored := s.stored(s.d.Store.Read())
	set := &Set{StartedAt: s.d.StartedAt, ready: true}
	have := map[string]bool{}
	// The candidates for primary, by category, in the order of the rule.
	chosen, firstDeclared, newest, notPrimary := map[string]*Loaded{}, map[string]*Loaded{}, map[string]*Loaded{}, map[string]*Loaded{}
	for _, d := range s.d.Declared {
		l := s.open(ctx, d.adapter(), true, d.Credentials)
		l.Origin = d.Origin
		set.items = append(set.items, l)
		have[d.ID] = true
		switch {
		case d.Primary != nil && *d.Primary:
			chosen[d.Category] = l
		case d.Primary == nil && firstDeclared[d.Category] == nil:
			firstDeclared[d.Category] = l
		case d.Primary != nil && notPrimary[d.Category] == nil:
			notPrimary[d.Category] = l
		}
	}
	for _, a := range stored {
		if have[a.ID] {
			continue // a declaration overrides it
		}
		l := s.open(ctx, a, false, nil)
		l.Origin = OriginAPI
		set.items = append(set.items, l)
		have[a.ID] = true
		if n := newest[a.Category]; n == nil || a.UpdatedAt.After(n.Adapter.UpdatedAt) ||
			(a.UpdatedAt.Equal(n.Adapter.UpdatedAt) && a.ID > n.Adapter.ID) {
			newest[a.Category] = l
		}
	}
	defaults := map[string]*Loaded{}
	for _, k := range s.kinds {
		if !k.Default || have[k.DefaultID] {
			continue
		}
		l := s.open(ctx, Adapter{ID: k.DefaultID, Category: k.Category, Kind: k.Name, Settings: map[string]string{}}, true, nil)
		l.Origin = OriginDefault
		set.items = append(set.items, l)
		defaults[k.Category] = l
	}
	for _, c := range Categories() {
		for _, l := range []*Loaded{chosen[c], firstDeclared[c], newest[c], defaults[c], notPrimary[c]} {
			if l != nil {
				l.Primary = true
				break
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = set.Close()
		return set
	}
	s.set = set
	return set
}

// Current returns what this server loaded; before Load, an empty set that
// says it is not ready.
func (s *Service) Current() *Set { return s.loaded() }

// Close closes the instances this server loaded; a Load after it closes
// what it opens at once.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.set == nil {
		return nil
	}
	return s.set.Close()
}

// open opens an adapter: with plain, the credentials read at startup of a
// declared one; else its sealed credentials, opened.
func (s *Service) open(ctx context.Context, a Adapter, virtual bool, plain map[string]string) *Loaded {
	l := &Loaded{Adapter: a, Virtual: virtual}
	k, ok := s.kind(a.Category, a.Kind)
	if !ok {
		l.Err = errcode.New(errcode.AdapterUnavailable, "this build cannot run adapter kind %s/%s", a.Category, a.Kind)
		return l
	}
	creds := maps.Clone(plain)
	if creds == nil {
		creds = map[string]string{}
	}
	for name, sealed := range a.Credentials {
		plain, err := s.d.Ring.Open(sealed, credAAD(a.ID, name))
		if err != nil {
			l.Err = fmt.Errorf("open credential %s of adapter %s: %w", name, a.ID, err)
			return l
		}
		creds[name] = string(plain)
	}
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	inst, err := k.Open(octx, Config{ID: a.ID, Settings: withDefaults(k, a.Settings), Credentials: creds})
	if err != nil {
		l.Err = err
		s.d.Logger.Warn("adapter did not open", "adapter_id", a.ID, "category", a.Category, "kind", a.Kind, "err", errcode.MessageOf(err))
		return l
	}
	l.Instance = inst
	return l
}

func withDefaults(k Kind, settings map[string]string) map[string]string {
	out := map[string]string{}
	for _, st := range k.Settings {
		if !st.Credential && st.Default != "" {
			out[st.Name] = st.Default
		}
	}
	maps.Copy(out, settings)
	return out
}

func credAAD(adapterID, name string) []byte { return []byte("adapter/" + adapterID + "/" + name) }

func (s *Service) stored(r *raftstore.Reader) []Adapter {
	items, _ := Adapters.List(r, raftstore.Query{})
	out := make([]Adapter, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

func (s *Service) loaded() *Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		return &Set{StartedAt: s.d.StartedAt}
	}
	return s.set
}

// View is an adapter as the API shows it: settings, the names of the
// credentials that are set (never their values), live capabilities, and
// whether a configuration newer than the loaded one waits for a restart.
type View struct {
	AdapterID      string         `json:"adapter_id"`
	Category       string         `json:"category"`
	Kind           string         `json:"kind"`
	Config         map[string]any `json:"config"`
	CredentialsSet []string       `json:"credentials_set"`
	Capabilities   map[string]any `json:"capabilities"`
	Primary        bool           `json:"primary"`
	Builtin        bool           `json:"builtin"`
	// Origin is api (configured through the API), default (an embedded
	// default), config_file or environment (declared at startup: fixed
	// until the declaration changes and the server restarts).
	Origin string `json:"origin"`
	// CredentialSources say, for a declared adapter, where each set
	// credential is read from at startup ("file /path", "env NAME").
	CredentialSources map[string]string `json:"credential_sources,omitempty"`
	Loaded            bool              `json:"loaded"`
	Error             *string           `json:"error"`
	PendingRestart    bool              `json:"pending_restart"`
	Health            *Health           `json:"health"`
	// Deleted says the adapter was deleted after this server loaded it:
	// it stays loaded until the next restart (PendingRestart).
	Deleted   bool       `json:"deleted"`
	Revision  int64      `json:"revision"`
	CreatedAt *time.Time `json:"created_at"`
	UpdatedAt *time.Time `json:"updated_at"`
}

// List is GET /adapters.
type List struct {
	Items []View `json:"items"`
	// NextCursor resumes a page of Items (set by the API).
	NextCursor    string    `json:"next_cursor,omitempty"`
	RestartNeeded bool      `json:"restart_needed"`
	StartedAt     time.Time `json:"started_at"`
	// Loading is true until this server has loaded its adapters.
	Loading bool `json:"loading"`
}

// List reports the configured adapters and the embedded defaults.
func (s *Service) List() List {
	r := s.d.Store.Read()
	set := s.loaded()
	out := List{Items: []View{}, StartedAt: set.StartedAt, Loading: !set.ready}
	seen := map[string]bool{}
	for _, d := range s.d.Declared {
		a := d.adapter()
		v := s.view(r, a, set)
		v.CredentialsSet = slices.Sorted(maps.Keys(d.Credentials))
		if v.CredentialsSet == nil {
			v.CredentialsSet = []string{}
		}
		v.CredentialSources = d.Sources
		out.Items = append(out.Items, v)
		seen[d.ID] = true
	}
	for _, a := range s.stored(r) {
		if seen[a.ID] {
			continue // overridden by a declaration
		}
		v := s.view(r, a, set)
		l, ok := set.Get(a.ID)
		v.PendingRestart = set.ready && (!ok || l.Adapter.Revision != a.Revision)
		out.RestartNeeded = out.RestartNeeded || v.PendingRestart
		out.Items = append(out.Items, v)
		seen[a.ID] = true
	}
	for _, k := range s.kinds {
		if k.Default && !seen[k.DefaultID] {
			v := s.view(r, Adapter{ID: k.DefaultID, Category: k.Category, Kind: k.Name}, set)
			l, ok := set.Get(k.DefaultID)
			// A built-in adapter cannot be deleted, so a default this
			// server loaded from the store is still there; a virtual one
			// loaded as virtual is current.
			v.PendingRestart = ok && !l.Virtual
			out.RestartNeeded = out.RestartNeeded || v.PendingRestart
			out.Items = append(out.Items, v)
			seen[k.DefaultID] = true
		}
	}
	// Deleted since this server loaded them: still loaded, gone at the
	// next restart.
	for _, l := range set.items {
		if !seen[l.Adapter.ID] {
			v := s.view(r, l.Adapter, set)
			v.Deleted, v.PendingRestart = true, true
			out.RestartNeeded = true
			out.Items = append(out.Items, v)
		}
	}
	slices.SortFunc(out.Items, func(a, b View) int { return strings.Compare(a.ListKey(), b.ListKey()) })
	return out
}

// ListKey is an adapter's place in List (by category, the primary first,
// then by ID), unique among them: the cursor of its pages.
func (v View) ListKey() string {
	rank := 1
	if v.Primary {
		rank = 0
	}
	return fmt.Sprintf("%02d/%d/%s", categoryRank(v.Category), rank, v.AdapterID)
}

// ListKey is a kind's place in Kinds (by category, then by name), unique
// among them: the cursor of its pages.
func (k Kind) ListKey() string { return fmt.Sprintf("%02d/%s", categoryRank(k.Category), k.Name) }

// categoryRank is a category's place in Categories.
func categoryRank(c string) int {
	if i := slices.Index(Categories(), c); i >= 0 {
		return i
	}
	return len(Categories())
}

func (s *Service) view(r *raftstore.Reader, a Adapter, set *Set) View {
	k, _ := s.kind(a.Category, a.Kind)
	v := View{AdapterID: a.ID, Category: a.Category, Kind: a.Kind, Config: map[string]any{}, CredentialsSet: []string{},
		Builtin: k.Default && a.ID == k.DefaultID, Revision: a.Revision}
	for name, val := range withDefaults(k, a.Settings) {
		v.Config[name] = val
	}
	for name := range a.Credentials {
		v.CredentialsSet = append(v.CredentialsSet, name)
	}
	sort.Strings(v.CredentialsSet)
	if !a.CreatedAt.IsZero() {
		v.CreatedAt, v.UpdatedAt = &a.CreatedAt, &a.UpdatedAt
	}
	switch d, declared := s.declared(a.ID); {
	case declared:
		v.Origin = d.Origin
	case !a.CreatedAt.IsZero():
		v.Origin = OriginAPI
	default:
		v.Origin = OriginDefault
	}
	if l, ok := set.Get(a.ID); ok {
		v.Loaded, v.Primary = l.Instance != nil, l.Primary
		if l.Instance != nil {
			v.Capabilities = l.Instance.Capabilities()
		}
		if l.Err != nil {
			msg := errcode.MessageOf(l.Err)
			v.Error = &msg
		}
	}
	if h, _, ok := Healths.Get(r, a.ID); ok {
		v.Health = &h
	}
	return v
}

// Request configures an adapter: the one named by AdapterID; else, with
// New, another adapter of the kind; else the adapter of the category and
// kind (made when there is none; a built-in kind's under its well-known
// ID). Config and Credentials map a setting to its new value, or to nil to
// return it to its default (a credential: to remove it); settings and
// credentials not named keep their values.
type Request struct {
	AdapterID   string
	New         bool
	Category    string
	Kind        string
	Config      map[string]any
	Credentials map[string]*string
}

// Limits of settings.
const (
	maxSettingBytes = 16 << 10
	maxSettings     = 64
)

// Configure validates a configuration against its kind and stores it, with
// credentials sealed, an audit entry and the adapter.configured event. It
// applies at the next restart. created says whether a new adapter was made.
func (s *Service) Configure(ctx context.Context, req Request) (v View, created bool, err error) {
	if d, ok := s.declared(req.AdapterID); ok {
		return View{}, false, fixedAtStartup(d, "configured")
	}
	k, ok := s.kind(req.Category, req.Kind)
	if !ok {
		if !slices.Contains(Categories(), req.Category) {
			return View{}, false, errcode.Invalid("category", "unknown adapter category %q", req.Category).WithDetail("categories", Categories())
		}
		return View{}, false, errcode.Invalid("kind", "this build has no %s adapter of kind %q", req.Category, req.Kind).
			WithRemedy("GET /api/v1/adapters/kinds lists the kinds this build can run")
	}
	if d, ok := s.declared(k.DefaultID); ok && k.Default && req.AdapterID == "" {
		return View{}, false, fixedAtStartup(d, "configured")
	}
	settings, reset, err := normalize(k, req.Config)
	if err != nil {
		return View{}, false, err
	}
	if len(req.Credentials) > maxSettings {
		return View{}, false, errcode.Invalid("credentials", "too many credentials")
	}
	for name, val := range req.Credentials {
		st, ok := k.setting(name)
		if !ok || !st.Credential {
			return View{}, false, errcode.Invalid("credentials."+name, "%s/%s has no credential %q", k.Category, k.Name, name)
		}
		if val != nil && (len(*val) > maxSettingBytes || !utf8.ValidString(*val) || *val == "") {
			return View{}, false, errcode.Invalid("credentials."+name, "a credential is non-empty UTF-8 text of at most %d bytes; send null to remove it", maxSettingBytes)
		}
	}
	if len(req.Credentials) > 0 {
		if err := s.d.Ring.Ready(ctx); err != nil {
			return View{}, false, fmt.Errorf("seal credentials: %w", err)
		}
	}
	// A configuration made meanwhile is built upon: what this request does
	// not name keeps the values it set.
	var next Adapter
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) (ops []raftstore.Op, err error) {
		next, created, ops, err = s.configuration(ctx, r, req, k, settings, reset)
		return ops, err
	})
	if err != nil {
		return View{}, false, err
	}
	v = s.view(s.d.Store.Read(), next, s.loaded())
	v.PendingRestart = true
	return v, created, nil
}

// configuration builds Configure's change on the view r: the adapter as it
// will be, whether it is new, and the operations.
func (s *Service) configuration(ctx context.Context, r *raftstore.Reader, req Request, k Kind, settings map[string]string, reset []string) (Adapter, bool, []raftstore.Op, error) {
	old, meta, exists, err := s.target(r, req, k)
	if err != nil {
		return Adapter{}, false, nil, err
	}
	if d, declared := s.declared(old.ID); declared && exists {
		// The one adapter of the kind, found without adapter_id, is
		// overridden by a declaration.
		return Adapter{}, false, nil, fixedAtStartup(d, "configured")
	}
	now := s.d.Now()
	next := Adapter{ID: old.ID, Category: k.Category, Kind: k.Name, Settings: map[string]string{}, Credentials: map[string][]byte{},
		Revision: old.Revision + 1, CreatedAt: old.CreatedAt, UpdatedAt: now}
	maps.Copy(next.Settings, old.Settings)
	maps.Copy(next.Settings, settings)
	for _, name := range reset {
		delete(next.Settings, name)
	}
	if !exists {
		next.CreatedAt = now
		if k.Default {
			next.ID = k.DefaultID
		} else {
			next.ID = ids.NewAt(ids.Adapter, now)
		}
	}
	// Credentials not named keep their sealed values; one sent again with
	// the value it has is no change.
	maps.Copy(next.Credentials, old.Credentials)
	changed := false
	for name, val := range req.Credentials {
		kept, had := next.Credentials[name]
		if val == nil {
			if had {
				delete(next.Credentials, name)
				changed = true
			}
			continue
		}
		if had && s.holds(kept, credAAD(next.ID, name), *val) {
			continue
		}
		sealed, err := s.d.Ring.Seal(ctx, []byte(*val), credAAD(next.ID, name))
		if err != nil {
			return Adapter{}, false, nil, fmt.Errorf("seal credential %s: %w", name, err)
		}
		next.Credentials[name] = sealed
		changed = true
	}
	if err := checkRequired(k, next); err != nil {
		return Adapter{}, false, nil, err
	}
	if k.Validate != nil {
		if err := k.Validate(withDefaults(k, next.Settings), slices.Sorted(maps.Keys(next.Credentials))); err != nil {
			return Adapter{}, false, nil, err
		}
	}
	details := map[string]any{"category": next.Category, "kind": next.Kind, "credentials_changed": changed,
		"settings": slices.Sorted(maps.Keys(next.Settings)), "revision": next.Revision}
	return next, !exists, []raftstore.Op{
		Adapters.PutIf(&next, meta.ModifyIndex),
		audit.Record(ctx, now, "adapter.configure", "", audit.Target{Kind: "adapter", ID: next.ID}, details),
		events.Emit(ctx, now, "adapter.configured", nil, "adapter", next.ID, map[string]any{
			"category": next.Category, "kind": next.Kind, "credentials_changed": changed,
		}),
	}, nil
}

// holds says whether sealed opens to value (compared in constant time).
func (s *Service) holds(sealed, aad []byte, value string) bool {
	plain, err := s.d.Ring.Open(sealed, aad)
	return err == nil && subtle.ConstantTimeCompare(plain, []byte(value)) == 1
}

// target finds the stored adapter a request configures (exists false: a
// new one): the one AdapterID names, which must be of the request's
// category and kind (a built-in kind's well-known ID may be configured
// before it is stored); with New, none; for a built-in kind, its
// well-known adapter; else the one adapter of the category and kind,
// refusing to guess among several.
func (s *Service) target(r *raftstore.Reader, req Request, k Kind) (a Adapter, meta raftstore.Meta, exists bool, err error) {
	switch {
	case req.AdapterID != "" && req.New:
		return a, meta, false, errcode.Invalid("new", "new configures another adapter; adapter_id names one to change: send one or the other")
	case req.AdapterID != "":
		a, meta, exists = Adapters.Get(r, req.AdapterID)
		switch {
		case !exists && k.Default && req.AdapterID == k.DefaultID:
			return a, meta, false, nil
		case !exists:
			return a, meta, false, errcode.New(errcode.NotFound, "no adapter %s", req.AdapterID)
		case a.Category != req.Category || a.Kind != req.Kind:
			return a, meta, false, errcode.Invalid("kind", "adapter %s is the %s adapter of kind %s; an adapter's category and kind cannot change", a.ID, a.Category, a.Kind).
				WithRemedy("configure a new adapter of the other kind (without adapter_id), then DELETE /api/v1/adapters/%s once nothing depends on it", a.ID)
		}
		return a, meta, true, nil
	case req.New && k.Default:
		return a, meta, false, errcode.Invalid("new", "the %s adapter of kind %s is built in and exists once; configure it without new", k.Category, k.Name)
	case req.New:
		return a, meta, false, nil
	case k.Default:
		a, meta, exists = Adapters.Get(r, k.DefaultID)
		return a, meta, exists, nil
	}
	items, _ := Adapters.List(r, raftstore.Query{Index: "category", Key: req.Category,
		Filter: func(v any) bool { return v.(*Adapter).Kind == k.Name }})
	switch len(items) {
	case 0:
		return a, meta, false, nil
	case 1:
		return items[0].Value, items[0].Meta, true, nil
	}
	idList := make([]string, len(items))
	for i, it := range items {
		idList[i] = it.Value.ID
	}
	return a, meta, false, errcode.Invalid("adapter_id", "there are %d %s adapters of kind %s; name the one to change with adapter_id, or send new: true to add another", len(items), k.Category, k.Name).
		WithDetail("adapter_ids", idList)
}

// normalize checks settings against the kind: known, not credentials,
// scalar; numbers and booleans become their text; null (reset lists it)
// returns a setting to its default.
func normalize(k Kind, in map[string]any) (set map[string]string, reset []string, err error) {
	if len(in) > maxSettings {
		return nil, nil, errcode.Invalid("config", "too many settings")
	}
	out := map[string]string{}
	for name, raw := range in {
		st, ok := k.setting(name)
		if !ok {
			return nil, nil, errcode.Invalid("config."+name, "%s/%s has no setting %q", k.Category, k.Name, name).
				WithRemedy("GET /api/v1/adapters/kinds lists each kind's settings")
		}
		if st.Credential {
			return nil, nil, errcode.Invalid("config."+name, "%q is a credential: send it in credentials, which are stored encrypted and never shown", name)
		}
		var val string
		switch x := raw.(type) {
		case nil:
			reset = append(reset, name)
			continue
		case string:
			val = x
		case bool:
			val = strconv.FormatBool(x)
		case float64:
			val = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			return nil, nil, errcode.Invalid("config."+name, "setting %q must be a string, number or boolean", name)
		}
		if len(val) > maxSettingBytes || !utf8.ValidString(val) {
			return nil, nil, errcode.Invalid("config."+name, "setting %q must be UTF-8 text of at most %d bytes", name, maxSettingBytes)
		}
		out[name] = val
	}
	return out, reset, nil
}

func checkRequired(k Kind, a Adapter) error {
	var missing []string
	for _, st := range k.Settings {
		if !st.Required {
			continue
		}
		if st.Credential {
			if _, ok := a.Credentials[st.Name]; !ok {
				missing = append(missing, st.Name)
			}
		} else if a.Settings[st.Name] == "" && st.Default == "" {
			missing = append(missing, st.Name)
		}
	}
	if len(missing) > 0 {
		return errcode.Invalid(missing[0], "%s/%s needs %v", k.Category, k.Name, missing).WithDetail("missing", missing)
	}
	return nil
}

// Reseal re-seals every stored credential under the keyring's current key,
// in one write; an adapter configured meanwhile is re-sealed as it is then.
func (s *Service) Reseal(ctx context.Context) (int, error) {
	if err := s.d.Ring.Ready(ctx); err != nil {
		return 0, err
	}
	n := 0
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		items, _ := Adapters.List(r, raftstore.Query{})
		var ops []raftstore.Op
		n = 0
		for _, it := range items {
			a := it.Value
			if len(a.Credentials) == 0 {
				continue
			}
			next := a
			next.Credentials = map[string][]byte{}
			for name, sealed := range a.Credentials {
				plain, err := s.d.Ring.Open(sealed, credAAD(a.ID, name))
				if err != nil {
					return nil, fmt.Errorf("re-seal credential %s of %s: %w", name, a.ID, err)
				}
				if next.Credentials[name], err = s.d.Ring.Seal(ctx, plain, credAAD(a.ID, name)); err != nil {
					return nil, err
				}
			}
			ops = append(ops, Adapters.PutIf(&next, it.Meta.ModifyIndex))
			n += len(a.Credentials)
		}
		return ops, nil
	})
	if err != nil {
		return 0, fmt.Errorf("re-seal adapter credentials: %w", err)
	}
	return n, nil
}
