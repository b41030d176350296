package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
)

// TestRestoreRefusesBeforeWriting: svc restore refuses a missing key
// file, a storage it cannot open, and a bundle the storage does not hold,
// with a message saying what to give, and writes nothing into the work
// directory.
func TestRestoreRefusesBeforeWriting(t *testing.T) {
	work := filepath.Join(t.TempDir(), "work")
	t.Setenv("SVC_SERVER_WORK_DIR", work)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notKey := filepath.Join(t.TempDir(), "not-a-key")
	if err := os.WriteFile(notKey, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no bundle", []string{"--identity", key}, 2, "--bundle (a backup ID, or latest) and --identity"},
		{"no key file", []string{"--bundle", "latest", "--identity", filepath.Join(store, "absent"), "--setting", "path=" + store}, 2, "--identity"},
		{"not a key", []string{"--bundle", "latest", "--identity", notKey, "--setting", "path=" + store}, 2, "holds no age identity"},
		{"no path", []string{"--bundle", "latest", "--identity", key}, 2, "--setting path=DIR"},
		{"a relative path", []string{"--bundle", "latest", "--identity", key, "--setting", "path=backups"}, 2, "absolute path"},
		{"a bad setting", []string{"--bundle", "latest", "--identity", key, "--setting", "path"}, 2, "want name=value"},
		{"an unknown storage", []string{"--bundle", "latest", "--identity", key, "--storage", "ftp"}, 2, "local or s3"},
		{"s3 without keys", []string{"--bundle", "latest", "--identity", key, "--storage", "s3", "--setting", "endpoint=https://s3.example.com", "--setting", "bucket=b-1"}, 2, "SVC_RESTORE_S3_ACCESS_KEY_ID"},
		{"no bundle in the storage", []string{"--bundle", "latest", "--identity", key, "--setting", "path=" + store}, 1, "holds no disaster-recovery bundle"},
		{"an absent bundle", []string{"--bundle", "bkp_01M8GV7GGDN2EJZ9FNHWFM541W", "--identity", key, "--setting", "path=" + store}, 1, "no backup bkp_01M8GV7GGDN2EJZ9FNHWFM541W"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(append([]string{"restore"}, c.args...), strings.NewReader(""), &out, &errOut)
			if code != c.code || !strings.Contains(errOut.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d saying %q", code, errOut.String(), c.code, c.want)
			}
			if _, err := os.Stat(filepath.Join(work, "raft")); !os.IsNotExist(err) {
				t.Fatalf("a refused restore wrote a store (%v)", err)
			}
		})
	}
}
