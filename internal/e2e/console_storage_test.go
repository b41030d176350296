package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
)

// The console's storage pages in a real Chromium against the real binary:
// an app's Volumes tab (its volumes, declaring one, its backups) and the
// installation's Storage page (/admin/storage). Run them with:
//
//	go test -count=1 -run 'TestConsoleStorage' ./internal/e2e/
//
// Backups are asserted as the API answers them: completed, or failed with
// the error the API records shown on the page. (While no backup storage
// is configured, every backup fails with ADAPTER_UNAVAILABLE; once one
// is, they complete. Both outcomes are checked against the API.)

// volumeAPI is a volume as the API lists it.
type volumeAPI struct {
	ID        *string `json:"id"`
	AppID     string  `json:"app_id"`
	Name      string  `json:"name"`
	SizeBytes int64   `json:"size_bytes"`
	UsedBytes *int64  `json:"used_bytes"`
	AppGoneAt *string `json:"app_gone_at"`
}

// backupAPI is a backup as the API lists it.
type backupAPI struct {
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	AppID     *string `json:"app_id"`
	AppSlug   string  `json:"app_slug"`
	State     string  `json:"state"`
	Scheduled bool    `json:"scheduled"`
	SizeBytes int64   `json:"size_bytes"`
	Verified  *string `json:"verified_at"`
	Error     *struct {
		Code, Message, Remedy string
	} `json:"error"`
}

func (s *webServer) appVolumes(t *testing.T, appID string) []volumeAPI {
	t.Helper()
	var l struct{ Items []volumeAPI }
	s.must(t, "GET", "/apps/"+appID+"/volumes", nil, http.StatusOK, &l)
	return l.Items
}

func (s *webServer) allVolumes(t *testing.T) []volumeAPI {
	t.Helper()
	var l struct{ Items []volumeAPI }
	s.must(t, "GET", "/volumes", nil, http.StatusOK, &l)
	return l.Items
}

func (s *webServer) backups(t *testing.T, query string) []backupAPI {
	t.Helper()
	var l struct{ Items []backupAPI }
	s.must(t, "GET", "/backups"+query, nil, http.StatusOK, &l)
	return l.Items
}

// setPolicy sets one host policy setting, the others as they are.
func (s *webServer) setPolicy(t *testing.T, name string, value any) {
	t.Helper()
	var p struct {
		Policy map[string]any `json:"policy"`
	}
	s.must(t, "GET", "/policy", nil, http.StatusOK, &p)
	if p.Policy == nil {
		p.Policy = map[string]any{}
	}
	p.Policy[name] = value
	s.must(t, "PUT", "/policy", map[string]any{"policy": p.Policy}, http.StatusOK, nil)
}

// text is the inner text of the first element matching selector ("" when none).
func text(t *testing.T, tab *browsertest.Tab, selector string) string {
	t.Helper()
	var s string
	tab.MustEval(`(() => { const e = document.querySelector(`+strconv.Quote(selector)+`); return e ? e.innerText : ""; })()`, &s)
	return s
}

// exists says whether an element matches selector.
func exists(t *testing.T, tab *browsertest.Tab, selector string) bool {
	t.Helper()
	var ok bool
	tab.MustEval(`!!document.querySelector(`+strconv.Quote(selector)+`)`, &ok)
	return ok
}

// shownFailure checks that a failed backup's row shows the error the API
// recorded: its message, its remedy when it has one, and its code.
func shownFailure(t *testing.T, tab *browsertest.Tab, b backupAPI) {
	t.Helper()
	if b.Error == nil {
		t.Fatalf("backup %s failed without an error", b.ID)
	}
	note := `tr[data-note-for="` + b.ID + `"]`
	waitFor(t, tab, "the failed backup's error", `document.querySelector('`+note+` .problem .code')`)
	shown := text(t, tab, note)
	lower := strings.ToLower(shown)
	if !strings.Contains(lower, strings.ToLower(strings.TrimSuffix(b.Error.Message, "."))) || !strings.Contains(shown, b.Error.Code) ||
		(b.Error.Remedy != "" && !strings.Contains(lower, strings.ToLower(strings.TrimSuffix(b.Error.Remedy, ".")))) {
		t.Errorf("the failed backup %s shows %q; the API recorded %+v", b.ID, shown, *b.Error)
	}
}

