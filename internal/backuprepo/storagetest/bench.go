package storagetest

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/svchost/svc/internal/backuprepo"
)

// Bench measures a storage's throughput for LargeSize objects: put-64MiB
// writes one (over the same key, from memory), get-64MiB reads one back
// whole; MB/s is what b.SetBytes reports.
func Bench(b *testing.B, s backuprepo.Storage) {
	ctx := context.Background()
	data := random(42, LargeSize)
	b.Run("put-64MiB", func(b *testing.B) {
		b.SetBytes(LargeSize)
		for b.Loop() {
			if err := s.Put(ctx, "bench/put", bytes.NewReader(data), LargeSize); err != nil {
				b.Fatal(err)
			}
		}
	})
	if err := s.Put(ctx, "bench/get", bytes.NewReader(data), LargeSize); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	b.Run("get-64MiB", func(b *testing.B) {
		b.SetBytes(LargeSize)
		for b.Loop() {
			rc, err := s.Get(ctx, "bench/get")
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, rc, buf)
			rc.Close()
			if err != nil || n != LargeSize {
				b.Fatalf("read %d bytes: %v", n, err)
			}
		}
	})
}
