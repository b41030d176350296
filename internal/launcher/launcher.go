// Package launcher owns each person's launcher: the apps they can open
// (GET /me/apps), their favorites, and their named sections (an app in at
// most one section per person). It grants nothing: which apps a person can
// open is decided by the data-plane grants of package identity.
//
// It must not touch HTTP or adapters.
package launcher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// Favorite pins an app in a person's launcher.
type Favorite struct {
	ID        string    `json:"id"` // <owner>/<app id>
	Owner     string    `json:"owner"`
	AppID     string    `json:"app_id"`
	CreatedAt time.Time `json:"created_at"`
}

// Section is a person's named, collapsible group of apps.
type Section struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	Name      string    `json:"name"`
	Position  int       `json:"position"`
	CreatedAt time.Time `json:"created_at"`
}

// Filing puts an app into one of its owner's sections.
type Filing struct {
	ID        string `json:"id"` // <owner>/<app id>
	Owner     string `json:"owner"`
	AppID     string `json:"app_id"`
	SectionID string `json:"section_id"`
}

// The tables.
var (
	Favorites = &raftstore.Table[Favorite]{
		Name: "favorites",
		ID:   func(f *Favorite) string { return f.ID },
		Indexes: []raftstore.Index[Favorite]{
			{Name: "owner", Key: func(f *Favorite) (string, bool) { return f.Owner, true }},
			{Name: "app", Key: func(f *Favorite) (string, bool) { return f.AppID, true }},
		},
	}
	Sections = &raftstore.Table[Section]{
		Name: "sections",
		ID:   func(s *Section) string { return s.ID },
		Indexes: []raftstore.Index[Section]{
			{Name: "owner", Key: func(s *Section) (string, bool) { return s.Owner, true }},
			{Name: "owner_name", Unique: true, Key: func(s *Section) (string, bool) {
				return raftstore.Key(s.Owner, strings.ToLower(s.Name)), true
			}},
		},
	}
	Filings = &raftstore.Table[Filing]{
		Name: "section_filings",
		ID:   func(f *Filing) string { return f.ID },
		Indexes: []raftstore.Index[Filing]{
			{Name: "owner", Key: func(f *Filing) (string, bool) { return f.Owner, true }},
			{Name: "section", Key: func(f *Filing) (string, bool) { return f.SectionID, true }},
			{Name: "app", Key: func(f *Filing) (string, bool) { return f.AppID, true }},
		},
	}
)

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Favorites, Sections, Filings} }

// Limits.
const (
	MaxSections    = 100
	MaxSectionName = 60
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Service reads and changes launchers.
type Service struct {
	store Store
	now   func() time.Time
}

// NewService returns the launcher service.
func NewService(store Store, now func() time.Time) *Service { return &Service{store: store, now: now} }

// owner is whose launcher a caller has: its account (also through a
// delegated token), or a service token's own.
func owner(c authz.Caller) string {
	if c.Principal.UserID != "" {
		return c.Principal.UserID
	}
	return c.Principal.ID
}

// Summary is an app as a launcher shows it.
type Summary struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Slug          string     `json:"slug"`
	State         string     `json:"state"`
	URL           *string    `json:"url"`
	IconUpdatedAt *time.Time `json:"icon_updated_at"`
}

// Entry is one app of a launcher.
type Entry struct {
	App       Summary `json:"app"`
	Favorite  bool    `json:"favorite"`
	SectionID *string `json:"section_id"`
	// Passcode says the app is open to everyone behind a passcode the
	// caller has still to give.
	Passcode bool `json:"passcode"`
}

// View is GET /me/apps.
type View struct {
	Items []Entry `json:"items"`
	// NextCursor resumes a page of Items (set by the API); every page has
	// all the sections.
	NextCursor string    `json:"next_cursor,omitempty"`
	Sections   []Section `json:"sections"`
}

// Apps returns the apps the caller can open, favorites first, then by name,
// with the caller's sections by position.
func (s *Service) Apps(c authz.Caller) View {
	r := s.store.Read()
	me := owner(c)
	favs := map[string]bool{}
	fs, _ := Favorites.List(r, raftstore.Query{Index: "owner", Key: me})
	for _, f := range fs {
		favs[f.Value.AppID] = true
	}
	filed := map[string]string{}
	fl, _ := Filings.List(r, raftstore.Query{Index: "owner", Key: me})
	for _, f := range fl {
		filed[f.Value.AppID] = f.Value.SectionID
	}
	v := View{Items: []Entry{}, Sections: s.sections(r, me)}
	all, _ := apps.Apps.List(r, raftstore.Query{})
	for _, it := range all {
		a := it.Value
		grants := identity.OpenGrants(r, a.ID, c.Principal)
		if len(grants) == 0 {
			continue
		}
		e := Entry{App: summary(a), Favorite: favs[a.ID], Passcode: true}
		for _, g := range grants {
			if !g.Everyone || !g.Grant.Passcode {
				e.Passcode = false
			}
		}
		if sec, ok := filed[a.ID]; ok {
			e.SectionID = &sec
		}
		v.Items = append(v.Items, e)
	}
	slices.SortFunc(v.Items, func(a, b Entry) int { return strings.Compare(a.ListKey(), b.ListKey()) })
	return v
}