// TestConsoleStorageVolumesAndBackups, on the go-notes sample (a web
// server that keeps notes in its volume) on the process runtime:
//   - the Volumes tab of the app without volumes says so, and its backups
//     section says there are none yet, without shifting its layout;
//   - declaring a volume of 64 MiB at /data through the page's form
//     writes a revision with the volume and its mount (checked through
//     the API); the administrator is offered the take-over of a kept
//     volume (none here);
//   - after that revision is pinned and deployed the tab shows the volume's vol_ ID
//     (the API's), its size and mount, and, once the app wrote a note, what
//     the volume holds (the API's used_bytes) as a bar against its size;
//   - Back up now takes a backup: the page follows it to its end and lists
//     it with the state the API has (completed, or failed with the API's
//     message, remedy and code shown), and its status line says how it
//     ended; a completed one verifies from the page (the API stamps
//     verified_at) and, after another note, restores from the page behind
//     a confirmation: the app answers with the first note alone;
//   - a member who owns the app but lacks install.backup.manage sees the
//     volume, no take-over control, and a backups section naming the verb
//     instead of the list (the page never asks the API for backups);
//
// each page accessible (axe-core, light and dark), calling only /api/v1,
// with no problem reported; screenshots go to SVC_SCREENSHOTS.
func TestConsoleStorageVolumesAndBackups(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	appID, _ := s.onboard(t, "notes", "go-notes", "go")
	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)
	base := s.console + "/apps/" + appID + "/volumes"

	// No volumes yet, no backups yet.
	tab.Go(base)
	waitText(t, tab, "No volumes: everything the app writes is discarded")
	waitText(t, tab, "No backups of this app yet")
	noLayoutShift(t, tab, "the volumes tab without volumes")
	if !exists(t, tab, `#volume-takeover`) {
		t.Errorf("the administrator is not offered the take-over of a kept volume")
	}
	var options []string
	tab.MustEval(`[...document.querySelectorAll('#volume-takeover option')].map((o) => o.value)`, &options)
	if !reflect.DeepEqual(options, []string{""}) {
		t.Errorf("the take-over offers %q with no kept volume; want only a new volume", options)
	}
	accessible(t, tab, "the volumes tab without volumes")
	screenshots(t, tab, "volumes-empty")

	// Declare data: 64 MiB at /data.
	waitFor(t, tab, "the workloads offered", `document.querySelector('#volume-workload option[value="web"]')`)
	choose(t, tab, "#volume-unit", "MiB")
	fill(t, tab, map[string]string{"volume_name": "data", "volume_size": "64", "volume_path": "/data"}, "volume_name", "volume_size", "volume_path")
	waitText(t, tab, "declares data; it is neither pinned nor deployed")
	var latest struct {
		Items []struct{ Revision int } `json:"items"`
	}
	s.must(t, "GET", "/apps/"+appID+"/specs?limit=1", nil, http.StatusOK, &latest)
	rev := latest.Items[0].Revision
	if n := text(t, tab, ".volumes .notice"); !strings.Contains(n, "Revision "+strconv.Itoa(rev)+" declares data") {
		t.Errorf("the declaration says %q; want revision %d", n, rev)
	}
	var declared struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", fmt.Sprintf("/apps/%s/specs/%d", appID, rev), nil, http.StatusOK, &declared)
	vols, _ := declared.Spec.Spec["volumes"].(map[string]any)
	mounts := declared.Spec.Spec["workloads"].(map[string]any)["web"].(map[string]any)["mounts"]
	if !reflect.DeepEqual(vols["data"], map[string]any{"size_bytes": float64(64 << 20)}) || !reflect.DeepEqual(mounts, []any{map[string]any{"volume": "data", "path": "/data"}}) {
		t.Fatalf("revision %d by the API: volumes %v, web's mounts %v; want data of 64 MiB at /data", rev, vols, mounts)
	}

	// Pinned and deployed, the volume has its ID; a note written, it
	// holds bytes.
	s.must(t, "POST", fmt.Sprintf("/apps/%s/specs/%d/pin", appID, rev), nil, http.StatusOK, nil)
	s.deployed(t, appID, 0)
	note(t, s.waitDeployed(t, appID), "first note")
	var vol volumeAPI
	waitForAPI(t, "the volume's used bytes", func() bool {
		vs := s.appVolumes(t, appID)
		if len(vs) == 1 && vs[0].ID != nil && vs[0].UsedBytes != nil && *vs[0].UsedBytes > 0 {
			vol = vs[0]
			return true
		}
		return false
	})
	if !strings.HasPrefix(*vol.ID, "vol_") || vol.SizeBytes != 64<<20 {
		t.Fatalf("the volume by the API: %+v", vol)
	}
	tab.MustEval(`window.__cls = 0`, nil)
	tab.Go(base)
	row := `tr[data-volume="data"][data-id="` + *vol.ID + `"]`
	waitFor(t, tab, "the volume with its ID and what it holds", `(() => { const m = document.querySelector('`+row+` .meter.used'); return m && Number(m.dataset.used) > 0; })()`)
	noLayoutShift(t, tab, "the volumes tab with a volume")
	cells := text(t, tab, row)
	var used int64
	tab.MustEval(`Number(document.querySelector('`+row+` .meter.used').dataset.used)`, &used)
	if !strings.Contains(cells, *vol.ID) || !strings.Contains(cells, "64 MiB") || !strings.Contains(cells, "/data in web") || used != *vol.UsedBytes ||
		!strings.Contains(cells, " of 64 MiB") || !exists(t, tab, row+` progress[aria-label^="Volume data used"]`) {
		t.Errorf("the volume's row: %q, used %d; the API has ID %s, 64 MiB, used %d, mounted at /data in web", cells, used, *vol.ID, *vol.UsedBytes)
	}
	accessible(t, tab, "the volumes tab with a volume")
	screenshots(t, tab, "volumes-used")

	// Back up now. The hourly rolling backups are scheduled too (the app
	// has a volume now): the one asked for is the one not scheduled.
	clickButton(t, tab, ".app-backups .backup-toolbar", "Back up now")
	var asked backupAPI
	waitForAPI(t, "the backup asked for", func() bool {
		for _, b := range s.backups(t, "?app_id="+url.QueryEscape(appID)) {
			if !b.Scheduled {
				asked = b
				return true
			}
		}
		return false
	})
	brow := `[data-table="backups"] tr[data-backup="` + asked.ID + `"]`
	waitFor(t, tab, "the backup listed at its end", `(() => { const r = document.querySelector('`+brow+`'); return r && (r.dataset.state === "completed" || r.dataset.state === "failed"); })()`)
	var end backupAPI
	s.must(t, "GET", "/backups/"+asked.ID, nil, http.StatusOK, &struct {
		Backup *backupAPI `json:"backup"`
	}{&end})
	var shownState string
	tab.MustEval(`document.querySelector('`+brow+`').dataset.state`, &shownState)
	if shownState != end.State || end.Kind != "rolling" {
		t.Errorf("the page lists backup %s as %s; the API has it %s (%s)", asked.ID, shownState, end.State, end.Kind)
	}
	status := text(t, tab, ".app-backups .status-line")
	switch end.State {
	case "failed":
		shownFailure(t, tab, end)
		if status != "Backup "+end.ID+" failed: see why below." {
			t.Errorf("the status line says %q after the backup failed", status)
		}
	case "completed":
		if status != "Backup "+end.ID+" completed." || end.SizeBytes == 0 || !strings.Contains(text(t, tab, brow), "holds ") {
			t.Errorf("the status line says %q, the row %q (size %d), after the backup completed", status, text(t, tab, brow), end.SizeBytes)
		}
		clickButton(t, tab, brow, "Verify")
		waitText(t, tab, "Verified: every part was read back")
		s.must(t, "GET", "/backups/"+asked.ID, nil, http.StatusOK, &struct {
			Backup *backupAPI `json:"backup"`
		}{&end})
		if end.Verified == nil {
			t.Errorf("verified from the page, the API has no verified_at")
		}
		// Another note, then the backup restored from the page: the
		// first note alone is back.
		note(t, s.waitRunning(t, appID), "second note")
		clickButton(t, tab, brow, "Restore")
		waitFor(t, tab, "the restore's confirmation", `document.querySelector('dialog.confirm[open]')`)
		if asks := text(t, tab, "dialog.confirm"); !strings.Contains(asks, "paused") || !strings.Contains(asks, "restarted") || !strings.Contains(asks, "(data) is replaced") {
			t.Errorf("the restore asks %q; want it to say the app is paused and restarted and its volumes' data replaced", asks)
		}
		accessible(t, tab, "the restore's confirmation")
		screenshots(t, tab, "volumes-restore-confirm")
		clickButton(t, tab, "dialog.confirm", "Restore")
		waitText(t, tab, "Restore started")
		deadline := time.Now().Add(scaled(60 * time.Second))
		for {
			code, body, err := hit("GET", s.waitRunning(t, appID), "/")
			if err == nil && code == http.StatusOK && strings.Contains(body, "first note") && !strings.Contains(body, "second note") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the restore GET / = %d %q (%v); want the first note only", code, body, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	default:
		t.Fatalf("backup %s ended %s", end.ID, end.State)
	}
	accessible(t, tab, "the volumes tab with a backup")
	screenshots(t, tab, "volumes-backup")
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)

	// A member who owns the app, without install.backup.manage.
	miaID, _ := s.member(t, "mia")
	s.must(t, "POST", "/apps/"+appID+"/grants", map[string]any{"plane": "control", "principal_kind": "user", "principal_id": miaID, "role_id": "role_owner"}, http.StatusCreated, nil)
	mia := consoleTab(t, browse(t))
	s.signInTab(t, mia, "mia", "mia-password-93d1")
	mia.Go(base)
	waitFor(t, mia, "the member's volume", `document.querySelector('`+row+`')`)
	waitFor(t, mia, "the workloads offered", `document.querySelector('#volume-workload option[value="web"]')`)
	who := text(t, mia, ".app-backups .backups-who")
	if !strings.Contains(who, "install.backup.manage") || !strings.Contains(who, "you do not hold") {
		t.Errorf("the member's backups section says %q; want who may see the backups", who)
	}
	if exists(t, mia, "#volume-takeover") || exists(t, mia, `[data-table="backups"]`) {
		t.Errorf("the member is offered the take-over or the backups list")
	}
	var buttons []string
	mia.MustEval(`[...document.querySelectorAll('.volumes button')].map((b) => b.innerText.trim())`, &buttons)
	for _, b := range buttons {
		if b == "Back up now" {
			t.Errorf("the member is offered Back up now")
		}
	}
	for _, r := range mia.Requests() {
		if u, err := url.Parse(r.URL); err == nil && (strings.HasPrefix(u.Path, "/api/v1/backups") || u.Path == "/api/v1/volumes") {
			t.Errorf("the member's page asked %s %s: it is the installation's", r.Method, r.URL)
		}
	}
	accessible(t, mia, "the member's volumes tab")
	screenshots(t, mia, "volumes-member")
	noProblems(t, mia)
	onlyAPI(t, mia, s.console)
}

