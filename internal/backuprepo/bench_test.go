package backuprepo_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svchost/svc/internal/backuprepo"
)

// BenchmarkBackupRestore writes a 1 GiB tree (64 files of 16 MiB of random
// data) to a directory-backed storage on the work dir's disk, then
// verifies and restores it, and reports MB/s of each (a first backup: every
// chunk new). SVC_BENCH_DIR chooses the disk (default the temp dir).
func BenchmarkBackupRestore(b *testing.B) {
	base := os.Getenv("SVC_BENCH_DIR")
	if base == "" {
		base = b.TempDir()
	}
	work, err := os.MkdirTemp(base, "backuprepo-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	if err := os.MkdirAll(src, 0o700); err != nil {
		b.Fatal(err)
	}
	const files, size = 64, 16 << 20
	for i := range files {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), []byte(big(size, uint64(i))), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	total := float64(files * size)
	var backup, verify, restore time.Duration
	for i := 0; i < b.N; i++ {
		f := newFixture(b)
		f.st.dir = filepath.Join(work, fmt.Sprintf("storage%d", i))
		f.repo = backuprepo.New(f.st, backuprepo.Keys{Identity: f.id}, filepath.Join(work, "journal"))
		start := time.Now()
		if _, err := f.repo.Write(ctx, "bkp_bench", []backuprepo.Part{{Name: "v", Dir: src}}); err != nil {
			b.Fatal(err)
		}
		backup += time.Since(start)
		start = time.Now()
		if _, problems := f.repo.Verify(ctx, "bkp_bench"); len(problems) > 0 {
			b.Fatal(problems)
		}
		verify += time.Since(start)
		start = time.Now()
		if err := f.repo.Restore(ctx, "bkp_bench", map[string]string{"v": filepath.Join(work, "dst")}); err != nil {
			b.Fatal(err)
		}
		restore += time.Since(start)
		_ = os.RemoveAll(f.st.dir)
	}
	n := float64(b.N)
	b.ReportMetric(total/1e6/(backup.Seconds()/n), "backup-MB/s")
	b.ReportMetric(total/1e6/(verify.Seconds()/n), "verify-MB/s")
	b.ReportMetric(total/1e6/(restore.Seconds()/n), "restore-MB/s")
}
