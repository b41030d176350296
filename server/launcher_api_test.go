package server

import (
	"net/http"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/launcher"
)

func TestLauncherListsWhatTheCallerCanOpen(t *testing.T) {
	h := newHarness(t)
	alice := h.account(t, "alice", nil, true)
	shared, managed, everyone, hidden := h.app(t, "Zeta Shared"), h.app(t, "Managed Only"), h.app(t, "Alpha Public"), h.app(t, "Hidden")
	h.openGrant(t, shared, authz.KindUser, alice.userID)
	h.grantApp(t, managed, authz.KindUser, alice.userID, authz.RoleOwner) // managing is not opening
	h.openGrant(t, everyone, authz.KindAnonymous, "")
	_ = hidden

	view := func() launcher.View {
		return decodeAs[launcher.View](t, h.send("GET", api+"/me/apps", "", alice.bearer()...))
	}
	v := view()
	if len(v.Items) != 2 || v.Items[0].App.ID != everyone || v.Items[1].App.ID != shared {
		t.Fatalf("GET /me/apps = %+v", v.Items)
	}
	if admin := decodeAs[launcher.View](t, h.send("GET", api+"/me/apps", "")); len(admin.Items) != 4 {
		t.Fatalf("the creator opens all four apps it made: %d", len(admin.Items))
	}

	// Favorites come first.
	wantStatus(t, "favor", h.send("PUT", api+"/me/favorites/"+shared, "", alice.bearer()...), http.StatusNoContent)
	wantStatus(t, "favor again", h.send("PUT", api+"/me/favorites/"+shared, "", alice.bearer()...), http.StatusNoContent)
	if v = view(); v.Items[0].App.ID != shared || !v.Items[0].Favorite {
		t.Fatalf("after favoring: %+v", v.Items)
	}
	wantError(t, "favor an app alice cannot open", h.send("PUT", api+"/me/favorites/"+hidden, "", alice.bearer()...), http.StatusNotFound, errcode.NotFound)
	wantError(t, "favor a managed app", h.send("PUT", api+"/me/favorites/"+managed, "", alice.bearer()...), http.StatusNotFound, errcode.NotFound)

	// Sections: file, move, and delete (the app returns to the ungrouped list).
	a := h.send("POST", api+"/me/sections", `{"name":"Work"}`, alice.bearer()...)
	wantStatus(t, "create a section", a, http.StatusCreated)
	work := decodeAs[sectionAnswer](t, a).Section
	wantError(t, "a second section of the same name", h.send("POST", api+"/me/sections", `{"name":"work"}`, alice.bearer()...), http.StatusConflict, errcode.StateInvalid)
	play := decodeAs[sectionAnswer](t, h.send("POST", api+"/me/sections", `{"name":"Play"}`, alice.bearer()...)).Section
	if play.Position <= work.Position {
		t.Fatalf("positions %d, %d", work.Position, play.Position)
	}
	wantStatus(t, "file", h.send("PUT", api+"/me/sections/"+work.ID+"/apps/"+shared, "", alice.bearer()...), http.StatusNoContent)
	wantStatus(t, "move", h.send("PUT", api+"/me/sections/"+play.ID+"/apps/"+shared, "", alice.bearer()...), http.StatusNoContent)
	v = view()
	if v.Items[0].SectionID == nil || *v.Items[0].SectionID != play.ID || len(v.Sections) != 2 {
		t.Fatalf("after moving: %+v", v)
	}
	wantError(t, "unfile from the wrong section", h.send("DELETE", api+"/me/sections/"+work.ID+"/apps/"+shared, "", alice.bearer()...), http.StatusNotFound, errcode.NotFound)
	renamed := decodeAs[sectionAnswer](t, h.send("PATCH", api+"/me/sections/"+play.ID, `{"name":"Games","position":0}`, alice.bearer()...)).Section
	if renamed.Name != "Games" || renamed.Position != 0 {
		t.Fatalf("renamed = %+v", renamed)
	}
	wantError(t, "another person's section", h.send("PATCH", api+"/me/sections/"+play.ID, `{"name":"Mine"}`), http.StatusNotFound, errcode.NotFound)
	wantError(t, "an empty name", h.send("POST", api+"/me/sections", `{"name":"  "}`, alice.bearer()...), http.StatusBadRequest, errcode.ValidInvalid)
	wantStatus(t, "delete the section", h.send("DELETE", api+"/me/sections/"+play.ID, "", alice.bearer()...), http.StatusNoContent)
	if v = view(); v.Items[0].SectionID != nil || len(v.Sections) != 1 {
		t.Fatalf("after deleting the section: %+v", v)
	}
	wantStatus(t, "unfavor", h.send("DELETE", api+"/me/favorites/"+shared, "", alice.bearer()...), http.StatusNoContent)
	wantError(t, "unfavor again", h.send("DELETE", api+"/me/favorites/"+shared, "", alice.bearer()...), http.StatusNotFound, errcode.NotFound)
}

func TestPatchApp(t *testing.T) {
	h := newHarness(t)
	a, b := h.app(t, "First"), h.app(t, "Second")
	got := decodeAs[appAnswer](t, h.send("PATCH", api+"/apps/"+a, `{"name":"Renamed","slug":"renamed"}`)).App
	if got.Name != "Renamed" || got.Slug != "renamed" {
		t.Fatalf("patched = %+v", got)
	}
	wantError(t, "a taken slug", h.send("PATCH", api+"/apps/"+b, `{"slug":"renamed"}`), http.StatusConflict, errcode.StateInvalid)
	wantError(t, "a bad slug", h.send("PATCH", api+"/apps/"+b, `{"slug":"Not A Slug"}`), http.StatusBadRequest, errcode.ValidInvalid)
	wantError(t, "an unknown field", h.send("PATCH", api+"/apps/"+b, `{"state":"running"}`), http.StatusBadRequest, errcode.ValidInvalid)
	if got := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+b, "")).App; got.Name != "Second" || got.Slug != "second" {
		t.Fatalf("refused patches changed the app: %+v", got)
	}
}

func TestDeletingAnAppWithStorageNeedsADecision(t *testing.T) {
	h := newHarness(t)
	plain, stored := h.app(t, "Plain"), h.app(t, "Stored")
	wantStatus(t, "write a revision", h.send("POST", api+"/apps/"+stored+"/specs", `{"spec":{"workloads":{"web":{"build":{"kind":"go"},"run":{"command":["./app"],"port":8080}}}}}`), http.StatusCreated)
	wantStatus(t, "declare a volume", h.send("POST", api+"/apps/"+stored+"/volumes", `{"name":"data","size_bytes":1048576,"path":"/data"}`), http.StatusCreated)
	wantError(t, "delete without a decision", h.send("DELETE", api+"/apps/"+stored, ""), http.StatusConflict, errcode.StateBackupDecision)
	wantError(t, "both decisions", h.send("DELETE", api+"/apps/"+stored+"?backup=true&force=true", ""), http.StatusBadRequest, errcode.ValidInvalid)
	wantStatus(t, "delete without storage", h.send("DELETE", api+"/apps/"+plain, ""), http.StatusNoContent)
	wantStatus(t, "delete keeping a backup", h.send("DELETE", api+"/apps/"+stored+"?backup=true", ""), http.StatusNoContent)
	last := h.auditEntries(t)
	if e := last[len(last)-1]; e.Action != "app.delete" || e.Details["backup"] != true || e.Details["storage"] != true {
		t.Fatalf("audit = %+v", e)
	}
}
