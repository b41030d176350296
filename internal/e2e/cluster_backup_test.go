package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/svchost/svc/internal/testserver"
	"github.com/svchost/svc/internal/vaulttest"
)

// TestClusterModeBackupRestoresNomadVolume runs the real binary against
// the fake Nomad: an app deployed on the nomad runtime with a volume (a
// dynamic host volume on the fake's node) is backed up, live, through a
// copy job (no longer refused); its data is changed on the node, the
// backup restored: the node's volume holds the backed-up data again and
// nothing else.
func TestClusterModeBackupRestoresNomadVolume(t *testing.T) {
	v := vaulttest.Start(t)
	f := startFakes(t, v)
	first, err := testserver.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	s := startAppServer(t, "cluster-backup", "SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first+2))
	configureClusterMode(t, s, v, f, s.p.Base())
	id := s.onboardDir(t, "Volume app", "clusterapp", "python")
	var vc struct {
		Volume struct {
			ID string `json:"id"`
		} `json:"volume"`
		Spec struct {
			Revision int `json:"revision"`
		} `json:"spec"`
	}
	s.must(t, "POST", "/apps/"+id+"/volumes", map[string]any{"name": "data", "path": "/data", "size_bytes": 64 << 20}, http.StatusCreated, &vc)
	s.deployed(t, id, vc.Spec.Revision)
	entries, err := os.ReadDir(filepath.Join(f.Dir, "volumes"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("the fake's node holds volumes %v (%v); want the app's one", entries, err)
	}
	vol := filepath.Join(f.Dir, "volumes", entries[0].Name())
	put := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(vol, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("notes.txt", "first\n")

	var b struct {
		Backup struct {
			ID          string `json:"id"`
			State       string `json:"state"`
			Consistency string `json:"consistency"`
			PlainBytes  int64  `json:"plain_bytes"`
			Error       *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"backup"`
	}
	s.must(t, "POST", "/backups", map[string]any{"app_id": id}, http.StatusAccepted, &b)
	deadline := time.Now().Add(scaled(90 * time.Second))
	for b.Backup.State != "completed" {
		if b.Backup.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("backup %s: %s %+v", b.Backup.ID, b.Backup.State, b.Backup.Error)
		}
		time.Sleep(200 * time.Millisecond)
		s.must(t, "GET", "/backups/"+b.Backup.ID, nil, http.StatusOK, &b)
	}
	if b.Backup.Consistency != "live" || b.Backup.PlainBytes != int64(len("first\n")) {
		t.Errorf("backup %+v: want a live copy of the volume's %d bytes", b.Backup, len("first\n"))
	}

	put("notes.txt", "second\n")
	put("extra.txt", "written after the backup\n")
	s.must(t, "POST", "/apps/"+id+"/restore", map[string]any{"backup_id": b.Backup.ID}, http.StatusAccepted, nil)
	deadline = time.Now().Add(scaled(90 * time.Second))
	for {
		// The restore is done once the volume holds the backup's data and
		// nothing else: neither what was written since nor the staging.
		got, err := os.ReadFile(filepath.Join(vol, "notes.txt"))
		left, _ := os.ReadDir(vol)
		if err == nil && string(got) == "first\n" && len(left) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restore the volume holds %v, notes.txt %q (%v); want the backup's notes.txt alone", left, got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
