package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/backups"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/pgtest"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/volumes"
)

type slotListDTO struct {
	Items []slots.View `json:"items"`
}

type volumeListDTO struct {
	Items []volumes.View `json:"items"`
}

func slotByKey(t *testing.T, a answer, key string) slots.View {
	t.Helper()
	for _, v := range decodeAs[slotListDTO](t, a).Items {
		if v.Key == key {
			return v
		}
	}
	t.Fatalf("no slot %s in %s", key, a.body)
	return slots.View{}
}

func (h *harness) resolveSlot(t *testing.T, appID, key, field string) string {
	t.Helper()
	v, err := h.srv.d.Slots.(*slots.Service).Resolve(appID, key, field)
	if err != nil {
		t.Fatalf("resolve %s.%s: %v", key, field, err)
	}
	return v
}

func TestSlotsAPI(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Slot Shop")
	base := api + "/apps/" + app + "/slots"

	a := h.send("GET", base, "")
	wantStatus(t, "list without a spec", a, http.StatusOK)
	if string(a.body) != `{"items":[]}`+"\n" {
		t.Errorf("list without a spec = %s", a.body)
	}
	e := wantError(t, "fill before the spec declares it", h.send("PUT", base+"/db", `{"provision":{}}`), http.StatusNotFound, errcode.NotFound)
	if !strings.Contains(e.Remedy, "declare it in the spec") {
		t.Errorf("remedy = %q", e.Remedy)
	}

	h.specRevision(t, app) // declares db: {type: postgres, required: true}
	db := slotByKey(t, h.send("GET", base, ""), "db")
	if db.Filled || !db.Required || !db.Declared || db.Type != "postgres" || db.Mode != nil {
		t.Fatalf("db before filling = %+v", db)
	}

	const valuePW = "canary-slot-value-pw-9b1d"
	before := h.auditEntries(t)
	a = h.send("PUT", base+"/db", jsonOf(map[string]any{"value": map[string]any{
		"host": "pg.internal", "port": 5433, "database": "shop", "username": "shop", "password": valuePW}}))
	wantStatus(t, "fill by value", a, http.StatusOK)
	v := decodeAs[slotAnswer](t, a).Slot
	if !v.Filled || *v.Mode != "value" || *v.Effective != "next_deploy" || v.Fields["port"] != "5433" || strings.Contains(string(a.body), valuePW) {
		t.Fatalf("fill by value answered %s", a.body)
	}
	got := newEntries(before, h.auditEntries(t))
	if len(got) != 1 || got[0].Action != "slot.fill" || *got[0].TargetID != "db" || got[0].Details["mode"] != "value" {
		t.Fatalf("audit = %+v", got)
	}
	if h.resolveSlot(t, app, "db", "url") != "postgres://shop:"+valuePW+"@pg.internal:5433/shop" {
		t.Errorf("url = %s", h.resolveSlot(t, app, "db", "url"))
	}

	const bound = "postgres://app:canary-bind-pw-4c0a@db.example:5432/app?sslmode=require"
	a = h.send("PUT", base+"/db", jsonOf(map[string]any{"bind": map[string]string{"url": bound}}))
	wantStatus(t, "bind", a, http.StatusOK)
	if v := decodeAs[slotAnswer](t, a).Slot; *v.Mode != "bind" || v.Fields["host"] != "db.example" || strings.Contains(string(a.body), "canary-bind-pw") {
		t.Fatalf("bind answered %s", a.body)
	}

	for _, c := range []struct{ name, body, field string }{
		{"two ways", `{"provision":{},"bind":{"url":"postgres://u@h/d"}}`, ""},
		{"no way", `{}`, ""},
		{"unknown field", `{"provision":{"adapter":"x"}}`, "adapter"},
		{"bad url", `{"bind":{"url":"http://h/d"}}`, "bind.url"},
	} {
		e := wantError(t, c.name, h.send("PUT", base+"/db", c.body), http.StatusBadRequest, errcode.ValidInvalid)
		if c.field != "" && e.Details["field"] != c.field {
			t.Errorf("%s: field = %v", c.name, e.Details["field"])
		}
	}
	wantError(t, "provision without a slots adapter", h.send("PUT", base+"/db", `{"provision":{}}`), http.StatusBadGateway, errcode.AdapterUnavailable)
	wantError(t, "unknown app", h.send("GET", api+"/apps/app_01J00000000000000000000000/slots", ""), http.StatusNotFound, errcode.NotFound)

	// Provisioning needs a real PostgreSQL and the postgres slots adapter,
	// configured and loaded by a restart.
	pg := pgtest.Start(t)
	a = h.send("POST", api+"/adapters", jsonOf(map[string]any{"category": "slots", "kind": "postgres",
		"config":      map[string]any{"host": pg.Host, "port": pg.Port, "username": pg.User, "sslmode": "disable"},
		"credentials": map[string]string{"password": pg.Password}}))
	wantStatus(t, "configure the postgres adapter", a, http.StatusCreated)
	adapterID := decodeAs[adapterAnswer](t, a).Adapter.AdapterID
	h.restart()
	l := decodeAs[adapters.List](t, h.send("GET", api+"/adapters", ""))
	if av := adapterByID(t, l, adapterID); !av.Loaded || av.Category != "slots" || fmt.Sprint(av.Capabilities["types"]) != "[postgres]" {
		t.Fatalf("the postgres adapter = %+v", av)
	}

	a = h.send("PUT", base+"/db", `{"provision":{}}`)
	wantStatus(t, "provision", a, http.StatusOK)
	v = decodeAs[slotAnswer](t, a).Slot
	if *v.Mode != "provision" || *v.AdapterID != adapterID || v.Fields["database"] != "svc_slot_shop_db" || v.Fields["username"] != "svc_slot_shop_db" ||
		v.Fields["port"] != fmt.Sprint(pg.Port) || strings.Join(v.SecretFields, ",") != "password,url" {
		t.Fatalf("provision answered %s", a.body)
	}
	pw := h.resolveSlot(t, app, "db", "password")
	wantURL := fmt.Sprintf("postgres://svc_slot_shop_db:%s@%s/svc_slot_shop_db?sslmode=disable", pw, pg.Addr())
	if h.resolveSlot(t, app, "db", "url") != wantURL {
		t.Errorf("url = %s, want %s", h.resolveSlot(t, app, "db", "url"), wantURL)
	}
	// Again: the same database, the password kept.
	wantStatus(t, "provision again", h.send("PUT", base+"/db", jsonOf(map[string]any{"provision": map[string]string{"adapter_id": adapterID}})), http.StatusOK)
	if h.resolveSlot(t, app, "db", "password") != pw {
		t.Error("provisioning again changed the password")
	}

	a = h.send("GET", base, "")
	wantStatus(t, "list", a, http.StatusOK)
	if db := slotByKey(t, a, "db"); !db.Filled || *db.Mode != "provision" || *db.AdapterID != adapterID {
		t.Errorf("db = %+v", db)
	}
	entries, _ := json.Marshal(h.auditEntries(t))
	for where, text := range map[string]string{"the list": string(a.body), "the audit log": string(entries), "the log": h.logs.String()} {
		for _, secret := range []string{pw, valuePW, "canary-bind-pw", pg.Password} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains a password", where)
			}
		}
	}

	// The server stops: provisioning answers ADAPTER_UNAVAILABLE, and
	// the fill stays as it was.
	pg.Stop()
	wantError(t, "provision with the server down", h.send("PUT", base+"/db", `{"provision":{"rotate_password":true}}`), http.StatusBadGateway, errcode.AdapterUnavailable)
	if h.resolveSlot(t, app, "db", "password") != pw {
		t.Error("a failed provision changed the fill")
	}
}

