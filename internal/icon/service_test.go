package icon

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

type fixture struct {
	store *raftstore.Store
	apps  *apps.Service
	icons *Service
	ctx   context.Context
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	tables := append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors, Icons}, identity.Tables()...)
	store := raftstoretest.Open(t, tables...)
	now := func() time.Time { return time.Now().UTC() }
	return &fixture{
		store: store,
		apps:  apps.NewService(store, now),
		icons: NewService(store, now),
		ctx:   actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1", RequestID: "req_1"}),
	}
}

func (f *fixture) app(t *testing.T, name string) apps.App {
	t.Helper()
	caller := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}
	a, err := f.apps.Create(f.ctx, caller, apps.New{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f *fixture) audit(action string) []audit.Entry {
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	var out []audit.Entry
	for _, it := range items {
		if it.Value.Action == action {
			out = append(out, it.Value)
		}
	}
	return out
}

func TestPutGetDelete(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Shop Front")
	img := encodePNG(t, gradient(48, 32))

	ic, generated, err := f.icons.Get(a.ID)
	if err != nil || !generated || ic.ContentType != "image/png" {
		t.Fatalf("before any upload: %v generated=%v %s", err, generated, ic.ContentType)
	}
	tile := ic

	got, err := f.icons.Put(f.ctx, a.ID, img)
	if err != nil {
		t.Fatal(err)
	}
	if got.IconUpdatedAt == nil || !got.UpdatedAt.Equal(*got.IconUpdatedAt) {
		t.Fatalf("the app after Put: icon_updated_at %v, updated_at %v", got.IconUpdatedAt, got.UpdatedAt)
	}
	if stored, _ := f.apps.Get(a.ID); stored.IconUpdatedAt == nil || !stored.IconUpdatedAt.Equal(*got.IconUpdatedAt) {
		t.Fatalf("the stored app: %+v", stored)
	}
	ic, generated, err = f.icons.Get(a.ID)
	if err != nil || generated || !bytes.Equal(ic.Data, img) || ic.ContentType != "image/png" || len(ic.SHA256) != 64 || ic.SHA256 == tile.SHA256 {
		t.Fatalf("after Put: %v generated=%v %s %d bytes", err, generated, ic.ContentType, len(ic.Data))
	}
	entries := f.audit("icon.update")
	if len(entries) != 1 {
		t.Fatalf("icon.update entries: %d", len(entries))
	}
	d := entries[0].Details
	if d["format"] != "png" || d["width"] != float64(48) && d["width"] != 48 || d["bytes"] == nil || *entries[0].AppID != a.ID {
		t.Errorf("details = %v", d)
	}
	for k, v := range d {
		if s, ok := v.(string); ok && len(s) > 100 {
			t.Errorf("detail %s holds %d characters", k, len(s))
		}
	}

	// A second upload replaces the first.
	jpg := encodeJPEG(t, gradient(20, 20))
	if _, err := f.icons.Put(f.ctx, a.ID, jpg); err != nil {
		t.Fatal(err)
	}
	if ic, _, _ := f.icons.Get(a.ID); ic.ContentType != "image/jpeg" || !bytes.Equal(ic.Data, jpg) {
		t.Errorf("after the second Put: %s", ic.ContentType)
	}

	gone, err := f.icons.Delete(f.ctx, a.ID)
	if err != nil || gone.IconUpdatedAt != nil {
		t.Fatalf("Delete: %v, icon_updated_at %v", err, gone.IconUpdatedAt)
	}
	if stored, _ := f.apps.Get(a.ID); stored.IconUpdatedAt != nil {
		t.Fatalf("the stored app keeps icon_updated_at %v", stored.IconUpdatedAt)
	}
	ic, generated, _ = f.icons.Get(a.ID)
	if !generated || ic.SHA256 != tile.SHA256 {
		t.Errorf("after Delete the tile is not the generated one")
	}
	if _, err := f.icons.Delete(f.ctx, a.ID); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("Delete without an icon: %v", err)
	}
	if n := len(f.audit("icon.delete")); n != 1 {
		t.Errorf("icon.delete entries: %d", n)
	}
}

func TestRefusalsWriteNothing(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Refusals")
	before := len(f.audit("icon.update"))
	if _, err := f.icons.Put(f.ctx, a.ID, []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)); errcode.CodeOf(err) != errcode.ValidInvalid {
		t.Errorf("svg: %v", err)
	}
	if _, err := f.icons.Put(f.ctx, "app_01HZZZZZZZZZZZZZZZZZZZZZZZ", encodePNG(t, gradient(4, 4))); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("no such app: %v", err)
	}
	if _, _, err := f.icons.Get("app_01HZZZZZZZZZZZZZZZZZZZZZZZ"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("get, no such app: %v", err)
	}
	if _, err := f.icons.Delete(f.ctx, "app_01HZZZZZZZZZZZZZZZZZZZZZZZ"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("delete, no such app: %v", err)
	}
	if after := len(f.audit("icon.update")); after != before {
		t.Errorf("refusals wrote %d entries", after-before)
	}
	if stored, _ := f.apps.Get(a.ID); stored.IconUpdatedAt != nil {
		t.Errorf("a refused upload set icon_updated_at")
	}
}

