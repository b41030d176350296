package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestVolumeDataSurvivesAndIsRestored: the go-notes sample keeps notes in
// its volume on the process runtime. A note survives a redeploy, a restart
// and a rollback; a backup is taken and verified, another note written,
// the backup restored: the old data is back (and the app restarted on
// it); deleting the app the CLI's way (backup=true) takes a final backup
// and keeps the volume.
func TestVolumeDataSurvivesAndIsRestored(t *testing.T) {
	srv := startAppServer(t, "storage")
	id, _ := srv.onboard(t, "notes", "go-notes", "go")
	var vc struct {
		Volume struct {
			ID string `json:"id"`
		} `json:"volume"`
		Spec struct {
			Revision int `json:"revision"`
		} `json:"spec"`
	}
	srv.must(t, "POST", "/apps/"+id+"/volumes", map[string]any{"name": "data", "path": "/data", "size_bytes": 64 << 20}, http.StatusCreated, &vc)
	if !strings.HasPrefix(vc.Volume.ID, "vol_") {
		t.Fatalf("the volume's ID %q", vc.Volume.ID)
	}
	srv.deployed(t, id, vc.Spec.Revision)
	note(t, srv.waitDeployed(t, id), "first note")

	// Version 2: a new revision (an environment variable more), a new job.
	var rev struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	srv.must(t, "GET", fmt.Sprintf("/apps/%s/specs/%d", id, vc.Spec.Revision), nil, http.StatusOK, &rev)
	doc := rev.Spec.Spec
	web := doc["workloads"].(map[string]any)["web"].(map[string]any)
	env, _ := web["env"].(map[string]any)
	if env == nil {
		env = map[string]any{}
	}
	env["VERSION"] = "2"
	web["env"] = env
	srv.deployed(t, id, srv.newRevision(t, id, doc))
	body := waitAnswer(t, srv.waitDeployed(t, id), "/", "first note")
	if !strings.Contains(body, "version 2") {
		t.Fatalf("version 2 answers %q", body)
	}
	srv.must(t, "POST", "/apps/"+id+"/restart", nil, http.StatusAccepted, nil)
	waitAnswer(t, srv.waitRunning(t, id), "/", "first note")
	var rb struct{ Deployment deployment }
	srv.must(t, "POST", "/apps/"+id+"/deployments/rollback", nil, http.StatusAccepted, &rb)
	if _, end := srv.follow(t, id, rb.Deployment.ID); end.State != "succeeded" {
		t.Fatalf("rollback ended %s %s", end.State, end.code())
	}
	addr := srv.waitRunning(t, id)
	waitAnswer(t, addr, "/", "first note")

	var b struct {
		Backup struct {
			ID    string `json:"id"`
			State string `json:"state"`
			Size  int64  `json:"size_bytes"`
		} `json:"backup"`
	}
	srv.must(t, "POST", "/backups", map[string]any{"app_id": id}, http.StatusAccepted, &b)
	deadline := time.Now().Add(scaled(60 * time.Second))
	for b.Backup.State != "completed" {
		if b.Backup.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("backup %s: %s", b.Backup.ID, b.Backup.State)
		}
		time.Sleep(100 * time.Millisecond)
		srv.must(t, "GET", "/backups/"+b.Backup.ID, nil, http.StatusOK, &b)
	}
	var v struct {
		OK bool `json:"ok"`
	}
	srv.must(t, "POST", "/backups/"+b.Backup.ID+"/verify", nil, http.StatusOK, &v)
	if !v.OK || b.Backup.Size == 0 {
		t.Fatalf("verify: ok %v, size %d", v.OK, b.Backup.Size)
	}

	note(t, addr, "second note")
	srv.must(t, "POST", "/apps/"+id+"/restore", map[string]any{"backup_id": b.Backup.ID}, http.StatusAccepted, nil)
	deadline = time.Now().Add(scaled(60 * time.Second))
	for {
		addr = srv.waitRunning(t, id)
		code, body, err := hit("GET", addr, "/")
		if err == nil && code == http.StatusOK && strings.Contains(body, "first note") && !strings.Contains(body, "second note") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restore GET / = %d %q (%v); want the first note only", code, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The restored data is the app's: it writes again.
	note(t, addr, "third note")

	srv.must(t, "DELETE", "/apps/"+id+"?backup=true", nil, http.StatusNoContent, nil)
	var list struct {
		Items []struct {
			Kind  string `json:"kind"`
			State string `json:"state"`
		} `json:"items"`
	}
	srv.must(t, "GET", "/backups?app_id="+id+"&kind=on_delete", nil, http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0].State != "completed" {
		t.Fatalf("on_delete backups = %+v", list.Items)
	}
	var vols struct {
		Items []struct {
			ID        string  `json:"id"`
			AppGoneAt *string `json:"app_gone_at"`
		} `json:"items"`
	}
	srv.must(t, "GET", "/volumes", nil, http.StatusOK, &vols)
	if len(vols.Items) != 1 || vols.Items[0].ID != vc.Volume.ID || vols.Items[0].AppGoneAt == nil {
		t.Fatalf("volumes after the deletion = %+v", vols.Items)
	}
}