func TestVolumesAPI(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Volume App")
	base := api + "/apps/" + app + "/volumes"
	a := h.send("GET", base, "")
	wantStatus(t, "list without a spec", a, http.StatusOK)
	if len(decodeAs[volumeListDTO](t, a).Items) != 0 {
		t.Errorf("list = %s", a.body)
	}
	wantError(t, "declare without a spec", h.send("POST", base, `{"name":"uploads","size_bytes":1048576,"path":"/uploads"}`), http.StatusConflict, errcode.StateInvalid)

	h.specRevision(t, app)
	list := decodeAs[volumeListDTO](t, h.send("GET", base, "")).Items
	if len(list) != 1 || list[0].Name != "data" || list[0].SizeBytes != 1<<30 || len(list[0].Mounts) != 1 ||
		list[0].Mounts[0] != (volumes.Mount{Workload: "web", Path: "/data"}) {
		t.Fatalf("list = %+v", list)
	}

	before := h.auditEntries(t)
	a = h.send("POST", base, `{"name":"uploads","size_bytes":2097152,"workload":"worker","path":"/srv/uploads"}`)
	wantStatus(t, "declare", a, http.StatusCreated)
	c := decodeAs[volumes.Created](t, a)
	if c.Spec.Number != 2 || c.Volume.ID == nil || c.Volume.Name != "uploads" || c.Volume.Mounts[0] != (volumes.Mount{Workload: "worker", Path: "/srv/uploads"}) {
		t.Fatalf("declare answered %s", a.body)
	}
	got := newEntries(before, h.auditEntries(t))
	if len(got) != 1 || got[0].Action != "volume.create" || *got[0].TargetID != *c.Volume.ID {
		t.Fatalf("audit = %v", actionsOf(got))
	}
	rev := decodeAs[specAnswer](t, h.send("GET", api+"/apps/"+app+"/specs/2", ""))
	if rev.Spec.Pinned || rev.Spec.Spec.Volumes["uploads"].SizeBytes != 2<<20 {
		t.Errorf("revision 2 = %+v", rev.Spec)
	}
	if n := len(decodeAs[volumeListDTO](t, h.send("GET", base, "")).Items); n != 2 {
		t.Errorf("%d volumes in the latest revision", n)
	}

	for _, c := range []struct {
		name, body string
		status     int
		code       errcode.Code
		field      string
	}{
		{"bad name", `{"name":"Up","size_bytes":1048576,"path":"/up"}`, 400, errcode.ValidInvalid, "name"},
		{"too small", `{"name":"up","size_bytes":1024,"path":"/up"}`, 400, errcode.ValidInvalid, "size_bytes"},
		{"relative path", `{"name":"up","size_bytes":1048576,"path":"up"}`, 400, errcode.ValidInvalid, "path"},
		{"no such workload", `{"name":"up","size_bytes":1048576,"workload":"cron","path":"/up"}`, 400, errcode.ValidInvalid, "workload"},
		{"unknown field", `{"name":"up","size_bytes":1048576,"path":"/up","mode":"rw"}`, 400, errcode.ValidInvalid, "mode"},
		{"size as text", `{"name":"up","size_bytes":"1M","path":"/up"}`, 400, errcode.ValidInvalid, "size_bytes"},
		{"declared already", `{"name":"data","size_bytes":1048576,"path":"/other"}`, 409, errcode.StateInvalid, "name"},
	} {
		e := wantError(t, c.name, h.send("POST", base, c.body), c.status, c.code)
		if e.Details["field"] != c.field {
			t.Errorf("%s: field = %v (%s)", c.name, e.Details["field"], e.Message)
		}
	}
}

