package backuprepo_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svchost/svc/backupstores/local"
	"github.com/svchost/svc/backupstores/s3"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/s3test"
)

// BenchmarkBackupRestore writes a 1 GiB tree (64 files of 16 MiB of random
// data) to the local backup storage on the work dir's disk, then verifies
// and restores it, and reports MB/s of each (a first backup: every chunk
// new). SVC_BENCH_DIR chooses the disk (default the temp dir).
func BenchmarkBackupRestore(b *testing.B) {
	benchBackupRestore(b, func(dir string) backuprepo.Storage {
		st, err := local.New(dir)
		if err != nil {
			b.Fatal(err)
		}
		return st
	})
}

// BenchmarkBackupRestoreS3 is BenchmarkBackupRestore to a real
// S3-compatible server (versitygw on loopback, over http, its posix backend
// on the temp dir's disk).
func BenchmarkBackupRestoreS3(b *testing.B) {
	srv := s3test.Start(b, s3test.Options{})
	n := 0
	benchBackupRestore(b, func(string) backuprepo.Storage {
		n++
		bucket := fmt.Sprintf("bench-%d", n)
		srv.Bucket(b, bucket)
		st, err := s3.New(map[string]string{"endpoint": srv.Endpoint, "bucket": bucket, "insecure_http": "true"}, srv.AccessKey, srv.SecretKey)
		if err != nil {
			b.Fatal(err)
		}
		return st
	})
}

func benchBackupRestore(b *testing.B, storage func(dir string) backuprepo.Storage) {
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
		dir := filepath.Join(work, fmt.Sprintf("storage%d", i))
		f.repo = backuprepo.New(storage(dir), backuprepo.Keys{Identity: f.id}, filepath.Join(work, "journal"))
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
		_ = os.RemoveAll(dir)
	}
	n := float64(b.N)
	b.ReportMetric(total/1e6/(backup.Seconds()/n), "backup-MB/s")
	b.ReportMetric(total/1e6/(verify.Seconds()/n), "verify-MB/s")
	b.ReportMetric(total/1e6/(restore.Seconds()/n), "restore-MB/s")
}
