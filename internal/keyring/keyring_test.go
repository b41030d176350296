package keyring_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

func now() time.Time { return time.Now().UTC() }

func TestKEKFileIsCreatedPrivateAndReusedOrRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring", "kek")
	k1, err := keyring.LoadKEK(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 || st.Size() != keyring.KeySize {
		t.Fatalf("kek file: %v %v", st, err)
	}
	if d, _ := os.Stat(filepath.Dir(path)); d.Mode().Perm() != 0o700 {
		t.Fatalf("kek directory mode %v", d.Mode().Perm())
	}
	k2, err := keyring.LoadKEK(path)
	if err != nil || k2.ID() != k1.ID() {
		t.Fatalf("reload: %v, id %s vs %s", err, k2.ID(), k1.ID())
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := keyring.LoadKEK(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable KEK was accepted: %v", err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := keyring.LoadKEK(short); err == nil {
		t.Fatal("a truncated KEK was accepted")
	}
}

func TestConcurrentFirstLoadsAgreeOnOneKEK(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kek")
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := keyring.LoadKEK(path)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = k.ID()
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent first loads disagree: %v", ids)
		}
	}
}

func newRing(t *testing.T) (*keyring.Ring, func(path string) *keyring.Ring) {
	store := raftstoretest.Open(t, keyring.Keys, audit.Entries)
	kek, err := keyring.LoadKEK(filepath.Join(t.TempDir(), "kek"))
	if err != nil {
		t.Fatal(err)
	}
	other := func(path string) *keyring.Ring {
		k, err := keyring.LoadKEK(path)
		if err != nil {
			t.Fatal(err)
		}
		return keyring.New(store, k, now)
	}
	return keyring.New(store, kek, now), other
}

func TestSealOpenBindsPurposeAndDetectsTampering(t *testing.T) {
	ring, other := newRing(t)
	ctx := context.Background()
	plain := []byte("the value")
	sealed, err := ring.Seal(ctx, plain, []byte("secret/app_1/A"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, plain) {
		t.Fatal("the sealed value holds the plaintext")
	}
	again, _ := ring.Seal(ctx, plain, []byte("secret/app_1/A"))
	if bytes.Equal(sealed, again) {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}
	got, err := ring.Open(sealed, []byte("secret/app_1/A"))
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := ring.Open(sealed, []byte("secret/app_1/B")); errcode.CodeOf(err) != errcode.AdapterFailed {
		t.Fatalf("opened for another purpose: %v", err)
	}
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		if _, err := ring.Open(bad, []byte("secret/app_1/A")); err == nil {
			t.Fatalf("a flipped bit at %d went unnoticed", i)
		}
	}
	for _, junk := range [][]byte{nil, {}, {1}, {2, 0}, bytes.Repeat([]byte{1}, 40)} {
		if _, err := ring.Open(junk, nil); err == nil {
			t.Fatalf("junk %v opened", junk)
		}
	}
	// A node whose KEK differs cannot open, and says what to do.
	foreign := other(filepath.Join(t.TempDir(), "kek"))
	_, err = foreign.Open(sealed, []byte("secret/app_1/A"))
	if e, ok := errcode.As(err); !ok || e.Code != errcode.AdapterFailed || !strings.Contains(e.Remedy, "same key-encryption key") {
		t.Fatalf("foreign KEK: %v", err)
	}
	if foreign.Check() == nil || ring.Check() != nil {
		t.Fatal("Check does not tell a node that cannot open from one that can")
	}
}

type countingResealer struct{ n int }

func (c *countingResealer) Reseal(context.Context) (int, error) { c.n++; return 7, nil }

func TestRotateAddsAKeyKeepsOldOnesAndReseals(t *testing.T) {
	ring, _ := newRing(t)
	ctx := context.Background()
	old, _ := ring.Seal(ctx, []byte("v"), nil)
	rs := &countingResealer{}
	ring.OnRotate(rs)
	rot, err := ring.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rs.n != 1 || rot.Resealed != 7 || !rot.Key.Current || rot.Key.ID == keyring.KeyID(old) {
		t.Fatalf("rotation = %+v, resealer ran %d times", rot, rs.n)
	}
	fresh, _ := ring.Seal(ctx, []byte("v"), nil)
	if keyring.KeyID(fresh) != rot.Key.ID {
		t.Fatalf("a seal after rotation used %s, not %s", keyring.KeyID(fresh), rot.Key.ID)
	}
	if got, err := ring.Open(old, nil); err != nil || string(got) != "v" {
		t.Fatalf("a value sealed before rotation: %q %v", got, err)
	}
	if info := ring.Info(); len(info) != 2 || info[0].ID != rot.Key.ID || !info[0].Current {
		t.Fatalf("info = %+v", info)
	}
}

func FuzzOpen(f *testing.F) {
	store := raftstoretest.Open(f, keyring.Keys, audit.Entries)
	kek, err := keyring.LoadKEK(filepath.Join(f.TempDir(), "kek"))
	if err != nil {
		f.Fatal(err)
	}
	ring := keyring.New(store, kek, now)
	sealed, _ := ring.Seal(context.Background(), []byte("seed"), []byte("aad"))
	f.Add(sealed, []byte("aad"))
	f.Add([]byte{1, 255}, []byte{})
	f.Fuzz(func(t *testing.T, b, aad []byte) {
		if got, err := ring.Open(b, aad); err == nil && !bytes.Equal(b, sealed) {
			t.Fatalf("forged input opened to %q", got)
		}
	})
}

// BenchmarkSealOpen seals and opens a 64-byte value with a warm key cache.
func BenchmarkSealOpen(b *testing.B) {
	store := raftstoretest.Open(b, keyring.Keys, audit.Entries)
	kek, err := keyring.LoadKEK(filepath.Join(b.TempDir(), "kek"))
	if err != nil {
		b.Fatal(err)
	}
	ring := keyring.New(store, kek, now)
	ctx := context.Background()
	v := bytes.Repeat([]byte("v"), 64)
	if _, err := ring.Seal(ctx, v, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s, err := ring.Seal(ctx, v, []byte("aad"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ring.Open(s, []byte("aad")); err != nil {
			b.Fatal(err)
		}
	}
}