// keptVolume makes an app with volumes (rows made by declaring one),
// deletes it keeping them, and returns the app's slug and the ID of its
// kept volume "files".
func (h *harness) keptVolume(t testing.TB, name string) (slug, volumeID string) {
	t.Helper()
	app := h.app(t, name)
	h.specRevision(t, app)
	a := h.send("POST", api+"/apps/"+app+"/volumes", `{"name":"files","path":"/files"}`)
	if a.status != http.StatusCreated {
		t.Fatalf("declare a volume: %d %s", a.status, a.body)
	}
	id := *decodeAs[volumes.Created](t, a).Volume.ID
	got := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+app, ""))
	if a := h.send("DELETE", api+"/apps/"+app+"?backup=true", ""); a.status != http.StatusNoContent {
		t.Fatalf("delete the app keeping its volumes: %d %s", a.status, a.body)
	}
	return got.App.Slug, id
}

// TestVolumesAsResources: volumes have IDs, outlive their app (listed with
// app_gone_at), are taken over by a new app of the same slug, deleted
// explicitly; deleting an app with storage needs a decision, force marks
// its data discarded, and require_backup_before_destroy refuses force.
func TestVolumesAsResources(t *testing.T) {
	h := newHarness(t)
	slug, kept := h.keptVolume(t, "Keeper")
	all := decodeAs[volumeListDTO](t, h.send("GET", api+"/volumes", "")).Items
	found := false
	for _, v := range all {
		if v.ID != nil && *v.ID == kept {
			found = v.AppGoneAt != nil && v.Name == "files"
		}
	}
	if !found {
		t.Fatalf("GET /volumes = %+v, want %s kept with app_gone_at", all, kept)
	}

	// A new app of the same slug takes it over.
	app := h.app(t, "Keeper")
	if got := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+app, "")).App.Slug; got != slug {
		t.Fatalf("slug %q, want %q", got, slug)
	}
	h.specRevision(t, app)
	a := h.send("POST", api+"/apps/"+app+"/volumes", jsonOf(map[string]any{"name": "files", "path": "/files", "volume_id": kept}))
	wantStatus(t, "take over", a, http.StatusCreated)
	if c := decodeAs[volumes.Created](t, a); *c.Volume.ID != kept || c.Volume.AppGoneAt != nil {
		t.Fatalf("take over = %s", a.body)
	}
	wantError(t, "delete a live volume", h.send("DELETE", api+"/volumes/"+kept, ""), http.StatusConflict, errcode.StateInvalid)

	// No decision: refused; force under require_backup_before_destroy:
	// refused; force: discarded.
	wantError(t, "no decision", h.send("DELETE", api+"/apps/"+app, ""), http.StatusConflict, errcode.StateBackupDecision)
	wantStatus(t, "policy", h.send("PUT", api+"/policy", `{"policy":{"require_backup_before_destroy":true}}`), http.StatusOK)
	wantError(t, "force under policy", h.send("DELETE", api+"/apps/"+app+"?force=true", ""), http.StatusForbidden, errcode.PolicyBackupRequired)
	wantStatus(t, "policy", h.send("PUT", api+"/policy", `{"policy":{}}`), http.StatusOK)
	wantStatus(t, "force", h.send("DELETE", api+"/apps/"+app+"?force=true", ""), http.StatusNoContent)
	deleted := h.eventsOf(t, "app.deleted", "")
	if last := deleted[len(deleted)-1]; last.Data["volumes_discarded"] != true || last.Data["backup_id"] != nil {
		t.Errorf("app.deleted = %v", last.Data)
	}
	for _, v := range decodeAs[volumeListDTO](t, h.send("GET", api+"/volumes", "")).Items {
		if *v.ID == kept {
			t.Errorf("a discarded volume is listed: %+v", v)
		}
	}
	wantError(t, "delete a discarded volume", h.send("DELETE", api+"/volumes/"+kept, ""), http.StatusNotFound, errcode.NotFound)

	// A kept volume deleted explicitly.
	_, other := h.keptVolume(t, "Other Keeper")
	wantStatus(t, "delete a kept volume", h.send("DELETE", api+"/volumes/"+other, ""), http.StatusNoContent)
	wantError(t, "again", h.send("DELETE", api+"/volumes/"+other, ""), http.StatusNotFound, errcode.NotFound)
}

