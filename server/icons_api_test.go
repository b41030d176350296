package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/icon"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
)

// testPNG is a small PNG whose pixels depend on seed.
func testPNG(t testing.TB, seed uint8) []byte {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, 24, 16))
	for i := range m.Pix {
		m.Pix[i] = uint8(i) ^ seed
	}
	m.SetNRGBA(0, 0, color.NRGBA{A: 0xFF})
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// grantOpen gives a principal a data-plane grant on an app: it may open
// the app, and holds no verb on it.
func (h *harness) grantOpen(t testing.TB, appID, kind, principalID string, passcode bool) {
	t.Helper()
	g := identity.Grant{ID: ids.New(ids.Grant), AppID: appID, Plane: identity.PlaneData, PrincipalKind: kind,
		PrincipalID: principalID, Passcode: passcode, CreatedAt: time.Now().UTC()}
	if _, err := h.store.Apply(context.Background(), identity.Grants.Insert(&g)); err != nil {
		t.Fatalf("data-plane grant on %s: %v", appID, err)
	}
}

// putIcon uploads an image as the administrator.
func (h *harness) putIcon(t testing.TB, appID string, img []byte, header ...string) answer {
	t.Helper()
	return h.do("PUT", api+"/apps/"+appID+"/icon", bytes.NewReader(img), header...)
}

func TestIconFlow(t *testing.T) {
	h := newHarness(t)
	appID := h.app(t, "Icon Flow")
	path := api + "/apps/" + appID + "/icon"
	getApp := func() apps.App {
		t.Helper()
		return decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+appID, "")).App
	}
	if getApp().IconUpdatedAt != nil {
		t.Fatal("a new app has icon_updated_at")
	}

	// No icon yet: a generated PNG tile.
	a := h.send("GET", path, "")
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "image/png" {
		t.Fatalf("generated tile: %d %s", a.status, a.header.Get("Content-Type"))
	}
	if m, err := png.Decode(bytes.NewReader(a.body)); err != nil || m.Bounds().Dx() != icon.TileSize {
		t.Fatalf("the generated tile is not a %d px PNG: %v", icon.TileSize, err)
	}
	for k, want := range map[string]string{
		"Cache-Control":           "private, max-age=300",
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": "default-src 'none'",
	} {
		if got := a.header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	generatedTag := a.header.Get("ETag")

	// Upload, with a misleading Content-Type: the content decides.
	img := testPNG(t, 1)
	a = h.putIcon(t, appID, img, "Content-Type", "image/svg+xml")
	if a.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", a.status, a.body)
	}
	put := decodeAs[appAnswer](t, a).App
	if put.IconUpdatedAt == nil || getApp().IconUpdatedAt == nil || !getApp().IconUpdatedAt.Equal(*put.IconUpdatedAt) {
		t.Fatalf("icon_updated_at after PUT: %v, stored %v", put.IconUpdatedAt, getApp().IconUpdatedAt)
	}
	a = h.send("GET", path, "")
	if a.status != http.StatusOK || !bytes.Equal(a.body, img) || a.header.Get("Content-Type") != "image/png" {
		t.Fatalf("GET after PUT: %d %s, %d bytes", a.status, a.header.Get("Content-Type"), len(a.body))
	}
	etag := a.header.Get("ETag")
	if etag == generatedTag || len(etag) != 66 || !strings.HasPrefix(etag, `"`) {
		t.Errorf("ETag %s (generated %s)", etag, generatedTag)
	} else if _, err := hex.DecodeString(strings.Trim(etag, `"`)); err != nil {
		t.Errorf("ETag %s is not a hex hash", etag)
	}

	// Conditional requests.
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		if a := h.send("GET", path, "", "If-None-Match", inm); a.status != http.StatusNotModified || len(a.body) != 0 || a.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d, %d bytes", inm, a.status, len(a.body))
		}
	}
	if a := h.send("GET", path, "", "If-None-Match", `"stale"`); a.status != http.StatusOK {
		t.Errorf("a stale ETag: %d", a.status)
	}

	// A new image: a new time, a new ETag.
	time.Sleep(2 * time.Millisecond)
	again := h.putIcon(t, appID, testPNG(t, 2))
	second := decodeAs[appAnswer](t, again).App
	if !second.IconUpdatedAt.After(*put.IconUpdatedAt) {
		t.Errorf("icon_updated_at did not move: %v then %v", put.IconUpdatedAt, second.IconUpdatedAt)
	}
	if a := h.send("GET", path, "", "If-None-Match", etag); a.status != http.StatusOK || a.header.Get("ETag") == etag {
		t.Errorf("the old ETag after a new image: %d %s", a.status, a.header.Get("ETag"))
	}

	// Delete: the generated tile again, icon_updated_at null.
	if a := h.send("DELETE", path, ""); a.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", a.status, a.body)
	}
	if getApp().IconUpdatedAt != nil {
		t.Error("icon_updated_at after DELETE")
	}
	if !bytes.Contains(h.send("GET", api+"/apps/"+appID, "").body, []byte(`"icon_updated_at":null`)) {
		t.Error("icon_updated_at is not null on the wire")
	}
	if a := h.send("GET", path, ""); a.status != http.StatusOK || a.header.Get("ETag") != generatedTag {
		t.Errorf("after DELETE: %d, ETag %s, want the generated %s", a.status, a.header.Get("ETag"), generatedTag)
	}
	wantError(t, "DELETE without an icon", h.send("DELETE", path, ""), http.StatusNotFound, errcode.NotFound)
	wantError(t, "GET, no such app", h.send("GET", api+"/apps/"+ids.New(ids.App)+"/icon", ""), http.StatusNotFound, errcode.NotFound)
}