// TestConsoleStorageAdminAndDeletion, on an app (the Python sample) with a
// volume declared (its row made at the declaration):
//   - /admin/storage lists the volume with its app linked, its size, and
//     no Delete (a live app's volume goes with its app), without shifting
//     its layout; the backups are those the API has;
//   - under host policy require_backup_before_destroy, the app's delete
//     dialog with "discard" shows the API's 403 POLICY_BACKUP_REQUIRED
//     (message, remedy, code), and the app is still there;
//   - with the policy off, "keep its data" (backup=true) either deletes
//     the app (the final backup completed: the console goes to /apps, the
//     API has no app, and /admin/storage lists the volume as the deleted
//     app's, by its slug; Delete asks first, saying the data is removed for
//     good, and then the API no longer lists the volume), or, while no
//     backup storage is configured, shows the API's refusal in the dialog,
//     the app and its volume left as they were;
//   - either way the final (on_delete) backup is listed by the kind filter
//     with the state the API has (a failed one with its error);
//   - an auditor (install.view without install.backup.manage) sees the
//     volumes without Delete, and a backups section naming the verb.
func TestConsoleStorageAdminAndDeletion(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	appID, _ := s.onboard(t, "keeper", samples[2].dir, samples[2].detector)
	var made struct {
		Volume volumeAPI `json:"volume"`
	}
	s.must(t, "POST", "/apps/"+appID+"/volumes", map[string]any{"name": "files", "path": "/files", "size_bytes": 32 << 20}, http.StatusCreated, &made)
	if made.Volume.ID == nil {
		t.Fatalf("the declared volume has no ID")
	}
	volID := *made.Volume.ID
	var app struct {
		App struct{ Slug string } `json:"app"`
	}
	s.must(t, "GET", "/apps/"+appID, nil, http.StatusOK, &app)
	slug := app.App.Slug

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)
	tab.Go(s.console + "/admin/storage")
	vrow := `[data-table="storage-volumes"] tr[data-volume="` + volID + `"]`
	waitFor(t, tab, "the volume listed", `document.querySelector('`+vrow+` a[href="/apps/`+appID+`/volumes"]')`)
	waitFor(t, tab, "the backups read", `document.querySelector('[data-table="backups"] tbody tr[data-backup]') || document.body.innerText.includes("No backups yet")`)
	noLayoutShift(t, tab, "the storage page")
	if cells := text(t, tab, vrow); !strings.Contains(cells, "files") || !strings.Contains(cells, "keeper") || !strings.Contains(cells, "32 MiB") || !strings.Contains(cells, "goes with its app") {
		t.Errorf("the live volume's row: %q", cells)
	}
	if exists(t, tab, vrow+" button") {
		t.Errorf("a live app's volume is offered for deletion")
	}
	if !strings.Contains(text(t, tab, `.admin nav.side`), "Storage") {
		t.Errorf("the installation's pages do not list Storage")
	}
	accessible(t, tab, "the storage page")
	screenshots(t, tab, "admin-storage")

	// Discarding under require_backup_before_destroy: refused, shown.
	s.setPolicy(t, "require_backup_before_destroy", true)
	tab.Go(s.console + "/apps/" + appID + "/settings")
	clickButton(t, tab, ".danger-zone", "Delete this app…")
	waitFor(t, tab, "the delete dialog", `document.querySelector('dialog.delete-dialog[open]')`)
	tab.MustEval(`document.querySelector('input[name="delete_decision"][value="force"]').click()`, nil)
	typeInto(t, tab, "delete_slug", slug)
	waitFor(t, tab, "the delete button enabled", `!document.querySelector('dialog.delete-dialog button[type=submit]').disabled`)
	click(t, tab, `dialog.delete-dialog button[type=submit]`)
	waitFor(t, tab, "the refusal", `document.querySelector('dialog.delete-dialog [role=alert] .code')`)
	refused := text(t, tab, `dialog.delete-dialog [role=alert]`)
	if !strings.Contains(refused, "POLICY_BACKUP_REQUIRED") || !strings.Contains(refused, "requires a final backup") || !strings.Contains(refused, "backup=true") {
		t.Errorf("discarding under the policy shows %q; want the API's POLICY_BACKUP_REQUIRED with its remedy", refused)
	}
	s.must(t, "GET", "/apps/"+appID, nil, http.StatusOK, nil)
	accessible(t, tab, "the delete dialog with the policy's refusal")
	screenshots(t, tab, "settings-delete-refused")

	// Keeping the data: a final backup, then the deletion.
	s.setPolicy(t, "require_backup_before_destroy", false)
	tab.MustEval(`document.querySelector('input[name="delete_decision"][value="backup"]').click()`, nil)
	waitFor(t, tab, "the delete button enabled", `!document.querySelector('dialog.delete-dialog button[type=submit]').disabled`)
	click(t, tab, `dialog.delete-dialog button[type=submit]`)
	waitFor(t, tab, "the deletion's outcome", `location.pathname === "/apps" || (document.querySelector('dialog.delete-dialog [role=alert] .code') && !document.querySelector('dialog.delete-dialog button[type=submit]').disabled && !document.querySelector('dialog.delete-dialog [role=alert]').innerText.includes("POLICY_BACKUP_REQUIRED"))`)
	var finals []backupAPI
	waitForAPI(t, "the final backup recorded", func() bool {
		finals = s.backups(t, "?kind=on_delete")
		return len(finals) == 1 && (finals[0].State == "completed" || finals[0].State == "failed")
	})
	final := finals[0]
	deleted := tab.URL() == s.console+"/apps"
	if deleted {
		s.must(t, "GET", "/apps/"+appID, nil, http.StatusNotFound, nil)
		if final.State != "completed" {
			t.Errorf("the app was deleted with its final backup %s", final.State)
		}
	} else {
		// No backup storage: the final backup failed and the deletion was
		// refused with its error, the app and its volume untouched.
		s.must(t, "GET", "/apps/"+appID, nil, http.StatusOK, nil)
		shown := text(t, tab, `dialog.delete-dialog [role=alert]`)
		if final.State != "failed" || final.Error == nil || !strings.Contains(shown, final.Error.Code) || !strings.Contains(strings.ToLower(shown), strings.ToLower(final.Error.Message)) {
			t.Errorf("the refused deletion shows %q; the final backup is %+v", shown, final)
		}
		t.Logf("deleting with a backup was refused (%s): no kept volume to show", strings.ReplaceAll(shown, "\n", " | "))
		accessible(t, tab, "the delete dialog with the backup's refusal")
		screenshots(t, tab, "settings-delete-backup-refused")
		clickButton(t, tab, "dialog.delete-dialog", "Cancel")
	}

	// The storage page: the final backup under the kind filter.
	tab.Go(s.console + "/admin/storage")
	waitFor(t, tab, "the volume listed", `document.querySelector('`+vrow+`')`)
	choose(t, tab, "#backup-kind", "on_delete")
	brow := `[data-table="backups"] tr[data-backup="` + final.ID + `"]`
	waitFor(t, tab, "only the final backup", `document.querySelectorAll('[data-table="backups"] tbody tr[data-backup]').length === 1 && document.querySelector('`+brow+`')`)
	var state string
	tab.MustEval(`document.querySelector('`+brow+`').dataset.state`, &state)
	if state != final.State || !strings.Contains(text(t, tab, brow), "final, at deletion") {
		t.Errorf("the final backup's row: %q, state %s; the API has %s", text(t, tab, brow), state, final.State)
	}
	if final.State == "failed" {
		shownFailure(t, tab, final)
	}

	if deleted {
		// The kept volume: the deleted app's, by its slug; deleting it asks.
		waitFor(t, tab, "the kept volume", `(() => { const r = document.querySelector('`+vrow+`'); return r && r.dataset.gone === "true" && r.innerText.includes("deleted app `+slug+`"); })()`)
		clickButton(t, tab, vrow, "Delete")
		waitFor(t, tab, "the confirmation", `document.querySelector('dialog.confirm[open]')`)
		if asks := text(t, tab, "dialog.confirm"); !strings.Contains(asks, volID) || !strings.Contains(asks, "removed for good") {
			t.Errorf("deleting the kept volume asks %q", asks)
		}
		if len(s.allVolumes(t)) != 1 {
			t.Errorf("the volume went before the confirmation")
		}
		accessible(t, tab, "the kept volume's confirmation")
		screenshots(t, tab, "admin-storage-delete")
		clickButton(t, tab, "dialog.confirm", "Delete for good")
		waitFor(t, tab, "the volume gone", `!document.querySelector('`+vrow+`')`)
		for _, v := range s.allVolumes(t) {
			if v.ID != nil && *v.ID == volID {
				t.Errorf("the API still lists the deleted volume: %+v", v)
			}
		}
	} else if !strings.Contains(text(t, tab, vrow), "goes with its app") {
		t.Errorf("after the refused deletion the volume's row says %q", text(t, tab, vrow))
	}
	accessible(t, tab, "the storage page with the final backup")
	screenshots(t, tab, "admin-storage-final")

	// An installation bundle: taken from the page, listed under its kind,
	// completed with no Restore (it goes into a new installation, with
	// the command the row names).
	clickButton(t, tab, ".bundle-take", "Take an installation bundle")
	waitFor(t, tab, "the bundle asked for", `document.querySelector('.bundle-line').innerText.includes("is being taken")`)
	var bundles []backupAPI
	waitForAPI(t, "the bundle completed", func() bool {
		bundles = s.backups(t, "?kind=dr_bundle")
		return len(bundles) == 1 && (bundles[0].State == "completed" || bundles[0].State == "failed")
	})
	if bundles[0].State != "completed" || bundles[0].AppID != nil {
		t.Fatalf("the bundle: %+v", bundles[0])
	}
	choose(t, tab, "#backup-kind", "dr_bundle")
	bundleRow := `[data-table="backups"] tr[data-backup="` + bundles[0].ID + `"]`
	waitFor(t, tab, "the completed bundle listed", `(() => { const r = document.querySelector('`+bundleRow+`'); return r && r.dataset.state === "completed"; })()`)
	if row := text(t, tab, bundleRow); !strings.Contains(row, "installation bundle") || !strings.Contains(row, "the installation") || !strings.Contains(row, "svc restore --bundle "+bundles[0].ID) {
		t.Errorf("the bundle's row: %q", row)
	}
	if labels := text(t, tab, bundleRow+" .row-actions"); strings.Contains(labels, "Restore") || !strings.Contains(labels, "Verify") {
		t.Errorf("the bundle's row offers %q; want Verify and no Restore", labels)
	}
	accessible(t, tab, "the storage page with a bundle")
	screenshots(t, tab, "admin-storage-bundle")
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)

	// An auditor: volumes, no Delete, and who sees the backups.
	audID, _ := s.member(t, "audrey")
	s.must(t, "PUT", "/users/"+audID+"/role", map[string]string{"role_id": "role_auditor"}, http.StatusOK, nil)
	aud := consoleTab(t, browse(t))
	s.signInTab(t, aud, "audrey", "audrey-password-93d1")
	aud.Go(s.console + "/admin/storage")
	waitFor(t, aud, "the auditor's page", `document.querySelector('.storage-admin .backups-who') && (document.querySelector('[data-table="storage-volumes"] tbody tr[data-volume]') || document.body.innerText.includes("No volumes yet"))`)
	if who := text(t, aud, ".storage-admin .backups-who"); !strings.Contains(who, "install.backup.manage") {
		t.Errorf("the auditor's backups section says %q", who)
	}
	if exists(t, aud, `[data-table="storage-volumes"] button`) || exists(t, aud, `[data-table="backups"]`) {
		t.Errorf("the auditor is offered a deletion or the backups")
	}
	accessible(t, aud, "the auditor's storage page")
	screenshots(t, aud, "admin-storage-auditor")
	noProblems(t, aud)
	onlyAPI(t, aud, s.console)
}