// backedUp gives app a volume (its rows made by declaring one) and takes a
// backup of it, waiting until it completed; it returns the backup's ID.
func (h *harness) backedUp(t testing.TB, app string) string {
	t.Helper()
	h.specRevision(t, app)
	a := h.send("POST", api+"/apps/"+app+"/volumes", jsonOf(map[string]any{"name": uniq("bk"), "path": "/" + uniq("bk")}))
	if a.status != http.StatusCreated {
		t.Fatalf("declare a volume: %d %s", a.status, a.body)
	}
	dir := h.procs.VolumePath(*decodeAs[volumes.Created](t, a).Volume.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("backed up by "+app), 0o600); err != nil {
		t.Fatal(err)
	}
	a = h.send("POST", api+"/backups", jsonOf(map[string]string{"app_id": app}))
	if a.status != http.StatusAccepted {
		t.Fatalf("take a backup: %d %s", a.status, a.body)
	}
	return h.waitBackup(t, decodeAs[backupAnswer](t, a).Backup.ID).ID
}

// TestBundleAPI: without app_id, a backup is a bundle of the whole
// installation: the store saved with its index and digest, and every
// volume, each with its app. It verifies, and is not restored over a
// running installation.
func TestBundleAPI(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Bundled")
	h.backedUp(t, app)
	// Without app_id: a bundle of the whole installation, the store saved
	// with its digest and every volume, app's included.
	a := h.send("POST", api+"/backups", `{}`)
	if a.status != http.StatusAccepted {
		t.Fatalf("take a bundle: %d %s", a.status, a.body)
	}
	bundle := h.waitBackup(t, decodeAs[backupAnswer](t, a).Backup.ID)
	if bundle.Kind != backups.KindDR || bundle.AppID != nil || bundle.Store == nil || len(bundle.Store.Digest) != 64 || bundle.Store.Applied == 0 {
		t.Fatalf("bundle = %+v", bundle)
	}
	if !slices.ContainsFunc(bundle.Volumes, func(v backups.Volume) bool { return v.AppID == app }) {
		t.Errorf("the bundle holds %+v, not the volume of app %s", bundle.Volumes, app)
	}
	wantError(t, "a bundle restored over a running installation", h.send("POST", api+"/backups/"+bundle.ID+"/restore", ""),
		http.StatusConflict, errcode.PlanCapabilityUnsupp)
	if v := decodeAs[backups.Verified](t, h.send("POST", api+"/backups/"+bundle.ID+"/verify", "")); !v.OK {
		t.Errorf("the bundle does not verify: %+v", v.Problems)
	}
}