// ListKey is an entry's place in the launcher (favorites first, then by
// name in any case, then by app ID), unique among its entries: the cursor
// of the launcher's pages.
func (e Entry) ListKey() string {
	rank := "1"
	if e.Favorite {
		rank = "0"
	}
	return rank + strings.ToLower(e.App.Name) + "\x00" + e.App.ID
}

func summary(a apps.App) Summary {
	return Summary{ID: a.ID, Name: a.Name, Slug: a.Slug, State: a.State, URL: a.URL, IconUpdatedAt: a.IconUpdatedAt}
}

func (s *Service) sections(r *raftstore.Reader, me string) []Section {
	items, _ := Sections.List(r, raftstore.Query{Index: "owner", Key: me})
	out := make([]Section, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	slices.SortStableFunc(out, func(a, b Section) int { return a.Position - b.Position })
	return out
}

// openable is NOT_FOUND unless the caller can open the app.
func openable(r *raftstore.Reader, c authz.Caller, appID string) error {
	if !apps.Exists(r, appID) || len(identity.OpenGrants(r, appID, c.Principal)) == 0 {
		return errcode.New(errcode.NotFound, "no app %s that you can open", appID)
	}
	return nil
}

func rowID(me, appID string) string { return me + "/" + appID }

// Favor pins an app the caller can open.
func (s *Service) Favor(ctx context.Context, c authz.Caller, appID string) error {
	me := owner(c)
	return s.update(ctx, "pin a favorite", func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if err := openable(r, c, appID); err != nil {
			return nil, err
		}
		if _, _, ok := Favorites.Get(r, rowID(me, appID)); ok {
			return nil, nil // already a favorite: nothing changes, nothing to audit
		}
		now := s.now()
		return []raftstore.Op{
			Favorites.PutIf(&Favorite{ID: rowID(me, appID), Owner: me, AppID: appID, CreatedAt: now}, 0),
			audit.Record(ctx, now, "favorite.create", appID, audit.Target{Kind: "app", ID: appID}, nil),
		}, nil
	})
}

// Unfavor unpins an app.
func (s *Service) Unfavor(ctx context.Context, c authz.Caller, appID string) error {
	return s.update(ctx, "unpin a favorite", func(r *raftstore.Reader) ([]raftstore.Op, error) {
		_, meta, ok := Favorites.Get(r, rowID(owner(c), appID))
		if !ok {
			return nil, errcode.New(errcode.NotFound, "app %s is not among your favorites", appID)
		}
		return []raftstore.Op{
			Favorites.DeleteIf(rowID(owner(c), appID), meta.ModifyIndex),
			audit.Record(ctx, s.now(), "favorite.delete", appID, audit.Target{Kind: "app", ID: appID}, nil),
		}, nil
	})
}

func checkSectionName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxSectionName ||
		strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", errcode.Invalid("name", "a section's name is 1 to %d characters of text", MaxSectionName)
	}
	return name, nil
}

// CreateSection adds a section at the end of the caller's list. A name is
// unique among a person's sections, whatever its case.
func (s *Service) CreateSection(ctx context.Context, c authz.Caller, name string) (Section, error) {
	name, err := checkSectionName(name)
	if err != nil {
		return Section{}, err
	}
	me := owner(c)
	var sec Section
	err = s.update(ctx, "create a section", func(r *raftstore.Reader) ([]raftstore.Op, error) {
		mine := s.sections(r, me)
		if len(mine) >= MaxSections {
			return nil, errcode.New(errcode.StateInvalid, "at most %d sections", MaxSections)
		}
		pos := 0
		for _, x := range mine {
			pos = max(pos, x.Position+1)
		}
		now := s.now()
		sec = Section{ID: ids.NewAt(ids.Section, now), Owner: me, Name: name, Position: pos, CreatedAt: now}
		return []raftstore.Op{
			Sections.Insert(&sec),
			audit.Record(ctx, now, "section.create", "", audit.Target{Kind: "section", ID: sec.ID}, map[string]any{"name": name}),
		}, nil
	})
	if err != nil {
		return Section{}, err
	}
	return sec, nil
}

