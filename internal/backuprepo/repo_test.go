package backuprepo_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/svchost/svc/backupstores/local"
	"github.com/svchost/svc/backupstores/s3"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/s3test"
)

var ctx = context.Background()

// dirStorage keeps objects as files under a directory: the repository's
// tests' storage (the backup storage adapters pass their own contract
// suite, internal/backuprepo/storagetest).
type dirStorage struct{ dir string }

var _ backuprepo.Storage = (*dirStorage)(nil)

func (d *dirStorage) path(key string) string { return filepath.Join(d.dir, filepath.FromSlash(key)) }

func (d *dirStorage) Put(_ context.Context, key string, r io.Reader, _ int64) error {
	if key != strings.ToLower(key) {
		return errcode.Invalid("key", "keys are lower case: %q", key)
	}
	p := d.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p+".tmp", b, 0o600); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

func (d *dirStorage) Get(_ context.Context, key string) (io.ReadCloser, error) {
	f, err := os.Open(d.path(key))
	if os.IsNotExist(err) {
		return nil, errcode.New(errcode.NotFound, "no object %s", key)
	}
	return f, err
}

func (d *dirStorage) List(_ context.Context, prefix string) ([]backuprepo.Object, error) {
	var out []backuprepo.Object
	err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || strings.HasSuffix(p, ".tmp") {
			return err
		}
		rel, _ := filepath.Rel(d.dir, p)
		key := filepath.ToSlash(rel)
		if strings.HasPrefix(key, prefix) {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			out = append(out, backuprepo.Object{Key: key, Size: fi.Size()})
		}
		return nil
	})
	return out, err
}

func (d *dirStorage) Delete(_ context.Context, key string) error {
	err := os.Remove(d.path(key))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

type fixture struct {
	st   *dirStorage
	repo *backuprepo.Repo
	id   *age.X25519Identity
	work string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	st := &dirStorage{dir: filepath.Join(work, "storage")}
	return &fixture{st: st, id: id, work: work, repo: backuprepo.New(st, backuprepo.Keys{Identity: id}, filepath.Join(work, "journal"))}
}

// tree makes a directory tree: files (path → content), an empty file, a
// nested empty directory and a link.
func tree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty", "deeper"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zero"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/b.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
}