// waitBackup waits for a backup to complete and returns it; it fails the
// test if the backup fails.
func (h *harness) waitBackup(t testing.TB, id string) backups.Backup {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b := decodeAs[backupAnswer](t, h.send("GET", api+"/backups/"+id, "")).Backup
		switch {
		case b.State == "completed":
			return b
		case b.State == "failed" || time.Now().After(deadline):
			t.Fatalf("backup %s: %s %+v", id, b.State, b.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBackupsAPI: a backup of an app without volumes is refused; one
// taken is listed by app and kind, verifies ok; with one of its chunks
// altered on the storage, verify answers the problem and both restores
// refuse it with 422 BACKUP_INCOMPLETE before anything changes.
func TestBackupsAPI(t *testing.T) {
	h := newHarness(t)
	bare := h.app(t, "Bare")
	wantError(t, "no volumes", h.send("POST", api+"/backups", jsonOf(map[string]string{"app_id": bare})), http.StatusConflict, errcode.StateInvalid)
	app := h.app(t, "Backed")
	id := h.backedUp(t, app)
	var list struct {
		Items []backups.Backup `json:"items"`
	}
	list = decodeAs[struct {
		Items []backups.Backup `json:"items"`
	}](t, h.send("GET", api+"/backups?app_id="+app+"&kind=rolling", ""))
	if len(list.Items) != 1 || list.Items[0].ID != id || list.Items[0].SizeBytes == 0 || list.Items[0].Consistency != "stopped" {
		t.Fatalf("list = %+v", list.Items)
	}
	wantError(t, "a bad kind", h.send("GET", api+"/backups?kind=weekly", ""), http.StatusBadRequest, errcode.ValidInvalid)
	var v backups.Verified
	v = decodeAs[backups.Verified](t, h.send("POST", api+"/backups/"+id+"/verify", ""))
	if !v.OK || v.Backup.VerifiedAt == nil {
		t.Fatalf("verify = %+v", v)
	}

	chunks, err := filepath.Glob(filepath.Join(h.dir, "backups", "chunks", "*", "*"))
	if err != nil || len(chunks) == 0 {
		t.Fatalf("chunks on the storage: %v %v", chunks, err)
	}
	b, _ := os.ReadFile(chunks[0])
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(chunks[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	v = decodeAs[backups.Verified](t, h.send("POST", api+"/backups/"+id+"/verify", ""))
	if v.OK || len(v.Problems) != 1 || v.Problems[0].Code != errcode.BackupIncomplete {
		t.Fatalf("verify of an altered backup = %+v", v)
	}
	wantError(t, "restore by backup", h.send("POST", api+"/backups/"+id+"/restore", ""), http.StatusUnprocessableEntity, errcode.BackupIncomplete)
	wantError(t, "restore by app", h.send("POST", api+"/apps/"+app+"/restore", jsonOf(map[string]string{"backup_id": id})), http.StatusUnprocessableEntity, errcode.BackupIncomplete)
	wantError(t, "another app's", h.send("POST", api+"/apps/"+bare+"/restore", jsonOf(map[string]string{"backup_id": id})), http.StatusNotFound, errcode.NotFound)
	for _, e := range h.allEvents(t) {
		if e.Type == "backup.restored" || e.Type == "app.data_restored" {
			t.Errorf("a refused restore emitted %s", e.Type)
		}
	}
}