func TestTheTableRefusesAnIconWithoutItsApp(t *testing.T) {
	f := newFixture(t)
	img := encodePNG(t, gradient(4, 4))
	_, err := f.store.Apply(f.ctx, Icons.Put(&Icon{ID: "app_missing", ContentType: "image/png", Data: img, SHA256: strings.Repeat("0", 64)}))
	if errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("an icon of no app: %v", err)
	}
	a := f.app(t, "Table")
	_, err = f.store.Apply(f.ctx, Icons.Put(&Icon{ID: a.ID, ContentType: "image/svg+xml", Data: img, SHA256: strings.Repeat("0", 64)}))
	if errcode.CodeOf(err) != errcode.ValidInvalid {
		t.Errorf("an icon of a refused type: %v", err)
	}
}

func TestSweepRemovesIconsOfDeletedApps(t *testing.T) {
	f := newFixture(t)
	keep, drop := f.app(t, "Keep"), f.app(t, "Drop")
	for _, a := range []apps.App{keep, drop} {
		if _, err := f.icons.Put(f.ctx, a.ID, encodePNG(t, gradient(8, 8))); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.apps.Delete(f.ctx, drop.ID, apps.Decision{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.icons.SweepDeletedApps(f.ctx); err != nil {
		t.Fatal(err)
	}
	r := f.store.Read()
	if _, _, ok := Icons.Get(r, drop.ID); ok {
		t.Error("the deleted app's icon is left")
	}
	if _, _, ok := Icons.Get(r, keep.ID); !ok {
		t.Error("the sweep removed an existing app's icon")
	}
}

func TestGeneratedTile(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Billing dashboard")
	first, generated, err := f.icons.Get(a.ID)
	if err != nil || !generated {
		t.Fatal(err)
	}
	m, err := png.Decode(bytes.NewReader(first.Data))
	if err != nil {
		t.Fatal(err)
	}
	if m.Bounds() != image.Rect(0, 0, TileSize, TileSize) {
		t.Errorf("tile bounds %v", m.Bounds())
	}
	if again, _, _ := f.icons.Get(a.ID); &again.Data[0] != &first.Data[0] {
		t.Error("the generated tile is not cached")
	}
	if !bytes.Equal(Tile(a.ID, a.Name), first.Data) {
		t.Error("the tile is not deterministic")
	}
	if _, _, err := Check(first.Data); err != nil {
		t.Errorf("the generated tile does not pass Check: %v", err)
	}
	// Some white text on a coloured background, and different apps get
	// different colours.
	white, bg := 0, m.At(0, 0)
	for y := range TileSize {
		for x := range TileSize {
			if r, g, b, _ := m.At(x, y).RGBA(); r == 0xFFFF && g == 0xFFFF && b == 0xFFFF {
				white++
			}
		}
	}
	if white < 1000 || white > TileSize*TileSize/3 {
		t.Errorf("%d white pixels", white)
	}
	other, _ := png.Decode(bytes.NewReader(Tile("app_other", a.Name)))
	if other.At(0, 0) == bg {
		t.Errorf("two IDs gave the same colour %v", bg)
	}
}

func TestInitials(t *testing.T) {
	for name, want := range map[string]string{
		"Billing dashboard": "BD",
		"shop":              "S",
		"  my   big app ":   "MB",
		"42 things":         "4T",
		"ünïcode app":       "?A",
		"日本語":               "?",
		"---":               "?",
		"":                  "?",
		"a-b-c":             "AB",
	} {
		if got := Initials(name); got != want {
			t.Errorf("Initials(%q) = %q, want %q", name, got, want)
		}
	}
}

// Uploads and renames of one app at once are all applied, one after
// another: the app ends with the last name and an icon_updated_at, and
// every request is audited once.
func TestConcurrentUploadsAndRenames(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Busy")
	img := encodePNG(t, gradient(16, 16))
	const n = 8
	errs := make(chan error, 2*n)
	for i := range n {
		go func() {
			_, err := f.icons.Put(f.ctx, a.ID, img)
			errs <- err
		}()
		go func() {
			name := fmt.Sprintf("Busy %d", i)
			_, err := f.apps.Update(f.ctx, a.ID, apps.Patch{Name: &name})
			errs <- err
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	got, err := f.apps.Get(a.ID)
	if err != nil || got.IconUpdatedAt == nil || !strings.HasPrefix(got.Name, "Busy ") {
		t.Fatalf("after: %+v, %v", got, err)
	}
	if u, r := len(f.audit("icon.update")), len(f.audit("app.update")); u != n || r != n {
		t.Errorf("%d icon.update and %d app.update entries; want %d each", u, r, n)
	}
}

// The sweep judges each icon on a view at least as new as its own: the
// icon of an app made after the sweep began (here: between its start and
// its write) is not taken for an orphan's.
func TestSweepKeepsIconsOfNewApps(t *testing.T) {
	f := newFixture(t)
	var made apps.App
	late := &lateStore{Store: f.store, before: func() {
		made = f.app(t, "Late")
		if _, err := f.icons.Put(f.ctx, made.ID, encodePNG(t, gradient(8, 8))); err != nil {
			t.Fatal(err)
		}
	}}
	if err := NewService(late, time.Now).SweepDeletedApps(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, generated, err := f.icons.Get(made.ID); err != nil || generated {
		t.Errorf("the sweep removed the icon of an app made while it ran (generated %v, %v)", generated, err)
	}
}

// lateStore runs before once, just before the first write.
type lateStore struct {
	*raftstore.Store
	before func()
}

func (s *lateStore) Update(ctx context.Context, build raftstore.Build) (uint64, error) {
	if s.before != nil {
		s.before()
		s.before = nil
	}
	return s.Store.Update(ctx, build)
}