func TestIconRefusals(t *testing.T) {
	h := newHarness(t)
	appID := h.app(t, "Icon Refusals")
	path := api + "/apps/" + appID + "/icon"
	before := len(h.auditEntries(t))
	over := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, icon.MaxBytes+1-8)...)
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`), "SVG"},
		{"svg with a prolog", []byte("<?xml version=\"1.0\"?>\n<svg/>"), "SVG"},
		{"html", []byte("<html><script>alert(1)</script></html>"), "markup"},
		{"empty", nil, "empty"},
		{"over 256 KB", over, "over 256 KB"},
		{"a truncated png", testPNG(t, 3)[:60], "PNG"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, ctype := range []string{"image/png", "image/svg+xml", ""} {
				e := wantError(t, c.name, h.putIcon(t, appID, c.body, "Content-Type", ctype), http.StatusBadRequest, errcode.ValidInvalid)
				if !strings.Contains(e.Message, c.want) {
					t.Errorf("message %q does not say %q", e.Message, c.want)
				}
			}
		})
	}
	t.Run("over 256 KB, streamed without a length", func(t *testing.T) {
		req := httptest.NewRequest("PUT", path, io.MultiReader(bytes.NewReader(over)))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+h.token)
		rec := httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, req)
		if e := codeOf(answer{body: rec.Body.Bytes()}); rec.Code != http.StatusBadRequest || e != errcode.ValidInvalid {
			t.Errorf("got %d %s, want 400 VALID_INVALID", rec.Code, rec.Body)
		}
	})
	t.Run("far over, declared", func(t *testing.T) {
		req := httptest.NewRequest("PUT", path, bytes.NewReader(make([]byte, 8<<20)))
		req.Header.Set("Authorization", "Bearer "+h.token)
		rec := httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, req)
		if e := codeOf(answer{body: rec.Body.Bytes()}); rec.Code != http.StatusBadRequest || e != errcode.ValidInvalid {
			t.Errorf("got %d %s, want 400 VALID_INVALID", rec.Code, rec.Body)
		}
	})
	if after := len(h.auditEntries(t)); after != before {
		t.Errorf("refused uploads wrote %d audit entries", after-before)
	}
	if a := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+appID, "")); a.App.IconUpdatedAt != nil {
		t.Error("a refused upload set icon_updated_at")
	}
}

// Who may load a tile: whoever may open the app, or holds a verb on it.
func TestIconReaders(t *testing.T) {
	h := newHarness(t)
	appID := h.app(t, "Icon Readers")
	if a := h.putIcon(t, appID, testPNG(t, 4)); a.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", a.status, a.body)
	}
	path := api + "/apps/" + appID + "/icon"
	get := func(p *principal) answer { return h.send("GET", path, "", p.bearer()...) }

	opener := h.account(t, "opener", nil, true)
	h.grantOpen(t, appID, authz.KindUser, opener.userID, false)
	wantStatus(t, "a data-plane grant only", get(opener), http.StatusOK)
	// ... who may not manage it.
	wantError(t, "PUT by an opener", h.do("PUT", path, bytes.NewReader(testPNG(t, 5)), opener.bearer()...), http.StatusNotFound, errcode.NotFound)
	wantError(t, "DELETE by an opener", h.send("DELETE", path, "", opener.bearer()...), http.StatusNotFound, errcode.NotFound)

	member := h.account(t, "member", nil, true)
	h.grantOpen(t, appID, "group", h.group(t, nil, member.userID), false)
	wantStatus(t, "a data-plane grant to a group", get(member), http.StatusOK)

	service := h.serviceToken(t)
	h.grantOpen(t, appID, authz.KindToken, service.tokenID, false)
	wantStatus(t, "a service token it is shared with", get(service), http.StatusOK)

	viewer := h.account(t, "viewer", nil, true)
	h.grantApp(t, appID, authz.KindUser, viewer.userID, authz.RoleViewer)
	wantStatus(t, "a viewer (control plane) of the app", get(viewer), http.StatusOK)

	stranger := h.account(t, "stranger", nil, true)
	wantError(t, "a stranger", get(stranger), http.StatusNotFound, errcode.NotFound)
	wantError(t, "a service token nothing is shared with", get(h.serviceToken(t)), http.StatusNotFound, errcode.NotFound)

	elsewhere := h.account(t, "elsewhere", nil, true)
	h.grantOpen(t, h.app(t, "Other"), authz.KindUser, elsewhere.userID, false)
	wantError(t, "a data-plane grant on another app", get(elsewhere), http.StatusNotFound, errcode.NotFound)

	wantError(t, "anonymous", h.send("GET", path, "", "Authorization", ""), http.StatusUnauthorized, errcode.AuthRequired)

	// Shared with everyone: every signed-in caller may load it, unless a
	// passcode guards it (the edge asks for that).
	open := h.app(t, "Open to all")
	h.grantOpen(t, open, authz.KindAnonymous, "", false)
	wantStatus(t, "shared with everyone", h.send("GET", api+"/apps/"+open+"/icon", "", stranger.bearer()...), http.StatusOK)
	guarded := h.app(t, "Behind a passcode")
	h.grantOpen(t, guarded, authz.KindAnonymous, "", true)
	wantError(t, "shared with everyone behind a passcode", h.send("GET", api+"/apps/"+guarded+"/icon", "", stranger.bearer()...), http.StatusNotFound, errcode.NotFound)
}
