package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

// TestBundleRestoresAFreshInstallation: an installation with the go-notes
// sample (a note in its volume) and a secret takes a disaster-recovery
// bundle; a note is written after it and the server stopped. svc restore
// with a key that is not the installation's refuses and writes nothing;
// with the installation's backup key it restores the bundle into a new
// work directory: the store's digest is the bundle's. A server started
// there runs the app with the bundle's data (not the later note), which
// it can write to, and reads the secret (the keyring came back too).
func TestBundleRestoresAFreshInstallation(t *testing.T) {
	operator, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	srv := startAppServer(t, "bundle-origin", "SVC_BACKUPS_RECIPIENTS="+operator.Recipient().String())
	id, _ := srv.onboard(t, "notes", "go-notes", "go")
	var vc struct {
		Spec struct {
			Revision int `json:"revision"`
		} `json:"spec"`
	}
	srv.must(t, "POST", "/apps/"+id+"/volumes", map[string]any{"name": "data", "path": "/data", "size_bytes": 64 << 20}, http.StatusCreated, &vc)
	srv.deployed(t, id, vc.Spec.Revision)
	note(t, srv.waitDeployed(t, id), "kept by the bundle")
	srv.must(t, "PUT", "/apps/"+id+"/secrets/API_KEY", map[string]any{"value": "s3cret-of-the-bundle"}, http.StatusOK, nil)

	type bundle struct {
		ID    string `json:"id"`
		Kind  string `json:"kind"`
		State string `json:"state"`
		Store *struct {
			Applied uint64 `json:"applied"`
			Digest  string `json:"digest"`
		} `json:"store"`
		Volumes []struct {
			ID    string `json:"id"`
			AppID string `json:"app_id"`
		} `json:"volumes"`
	}
	var b struct{ Backup bundle }
	srv.must(t, "POST", "/backups", map[string]any{}, http.StatusAccepted, &b)
	deadline := time.Now().Add(scaled(120 * time.Second))
	for b.Backup.State != "completed" {
		if b.Backup.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("bundle %s: %s", b.Backup.ID, b.Backup.State)
		}
		time.Sleep(200 * time.Millisecond)
		srv.must(t, "GET", "/backups/"+b.Backup.ID, nil, http.StatusOK, &b)
	}
	if b.Backup.Kind != "dr_bundle" || b.Backup.Store == nil || len(b.Backup.Store.Digest) != 64 || len(b.Backup.Volumes) != 1 || b.Backup.Volumes[0].AppID != id {
		t.Fatalf("the bundle: %+v", b.Backup)
	}
	note(t, srv.waitRunning(t, id), "written after the bundle")
	srv.shutdown(t)

	newWork := filepath.Join(passableDir(t), "work")
	restore := func(identity string, flags ...string) (string, string, int) {
		return cliRun(t, t.TempDir(), "", []string{"SVC_SERVER_WORK_DIR=" + newWork},
			append([]string{"restore", "--bundle", b.Backup.ID, "--identity", identity,
				"--storage", "local", "--setting", "path=" + filepath.Join(srv.work, "backups")}, flags...)...)
	}
	keyFile := func(id *age.X25519Identity) string {
		p := filepath.Join(t.TempDir(), "key")
		if err := os.WriteFile(p, []byte(id.String()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stranger, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	// A stranger's key does not decrypt; the operator's (a recipient)
	// decrypts but cannot authenticate: refused unless trusted. Neither
	// writes anything.
	for _, c := range []struct{ name, key, want string }{
		{"a stranger's key", keyFile(stranger), "cannot be decrypted"},
		{"the operator's recipient key", keyFile(operator), "does not authenticate"},
	} {
		if out, errOut, code := restore(c.key); code != 1 || !strings.Contains(errOut, c.want) {
			t.Fatalf("restore with %s: exit %d\n%s\n%s", c.name, code, out, errOut)
		}
		if _, err := os.Stat(filepath.Join(newWork, "raft")); !os.IsNotExist(err) {
			t.Fatalf("a refused restore with %s left a store behind (%v)", c.name, err)
		}
	}
	out, errOut, code := restore(filepath.Join(srv.work, "keyring", "backup-key"))
	if code != 0 {
		t.Fatalf("svc restore: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "digest "+b.Backup.Store.Digest+" (the bundle's)") {
		t.Fatalf("svc restore does not report the bundle's digest %s:\n%s", b.Backup.Store.Digest, out)
	}
	t.Logf("svc restore:\n%s", out)
	if _, _, code := restore(filepath.Join(srv.work, "keyring", "backup-key")); code != 1 {
		t.Fatalf("a second restore over the restored installation: exit %d, want 1", code)
	}

	restored := startAppServerIn(t, "bundle-restored", newWork)
	addr := restored.waitRunning(t, id)
	body := waitAnswer(t, addr, "/", "kept by the bundle")
	if strings.Contains(body, "written after the bundle") {
		t.Fatalf("the restored app has a note written after the bundle: %q", body)
	}
	note(t, addr, "written after the restore")
	var sec struct {
		Value string `json:"value"`
	}
	restored.must(t, "GET", "/apps/"+id+"/secrets/API_KEY/value", nil, http.StatusOK, &sec)
	if sec.Value != "s3cret-of-the-bundle" {
		t.Fatalf("the restored secret is %q", sec.Value)
	}
	var after struct{ Backup bundle }
	restored.must(t, "GET", "/backups/"+b.Backup.ID, nil, http.StatusOK, &after)
	if after.Backup.State != "completed" {
		t.Errorf("the restored installation records its bundle as %s", after.Backup.State)
	}
}