// digest is a tree's content: every path, type, mode (not of links), link
// target and file hash.
func digest(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			lines = append(lines, rel+" link "+l)
		case fi.IsDir():
			lines = append(lines, fmt.Sprintf("%s dir %o", rel, fi.Mode().Perm()))
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			lines = append(lines, fmt.Sprintf("%s file %o %s", rel, fi.Mode().Perm(), hex.EncodeToString(sum[:])))
		}
		return nil
	})
	if err != nil {
		if os.IsNotExist(err) {
			return "(none)"
		}
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func big(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

// TestRoundTripAndDedup: a tree (files over several chunks, an empty
// file, empty directories, a link, modes) comes back the same; a second
// backup of the same data stores only its manifest; a third after one
// change stores the changed chunk.
func TestRoundTripAndDedup(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(f.work, "src")
	tree(t, src, map[string]string{"a/b.txt": "hello", "big.bin": big(3*backuprepo.ChunkSize+123, 1), "c/d/e": "deep"})
	m, err := f.repo.Write(ctx, "bkp_01A", []backuprepo.Part{{Name: "volume/vol_1", Dir: src}})
	if err != nil {
		t.Fatal(err)
	}
	if m.PlainBytes != int64(5+3*backuprepo.ChunkSize+123+4) || m.SizeBytes <= m.PlainBytes {
		t.Fatalf("manifest: plain %d, stored %d", m.PlainBytes, m.SizeBytes)
	}
	m2, err := f.repo.Write(ctx, "bkp_01B", []backuprepo.Part{{Name: "volume/vol_1", Dir: src}})
	if err != nil {
		t.Fatal(err)
	}
	if m2.SizeBytes > 64<<10 {
		t.Errorf("a backup of unchanged data stored %d bytes; want only its manifest", m2.SizeBytes)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "b.txt"), []byte("changed"), 0o640); err != nil {
		t.Fatal(err)
	}
	m3, err := f.repo.Write(ctx, "bkp_01C", []backuprepo.Part{{Name: "volume/vol_1", Dir: src}})
	if err != nil || m3.SizeBytes > 64<<10 {
		t.Errorf("a backup after one small change stored %d bytes (%v)", m3.SizeBytes, err)
	}
	want := digest(t, src)
	if _, problems := f.repo.Verify(ctx, "bkp_01C"); len(problems) != 0 {
		t.Fatalf("verify: %v", problems)
	}
	dst := filepath.Join(f.work, "dst")
	if err := f.repo.Restore(ctx, "bkp_01C", map[string]string{"volume/vol_1": dst}); err != nil {
		t.Fatal(err)
	}
	if got := digest(t, dst); got != want {
		t.Fatalf("restored tree:\n%s\nwant:\n%s", got, want)
	}
	// Restoring over existing data replaces it whole.
	if err := f.repo.Restore(ctx, "bkp_01A", map[string]string{"volume/vol_1": dst}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a", "b.txt")); string(b) != "hello" {
		t.Errorf("after restoring bkp_1: %q", b)
	}
	if leftovers, _ := filepath.Glob(dst + ".restore-*"); len(leftovers) != 0 {
		t.Errorf("left behind: %v", leftovers)
	}
	// Prune keeps what the backups use, drops the rest once a backup goes.
	if n, err := f.repo.Prune(ctx); err != nil || n != 0 {
		t.Errorf("prune with every backup kept removed %d (%v)", n, err)
	}
	for _, id := range []string{"bkp_01A", "bkp_01B"} {
		if err := f.repo.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := f.repo.Prune(ctx); err != nil || n != 1 {
		t.Errorf("prune after deleting the backups of the old b.txt removed %d (%v); want its chunk", n, err)
	}
	if _, problems := f.repo.Verify(ctx, "bkp_01C"); len(problems) != 0 {
		t.Errorf("verify after prune: %v", problems)
	}
	if _, problems := f.repo.Verify(ctx, "bkp_01A"); len(problems) != 1 || !errcode.Has(problems[0], errcode.NotFound) {
		t.Errorf("verify of a deleted backup: %v", problems)
	}
}

// objects lists the storage's objects of a prefix.
func (f *fixture) objects(t testing.TB, prefix string) []string {
	t.Helper()
	objs, err := f.st.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	sort.Strings(out)
	return out
}

// TestDamageIsAlwaysRefused: 1,000 truncations and 1,000 bit flips of the
// backup's objects (manifest and chunks, at seeded random places), two
// chunks swapped, a chunk missing, and a wrong key: Verify reports every
// one, Restore refuses every one with BACKUP_INCOMPLETE or
// BACKUP_DECRYPT_FAILED, and the live target is unchanged.
func TestDamageIsAlwaysRefused(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(f.work, "src")
	tree(t, src, map[string]string{"a/b.txt": "hello", "mid.bin": big(5000, 2), "c/d": "third"})
	if _, err := f.repo.Write(ctx, "bkp_x", []backuprepo.Part{{Name: "volume/v", Dir: src}}); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(f.work, "live")
	tree(t, live, map[string]string{"a/b.txt": "live data"})
	liveDigest := digest(t, live)
	keys := append(f.objects(t, "chunks/"), f.objects(t, "backups/")...)
	refused := func(what string, wantCode ...errcode.Code) {
		t.Helper()
		_, problems := f.repo.Verify(ctx, "bkp_x")
		if len(problems) == 0 {
			t.Fatalf("%s: verify found nothing wrong", what)
		}
		err := f.repo.Restore(ctx, "bkp_x", map[string]string{"volume/v": live})
		e, ok := errcode.As(err)
		if !ok || !(e.Code == errcode.BackupIncomplete || e.Code == errcode.BackupDecryptFailed) {
			t.Fatalf("%s: restore = %v; want BACKUP_INCOMPLETE or BACKUP_DECRYPT_FAILED", what, err)
		}
		if len(wantCode) > 0 && e.Code != wantCode[0] {
			t.Fatalf("%s: restore = %v; want %s", what, err, wantCode[0])
		}
		if got := digest(t, live); got != liveDigest {
			t.Fatalf("%s: the live data changed", what)
		}
	}
	rng := rand.New(rand.NewPCG(20, 26))
	damage := func(n int, name string, change func([]byte) []byte) {
		for i := range n {
			key := keys[rng.IntN(len(keys))]
			p := f.st.path(key)
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, change(bytes.Clone(orig)), 0o600); err != nil {
				t.Fatal(err)
			}
			refused(fmt.Sprintf("%s %d of %s", name, i, key))
			if err := os.WriteFile(p, orig, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	damage(1000, "truncation", func(b []byte) []byte { return b[:rng.IntN(len(b))] })
	damage(1000, "bit flip", func(b []byte) []byte { i := rng.IntN(len(b)); b[i] ^= 1 << rng.IntN(8); return b })

	chunks := f.objects(t, "chunks/")
	a, b := f.st.path(chunks[0]), f.st.path(chunks[1])
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	_ = os.WriteFile(a, bb, 0o600)
	_ = os.WriteFile(b, ab, 0o600)
	refused("two chunks swapped", errcode.BackupIncomplete)
	_ = os.WriteFile(a, ab, 0o600)
	_ = os.WriteFile(b, bb, 0o600)

	if err := os.Rename(a, a+".away"); err != nil {
		t.Fatal(err)
	}
	refused("a chunk missing", errcode.BackupIncomplete)
	if err := os.Rename(a+".away", a); err != nil {
		t.Fatal(err)
	}

	other, _ := age.GenerateX25519Identity()
	if _, problems := f.repo.Verify(ctx, "bkp_x", other); len(problems) != 1 || !errcode.Has(problems[0], errcode.BackupDecryptFailed) {
		t.Fatalf("verify with a wrong key: %v", problems)
	}
	if err := f.repo.Restore(ctx, "bkp_x", map[string]string{"volume/v": live}, other); !errcode.Has(err, errcode.BackupDecryptFailed) {
		t.Fatalf("restore with a wrong key: %v", err)
	}
	// Whole again: it verifies, with the right key given too.
	if _, problems := f.repo.Verify(ctx, "bkp_x", f.id); len(problems) != 0 {
		t.Fatalf("the repaired backup: %v", problems)
	}
	if leftovers, _ := filepath.Glob(live + ".restore-*"); len(leftovers) != 0 {
		t.Errorf("refused restores left %v", leftovers)
	}
}

// TestOperatorRecipientDecrypts: a backup is encrypted to the operator's
// recipients too: their identity alone reads it.
func TestOperatorRecipientDecrypts(t *testing.T) {
	op, _ := age.GenerateX25519Identity()
	id, _ := age.GenerateX25519Identity()
	work := t.TempDir()
	st := &dirStorage{dir: filepath.Join(work, "s")}
	repo := backuprepo.New(st, backuprepo.Keys{Identity: id, Recipients: []age.Recipient{op.Recipient()}}, filepath.Join(work, "j"))
	src := filepath.Join(work, "src")
	tree(t, src, map[string]string{"f": "for the operator"})
	if _, err := repo.Write(ctx, "bkp_op", []backuprepo.Part{{Name: "p", Dir: src}}); err != nil {
		t.Fatal(err)
	}
	stranger, _ := age.GenerateX25519Identity()
	other := backuprepo.New(st, backuprepo.Keys{Identity: stranger}, filepath.Join(work, "j2"))
	dst := filepath.Join(work, "dst")
	if err := other.Restore(ctx, "bkp_op", map[string]string{"p": dst}, op); err != nil {
		t.Fatal(err)
	}
	if digest(t, dst) != digest(t, src) {
		t.Error("the operator's restore differs")
	}
}

// TestForgedManifestIsRefused: whoever can write to the storage and knows
// the installation's public key can encrypt a manifest that decrypts (age
// does not authenticate the sender). Made up from scratch (an empty file
// and a link out in place of the data), or a real one with a part taken
// from another backup, it is refused by Manifest, Verify and Restore
// (BACKUP_DECRYPT_FAILED) and the target is untouched; the real backup
// still restores.
func TestForgedManifestIsRefused(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(f.work, "src")
	tree(t, src, map[string]string{"notes": "the real data"})
	if _, err := f.repo.Write(ctx, "bkp_real", []backuprepo.Part{{Name: "p", Dir: src}}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(f.work, "other")
	tree(t, other, map[string]string{"notes": "another backup's data"})
	if _, err := f.repo.Write(ctx, "bkp_other", []backuprepo.Part{{Name: "p", Dir: other}}); err != nil {
		t.Fatal(err)
	}
	seal := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w, err := age.Encrypt(&out, f.id.Recipient())
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		w.Close()
		return out.Bytes()
	}
	now := time.Now().UTC()
	madeUp := backuprepo.Manifest{Format: 1, BackupID: "bkp_real", CreatedAt: now, Parts: []backuprepo.PartManifest{{Name: "p", Entries: []backuprepo.Entry{
		{Path: ".", Type: "d", Mode: 0o700, MTime: now},
		{Path: "notes", Type: "f", Mode: 0o600, MTime: now},
		{Path: "escape", Type: "l", Mode: 0o777, MTime: now, Target: "/etc/shadow"},
	}}}, MAC: strings.Repeat("0", 64)}
	spliced, err := f.repo.Manifest(ctx, "bkp_real")
	if err != nil {
		t.Fatal(err)
	}
	fromOther, err := f.repo.Manifest(ctx, "bkp_other")
	if err != nil {
		t.Fatal(err)
	}
	spliced.Parts = fromOther.Parts // its MAC is the real one's
	dst := filepath.Join(f.work, "dst")
	tree(t, dst, map[string]string{"notes": "live"})
	live := digest(t, dst)
	for name, forged := range map[string]backuprepo.Manifest{"made up": madeUp, "spliced": spliced} {
		if err := f.st.Put(ctx, "backups/bkp_real", bytes.NewReader(seal(forged)), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.repo.Manifest(ctx, "bkp_real"); !errcode.Has(err, errcode.BackupDecryptFailed) {
			t.Errorf("%s: Manifest = %v, want BACKUP_DECRYPT_FAILED", name, err)
		}
		if _, errs := f.repo.Verify(ctx, "bkp_real"); len(errs) == 0 || !errcode.Has(errs[0], errcode.BackupDecryptFailed) {
			t.Errorf("%s: Verify = %v", name, errs)
		}
		if err := f.repo.Restore(ctx, "bkp_real", map[string]string{"p": dst}); !errcode.Has(err, errcode.BackupDecryptFailed) {
			t.Errorf("%s: Restore = %v", name, err)
		}
		if digest(t, dst) != live {
			t.Fatalf("%s: the forged backup changed the target", name)
		}
	}
	// The real other backup restores (authenticated).
	if err := f.repo.Restore(ctx, "bkp_other", map[string]string{"p": dst}); err != nil {
		t.Fatal(err)
	}
	if digest(t, dst) != digest(t, other) {
		t.Error("the real backup did not restore")
	}
}

// TestKillDuringRestore: a child process restores a two-part backup over
// existing data and is killed (SIGKILL) at a random moment, 30 times;
// after Recover both targets hold wholly the old data or wholly the new,
// and the same one.
func TestKillDuringRestore(t *testing.T) {
	f := newFixture(t)
	srcA, srcB := filepath.Join(f.work, "srcA"), filepath.Join(f.work, "srcB")
	tree(t, srcA, map[string]string{"f": "new A", "big": big(4*backuprepo.ChunkSize, 3)})
	tree(t, srcB, map[string]string{"f": "new B", "big": big(4*backuprepo.ChunkSize, 4)})
	if _, err := f.repo.Write(ctx, "bkp_k", []backuprepo.Part{{Name: "a", Dir: srcA}, {Name: "b", Dir: srcB}}); err != nil {
		t.Fatal(err)
	}
	newA, newB := digest(t, srcA), digest(t, srcB)
	idFile := filepath.Join(f.work, "id")
	if err := os.WriteFile(idFile, []byte(f.id.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 9))
	outcomes := map[string]int{}
	for i := range 30 {
		ta, tb := filepath.Join(f.work, fmt.Sprintf("a%d", i)), filepath.Join(f.work, fmt.Sprintf("b%d", i))
		tree(t, ta, map[string]string{"f": "old A"})
		tree(t, tb, map[string]string{"f": "old B"})
		oldA, oldB := digest(t, ta), digest(t, tb)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "SVC_RESTORE_CHILD=1", "CHILD_STORAGE="+f.st.dir, "CHILD_JOURNAL="+filepath.Join(f.work, "journal"),
			"CHILD_ID="+idFile, "CHILD_A="+ta, "CHILD_B="+tb)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if err := f.repo.Recover(); err != nil {
			t.Fatalf("run %d: recover: %v", i, err)
		}
		a, b := digest(t, ta), digest(t, tb)
		switch {
		case a == oldA && b == oldB:
			outcomes["old"]++
		case a == newA && b == newB:
			outcomes["new"]++
		default:
			t.Fatalf("run %d: a mix after recover:\nA:\n%s\nB:\n%s", i, a, b)
		}
		if leftovers, _ := filepath.Glob(filepath.Join(f.work, "*.restore-*")); len(leftovers) != 0 {
			t.Fatalf("run %d: left behind %v", i, leftovers)
		}
	}
	t.Logf("outcomes over 30 kills: %v", outcomes)
}

// TestMain runs the restore child of TestKillDuringRestore when asked
// (SVC_RESTORE_CHILD), else the tests.
func TestMain(m *testing.M) {
	if os.Getenv("SVC_RESTORE_CHILD") != "" {
		if err := restoreChild(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func restoreChild() error {
	b, err := os.ReadFile(os.Getenv("CHILD_ID"))
	if err != nil {
		return err
	}
	id, err := age.ParseX25519Identity(string(b))
	if err != nil {
		return err
	}
	repo := backuprepo.New(&dirStorage{dir: os.Getenv("CHILD_STORAGE")}, backuprepo.Keys{Identity: id}, os.Getenv("CHILD_JOURNAL"))
	return repo.Restore(ctx, "bkp_k", map[string]string{"a": os.Getenv("CHILD_A"), "b": os.Getenv("CHILD_B")})
}

// TestOverTheRealStorages: a backup written to each backup storage
// adapter (local, and s3 against a real versitygw) verifies, restores the
// same tree, and a second of the same data stores only its manifest.
func TestOverTheRealStorages(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) backuprepo.Storage{
		"local": func(t *testing.T) backuprepo.Storage {
			st, err := local.New(filepath.Join(t.TempDir(), "backups"))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"s3": func(t *testing.T) backuprepo.Storage {
			srv := s3test.Start(t, s3test.Options{})
			srv.Bucket(t, "backups")
			st, err := s3.New(map[string]string{"endpoint": srv.Endpoint, "bucket": "backups", "insecure_http": "true"}, srv.AccessKey, srv.SecretKey)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	} {
		t.Run(name, func(t *testing.T) {
			id, _ := age.GenerateX25519Identity()
			work := t.TempDir()
			repo := backuprepo.New(open(t), backuprepo.Keys{Identity: id}, filepath.Join(work, "journal"))
			src := filepath.Join(work, "src")
			tree(t, src, map[string]string{"a/b.txt": "hello", "big.bin": big(2*backuprepo.ChunkSize+9, 5)})
			if _, err := repo.Write(ctx, "bkp_01REAL", []backuprepo.Part{{Name: "volume/vol_1", Dir: src}}); err != nil {
				t.Fatal(err)
			}
			m, err := repo.Write(ctx, "bkp_01AGAIN", []backuprepo.Part{{Name: "volume/vol_1", Dir: src}})
			if err != nil || m.SizeBytes > 64<<10 {
				t.Fatalf("second backup stored %d bytes (%v)", m.SizeBytes, err)
			}
			if _, problems := repo.Verify(ctx, "bkp_01REAL"); len(problems) != 0 {
				t.Fatal(problems)
			}
			dst := filepath.Join(work, "dst")
			if err := repo.Restore(ctx, "bkp_01REAL", map[string]string{"volume/vol_1": dst}); err != nil {
				t.Fatal(err)
			}
			if digest(t, dst) != digest(t, src) {
				t.Error("the restored tree differs")
			}
			if err := repo.Delete(ctx, "bkp_01REAL"); err != nil {
				t.Fatal(err)
			}
			if n, err := repo.Prune(ctx); err != nil || n != 0 {
				t.Errorf("prune with the same data still backed up removed %d (%v)", n, err)
			}
		})
	}
}
