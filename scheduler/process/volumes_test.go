package process_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

func TestVolumeEnv(t *testing.T) {
	for in, want := range map[string]string{
		"data":       "SVC_VOLUME_DATA",
		"user-files": "SVC_VOLUME_USER_FILES",
		"a.b":        "SVC_VOLUME_A_B",
		"v2":         "SVC_VOLUME_V2",
	} {
		if got := process.VolumeEnv(in); got != want {
			t.Errorf("VolumeEnv(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestVolumeWithoutSandbox: the volume's directory is made (0700) under
// the app, named in SVC_VOLUME_<NAME> and linked at the mount path in the
// working directory (never in the artifact itself); it outlives Stop.
func TestVolumeWithoutSandbox(t *testing.T) {
	cfg := testConfig(t)
	rt := newRuntime(t, cfg)
	wd := filepath.Join(cfg.WorkDir, "work", "job-v", "w")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	art := commandArtifact(t)
	_, err := rt.Run(ctx, scheduler.Job{ID: "job-v", AppID: "app-1", Workloads: map[string]scheduler.Task{"w": {
		Artifact: art,
		Command:  []string{"sh", "-c", `echo "$SVC_VOLUME_USER_FILES" > env.txt; echo via-link > var/lib/files/f; exec sleep 1000`},
		NoPort:   true,
		Mounts:   []scheduler.Mount{{Volume: "user-files", Path: "/var/lib/files"}},
	}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	dir := rt.VolumeDir("app-1", scheduler.Mount{Volume: "user-files"})
	waitUntil(t, "the workload's write through the link", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(dir, "f"))
		return err == nil && string(b) == "via-link\n", string(b)
	})
	if b, _ := os.ReadFile(filepath.Join(wd, "env.txt")); strings.TrimSpace(string(b)) != dir {
		t.Errorf("SVC_VOLUME_USER_FILES = %q, want %q", b, dir)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("volume directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if link, err := os.Readlink(filepath.Join(wd, "var", "lib", "files")); err != nil || link != dir {
		t.Errorf("link in the working directory = %q, %v; want %q", link, err, dir)
	}
	if _, err := os.Lstat(filepath.Join(art.Dir, "var")); err == nil {
		t.Error("the artifact was written: its copy is the working directory")
	}
	if err := rt.Stop(ctx, "job-v"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); err != nil {
		t.Errorf("the volume after stop: %v, want it kept", err)
	}
}

func TestMountsRefused(t *testing.T) {
	rt := newRuntime(t, testConfig(t))
	art := commandArtifact(t)
	if err := os.WriteFile(filepath.Join(art.Dir, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		appID string
		m     scheduler.Mount
	}{
		{"parent directory", "app", scheduler.Mount{Volume: "v", Path: "/data/../etc"}},
		{"relative path", "app", scheduler.Mount{Volume: "v", Path: "data"}},
		{"the root", "app", scheduler.Mount{Volume: "v", Path: "/"}},
		{"proc", "app", scheduler.Mount{Volume: "v", Path: "/proc/x"}},
		{"volume name with a slash", "app", scheduler.Mount{Volume: "a/b", Path: "/data"}},
		{"no app", "", scheduler.Mount{Volume: "v", Path: "/data"}},
		{"a file of the artifact in the way", "app", scheduler.Mount{Volume: "v", Path: "/data"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rt.Run(context.Background(), scheduler.Job{ID: "job-bad", AppID: tt.appID, Workloads: map[string]scheduler.Task{"w": {
				Artifact: art, Command: []string{"sleep", "1000"}, NoPort: true, Mounts: []scheduler.Mount{tt.m},
			}}})
			if errcode.CodeOf(err) != errcode.ValidInvalid {
				t.Errorf("run = %v, want VALID_INVALID", err)
			}
		})
	}
}

// TestVolumeByIDAdoptsLegacyData: a mount with a volume ID keeps its data
// under the ID; data kept by the app's ID and the volume's name (before
// volumes had IDs) is moved there on first use, and the workload reads it;
// RemoveVolume removes it for good.
func TestVolumeByIDAdoptsLegacyData(t *testing.T) {
	cfg := testConfig(t)
	rt := newRuntime(t, cfg)
	legacy := rt.VolumeDir("app-1", scheduler.Mount{Volume: "data"})
	if err := os.MkdirAll(legacy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, "old"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	mount := scheduler.Mount{Volume: "data", ID: "vol_01TEST", Path: "/data"}
	_, err := rt.Run(ctx, scheduler.Job{ID: "job-id", AppID: "app-1", Workloads: map[string]scheduler.Task{"w": {
		Artifact: commandArtifact(t),
		Command:  []string{"sh", "-c", `cat "$SVC_VOLUME_DATA/old" > "$SVC_VOLUME_DATA/copy"; exec sleep 1000`},
		NoPort:   true,
		Mounts:   []scheduler.Mount{mount},
	}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	dir := rt.VolumePath("vol_01TEST")
	if got := rt.VolumeDir("app-1", mount); got != dir {
		t.Fatalf("VolumeDir = %q, want the ID's place %q", got, dir)
	}
	waitUntil(t, "the workload's copy of the adopted data", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(dir, "copy"))
		return err == nil && string(b) == "kept", string(b)
	})
	if _, err := os.Lstat(legacy); err == nil {
		t.Errorf("the old place %s is still there", legacy)
	}
	if err := rt.Stop(ctx, "job-id"); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveVolume("vol_01TEST"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Dir(dir)); err == nil {
		t.Error("the volume is still there after RemoveVolume")
	}
	if err := rt.RemoveVolume("../etc"); !errcode.Has(err, errcode.ValidInvalid) {
		t.Errorf("RemoveVolume(../etc) = %v, want VALID_INVALID", err)
	}
}

// TestPauseStopsWritesUntilResumed: Pause stops a workload's processes (a
// counter it writes stays still), resume lets them go on, and pausing an
// unknown job is NOT_FOUND.
func TestPauseStopsWritesUntilResumed(t *testing.T) {
	for name, cfg := range map[string]func(*testing.T) process.Config{"plain": testConfig, "sandbox": sandboxConfig} {
		t.Run(name, func(t *testing.T) { testPause(t, cfg(t)) })
	}
}

func testPause(t *testing.T, cfg process.Config) {
	rt := newRuntime(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	_, err := rt.Run(ctx, scheduler.Job{ID: "job-p", AppID: "app-p", Workloads: map[string]scheduler.Task{"w": {
		Artifact: commandArtifact(t),
		Command:  []string{"sh", "-c", `i=0; while :; do i=$((i+1)); echo $i > "$SVC_VOLUME_DATA/n.tmp"; mv "$SVC_VOLUME_DATA/n.tmp" "$SVC_VOLUME_DATA/n"; sleep 0.02; done`},
		NoPort:   true,
		Mounts:   []scheduler.Mount{{Volume: "data", ID: "vol_01PAUSE", Path: "/data"}},
	}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	file := filepath.Join(rt.VolumePath("vol_01PAUSE"), "n")
	read := func() string { b, _ := os.ReadFile(file); return string(b) }
	waitUntil(t, "the counter", func() (bool, string) { return read() != "", read() })
	resume, err := rt.Pause(ctx, "job-p")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a write under way when paused lands
	still := read()
	time.Sleep(300 * time.Millisecond)
	if got := read(); got != still {
		t.Errorf("the counter moved while paused: %q then %q", still, got)
	}
	resume()
	resume() // twice is harmless
	waitUntil(t, "the counter after resume", func() (bool, string) { return read() != still, read() })
	if _, err := rt.Pause(ctx, "job-none"); !errcode.Has(err, errcode.NotFound) {
		t.Errorf("Pause(unknown) = %v, want NOT_FOUND", err)
	}
	if err := rt.Stop(ctx, "job-p"); err != nil {
		t.Fatal(err)
	}
}

// TestUsedBytesIsMeasuredAgainAfterItsTTLOrANewHandOver: a volume's use
// is measured by a walk and answered again for usedTTL (listings in a row
// do not walk it each time); restored data handed over, or the volume
// removed, is measured anew.
func TestUsedBytesIsMeasuredAgainAfterItsTTLOrANewHandOver(t *testing.T) {
	rt, err := process.New(process.Config{WorkDir: t.TempDir(), StopGrace: time.Second, Isolation: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := context.Background()
	const vol = "vol_01M8H0DKF8CKX4GVBAKHR5A0YD"
	if _, ok := rt.UsedBytes(ctx, vol); ok {
		t.Fatal("a volume with no data here is measured")
	}
	dir := rt.VolumePath(vol)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), make([]byte, 5000), 0o600); err != nil {
		t.Fatal(err)
	}
	first, ok := rt.UsedBytes(ctx, vol)
	if !ok || first < 5000 {
		t.Fatalf("used = %d, %v; want at least the file's 5000 bytes", first, ok)
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), make([]byte, 7000), 0o600); err != nil {
		t.Fatal(err)
	}
	if again, _ := rt.UsedBytes(ctx, vol); again != first {
		t.Errorf("measured again within its TTL: %d, then %d", first, again)
	}
	if err := rt.HandOver(ctx, "app_x", vol); err != nil {
		t.Fatal(err)
	}
	if after, _ := rt.UsedBytes(ctx, vol); after < first+7000 {
		t.Errorf("after a hand-over the volume measures %d; want at least %d", after, first+7000)
	}
	if err := rt.RemoveVolume(vol); err != nil {
		t.Fatal(err)
	}
	if n, ok := rt.UsedBytes(ctx, vol); ok {
		t.Errorf("a removed volume measures %d", n)
	}
}