// note posts a note to a go-notes app and checks it is listed.
func note(t *testing.T, addr, text string) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/notes", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /notes: %d", resp.StatusCode)
	}
	waitAnswer(t, addr, "/", text)
}

// TestRestoreKilledIsWholeAfterRestart: a restore of a 48 MiB volume is
// asked for and the server killed (SIGKILL) at once, a little later, and
// once the restore is done, four times; after each restart the volume holds wholly the data it had or
// wholly the backup's, never a mix, and nothing of the restore's staging
// is left.
func TestRestoreKilledIsWholeAfterRestart(t *testing.T) {
	srv := startAppServer(t, "restore-kill")
	id := srv.createApp(t, "kept")
	doc := specDoc{"workloads": map[string]any{"web": map[string]any{"primary": true, "build": map[string]any{"kind": "static"}}}}
	srv.newRevision(t, id, doc)
	var vc struct {
		Volume struct {
			ID string `json:"id"`
		} `json:"volume"`
	}
	srv.must(t, "POST", "/apps/"+id+"/volumes", map[string]any{"name": "data", "path": "/data"}, http.StatusCreated, &vc)
	dir := filepath.Join(srv.work, "runtime", "volumes", vc.Volume.ID, "data") // the process runtime's work dir
	fill := func(tag string) string {
		t.Helper()
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			b := bytes.Repeat([]byte(fmt.Sprintf("%s-%d:", tag, i)), (16<<20)/len(tag)+1)
			if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "sub", fmt.Sprintf("f%d", i)), b[:16<<20], 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return treeDigest(t, dir)
	}
	backedUp := fill("backed-up")
	var b struct {
		Backup struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"backup"`
	}
	srv.must(t, "POST", "/backups", map[string]any{"app_id": id}, http.StatusAccepted, &b)
	deadline := time.Now().Add(scaled(60 * time.Second))
	for b.Backup.State != "completed" {
		if b.Backup.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("backup: %s", b.Backup.State)
		}
		time.Sleep(100 * time.Millisecond)
		srv.must(t, "GET", "/backups/"+b.Backup.ID, nil, http.StatusOK, &b)
	}
	outcomes := map[string]int{}
	for i, wait := range []time.Duration{0, 400 * time.Millisecond, 900 * time.Millisecond, 3 * time.Second} {
		current := fill(fmt.Sprintf("current-%d", i))
		srv.must(t, "POST", "/apps/"+id+"/restore", map[string]any{"backup_id": b.Backup.ID}, http.StatusAccepted, nil)
		time.Sleep(wait)
		srv.p.kill()
		srv.p.restart()
		switch got := treeDigest(t, dir); got {
		case current:
			outcomes["old"]++
		case backedUp:
			outcomes["new"]++
		default:
			t.Fatalf("kill %d: the volume holds a mix:\n%s", i, got)
		}
		if left, _ := filepath.Glob(dir + ".restore-*"); len(left) != 0 {
			t.Fatalf("kill %d: staging left: %v", i, left)
		}
	}
	t.Logf("after 4 kills: %v", outcomes)
	// Left alone, a restore completes.
	fill("last")
	srv.must(t, "POST", "/apps/"+id+"/restore", map[string]any{"backup_id": b.Backup.ID}, http.StatusAccepted, nil)
	deadline = time.Now().Add(scaled(60 * time.Second))
	for treeDigest(t, dir) != backedUp {
		if time.Now().After(deadline) {
			out, _ := exec.Command("ls", "-laR", filepath.Dir(dir)).CombinedOutput()
			t.Fatalf("the restore left alone did not complete:\n%s\n%s", treeDigest(t, dir), out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// treeDigest lists a tree's files with their sizes and SHA-256.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%s %d %x", rel, len(b), sha256.Sum256(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