// mine returns one of the caller's sections; another person's is NOT_FOUND.
func mine(r *raftstore.Reader, c authz.Caller, id string) (Section, raftstore.Meta, error) {
	sec, meta, ok := Sections.Get(r, id)
	if !ok || sec.Owner != owner(c) {
		return Section{}, raftstore.Meta{}, errcode.New(errcode.NotFound, "no section %s", id)
	}
	return sec, meta, nil
}

// UpdateSection renames a section and, with position, moves it. Changes
// made meanwhile are kept but for what this one sets.
func (s *Service) UpdateSection(ctx context.Context, c authz.Caller, id string, name *string, position *int) (Section, error) {
	if name != nil {
		n, err := checkSectionName(*name)
		if err != nil {
			return Section{}, err
		}
		name = &n
	}
	if position != nil && (*position < 0 || *position > 10*MaxSections) {
		return Section{}, errcode.Invalid("position", "position must be from 0 to %d", 10*MaxSections)
	}
	var sec Section
	err := s.update(ctx, "change a section", func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var meta raftstore.Meta
		var err error
		if sec, meta, err = mine(r, c, id); err != nil {
			return nil, err
		}
		if name != nil {
			sec.Name = *name
		}
		if position != nil {
			sec.Position = *position
		}
		return []raftstore.Op{
			Sections.PutIf(&sec, meta.ModifyIndex),
			audit.Record(ctx, s.now(), "section.update", "", audit.Target{Kind: "section", ID: id}, map[string]any{"name": sec.Name, "position": sec.Position}),
		}, nil
	})
	if err != nil {
		return Section{}, err
	}
	return sec, nil
}

// DeleteSection removes a section; its apps return to the ungrouped list.
func (s *Service) DeleteSection(ctx context.Context, c authz.Caller, id string) error {
	return s.update(ctx, "delete a section", func(r *raftstore.Reader) ([]raftstore.Op, error) {
		_, meta, err := mine(r, c, id)
		if err != nil {
			return nil, err
		}
		ops := []raftstore.Op{Sections.DeleteIf(id, meta.ModifyIndex)}
		fl, _ := Filings.List(r, raftstore.Query{Index: "section", Key: id})
		for _, f := range fl {
			ops = append(ops, Filings.DeleteIf(f.Value.ID, f.Meta.ModifyIndex))
		}
		return append(ops, audit.Record(ctx, s.now(), "section.delete", "", audit.Target{Kind: "section", ID: id}, nil)), nil
	})
}

// File puts an app the caller can open into one of its sections, moving it
// out of any other.
func (s *Service) File(ctx context.Context, c authz.Caller, sectionID, appID string) error {
	me := owner(c)
	return s.update(ctx, "file an app", func(r *raftstore.Reader) ([]raftstore.Op, error) {
		_, secMeta, err := mine(r, c, sectionID)
		if err != nil {
			return nil, err
		}
		if err := openable(r, c, appID); err != nil {
			return nil, err
		}
		old, meta, ok := Filings.Get(r, rowID(me, appID))
		if ok && old.SectionID == sectionID {
			return nil, nil
		}
		return []raftstore.Op{
			Sections.Check(sectionID, secMeta.ModifyIndex),
			Filings.PutIf(&Filing{ID: rowID(me, appID), Owner: me, AppID: appID, SectionID: sectionID}, meta.ModifyIndex),
			audit.Record(ctx, s.now(), "section.app.add", appID, audit.Target{Kind: "section", ID: sectionID}, nil),
		}, nil
	})
}

// Unfile takes an app out of a section.
func (s *Service) Unfile(ctx context.Context, c authz.Caller, sectionID, appID string) error {
	return s.update(ctx, "take an app out of a section", func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if _, _, err := mine(r, c, sectionID); err != nil {
			return nil, err
		}
		f, meta, ok := Filings.Get(r, rowID(owner(c), appID))
		if !ok || f.SectionID != sectionID {
			return nil, errcode.New(errcode.NotFound, "app %s is not in section %s", appID, sectionID)
		}
		return []raftstore.Op{
			Filings.DeleteIf(f.ID, meta.ModifyIndex),
			audit.Record(ctx, s.now(), "section.app.remove", appID, audit.Target{Kind: "section", ID: sectionID}, nil),
		}, nil
	})
}

// update makes one change through the store's Update: a change that raced
// another is built again on a newer view, so it is applied, not refused. A
// section name the person already has is refused (STATE_INVALID).
func (s *Service) update(ctx context.Context, what string, build raftstore.Build) error {
	if _, err := s.store.Update(ctx, build); err != nil {
		if raftstore.IsReason(err, raftstore.ReasonConflict) {
			return errcode.New(errcode.StateInvalid, "you already have a section of that name").WithDetail("field", "name")
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
