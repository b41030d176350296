// Package storagetest is the contract suite every backup storage adapter
// (backuprepo.Storage) must pass: objects come back byte for byte, a Put
// is whole or absent (a reader failing midway, at its end, or holding
// another size than announced leaves no object, and an object it would
// have replaced stays), absent objects are NOT_FOUND, Delete is
// idempotent, List finds exactly the keys under a prefix with their sizes,
// a 64 MiB object is streamed, concurrent Puts are all kept, invalid keys
// are refused, and a cancelled context stops every operation.
//
// It is for tests only and must not be imported by production code.
package storagetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/errcode"
)

// Factory makes an empty storage for one case; the storage lives until
// the case ends (register cleanups on t).
type Factory func(t *testing.T) backuprepo.Storage

// LargeSize is the size of the large object the suite streams.
const LargeSize = 64 << 20

// Run runs the contract against storages the factory makes, each case on
// a new one.
func Run(t *testing.T, factory Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s backuprepo.Storage)
	}{
		{"put and get round trip, sizes", roundTrip},
		{"an overwrite replaces the whole object", overwrite},
		{"an absent object is NOT_FOUND", absent},
		{"delete is idempotent", deleteIdempotent},
		{"list finds the keys under a prefix and no others", listByPrefix},
		{"invalid keys and prefixes are refused", invalidKeys},
		{"a 64 MiB object is streamed, not held in memory", large},
		{"concurrent puts of distinct keys are all kept", concurrentPuts},
		{"a put whose reader fails leaves no object and keeps the one before", failingReader},
		{"a put whose reader holds another size than announced leaves no object", wrongSize},
		{"a cancelled context stops every operation", cancelled},
		{"a context cancelled during a put leaves no object", cancelledMidway},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, factory(t)) })
	}
}

// random returns n bytes of deterministic pseudo-random data.
func random(seed uint64, n int) []byte {
	b := make([]byte, n)
	_, _ = newStream(seed, int64(n)).Read(b)
	return b
}

// stream is n pseudo-random bytes generated as they are read, never held.
type stream struct {
	rng  *rand.ChaCha8
	left int64
}

func newStream(seed uint64, n int64) *stream {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return &stream{rng: rand.NewChaCha8(s), left: n}
}

func (s *stream) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, _ := s.rng.Read(p)
	s.left -= int64(n)
	return n, nil
}

func put(t *testing.T, s backuprepo.Storage, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%s, %d bytes): %v", key, len(data), err)
	}
}

// get reads an object whole.
func get(t *testing.T, s backuprepo.Storage, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("close %s: %v", key, err)
	}
	return b
}

func wantContent(t *testing.T, s backuprepo.Storage, key string, want []byte) {
	t.Helper()
	if got := get(t, s, key); !bytes.Equal(got, want) {
		t.Errorf("Get(%s) = %d bytes (sha256 %x); want the %d bytes put (sha256 %x)", key, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
}

func wantAbsent(t *testing.T, s backuprepo.Storage, key string) {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Errorf("Get(%s) found %d bytes; want NOT_FOUND", key, len(b))
		return
	}
	if !errcode.Has(err, errcode.NotFound) {
		t.Errorf("Get(%s): %v; want NOT_FOUND", key, err)
	}
}

func list(t *testing.T, s backuprepo.Storage, prefix string) []backuprepo.Object {
	t.Helper()
	objs, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return objs
}

func wantList(t *testing.T, s backuprepo.Storage, prefix string, want ...backuprepo.Object) {
	t.Helper()
	got := list(t, s, prefix)
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Errorf("List(%q) = %v; want %v", prefix, got, want)
	}
}

func roundTrip(t *testing.T, s backuprepo.Storage) {
	objs := map[string][]byte{
		"empty":                        {},
		"one":                          {0x2a},
		"chunks/ab/ab12cd34ef":         random(1, 100<<10),
		"manifests/bkp_01.json":        []byte(`{"kind":"rolling"}`),
		"a-b_c.d/0123456789/x.y.z-1_2": random(2, 4097),
	}
	for k, v := range objs {
		put(t, s, k, v)
	}
	var want []backuprepo.Object
	for k, v := range objs {
		wantContent(t, s, k, v)
		want = append(want, backuprepo.Object{Key: k, Size: int64(len(v))})
	}
	slices.SortFunc(want, func(a, b backuprepo.Object) int { return strings.Compare(a.Key, b.Key) })
	wantList(t, s, "", want...)
}

func overwrite(t *testing.T, s backuprepo.Storage) {
	put(t, s, "index/latest", random(3, 10000))
	put(t, s, "index/latest", []byte("short"))
	wantContent(t, s, "index/latest", []byte("short"))
	wantList(t, s, "index/", backuprepo.Object{Key: "index/latest", Size: 5})
	put(t, s, "index/latest", nil)
	wantContent(t, s, "index/latest", nil)
	wantList(t, s, "index/", backuprepo.Object{Key: "index/latest", Size: 0})
}

func absent(t *testing.T, s backuprepo.Storage) {
	wantAbsent(t, s, "never/put")
	put(t, s, "dir/obj", []byte("x"))
	// Neither the directory part of a key nor a key's own prefix is an
	// object.
	wantAbsent(t, s, "dir")
	wantAbsent(t, s, "dir/ob")
	wantAbsent(t, s, "dir/obj/more")
	wantAbsent(t, s, "dir/obj.tmp")
}

func deleteIdempotent(t *testing.T, s backuprepo.Storage) {
	ctx := context.Background()
	put(t, s, "d/one", []byte("1"))
	put(t, s, "d/two", []byte("22"))
	for range 2 {
		if err := s.Delete(ctx, "d/one"); err != nil {
			t.Fatalf("Delete(d/one): %v", err)
		}
	}
	if err := s.Delete(ctx, "never/there"); err != nil {
		t.Errorf("Delete of an absent key: %v; want no error", err)
	}
	// Deleting the directory part of keys deletes nothing.
	if err := s.Delete(ctx, "d"); err != nil {
		t.Errorf("Delete(d): %v; want no error", err)
	}
	wantAbsent(t, s, "d/one")
	wantContent(t, s, "d/two", []byte("22"))
	wantList(t, s, "", backuprepo.Object{Key: "d/two", Size: 2})
	// A deleted key can be written again.
	put(t, s, "d/one", []byte("again"))
	wantContent(t, s, "d/one", []byte("again"))
}

func listByPrefix(t *testing.T, s backuprepo.Storage) {
	keys := []string{"a-c", "a/1", "a/2", "a/b/3", "a/b/c/4", "ab/5", "b/6", "a.x"}
	for i, k := range keys {
		put(t, s, k, random(uint64(i), i*10))
	}
	obj := func(k string) backuprepo.Object {
		return backuprepo.Object{Key: k, Size: int64(slices.Index(keys, k) * 10)}
	}
	wantList(t, s, "a/", obj("a/1"), obj("a/2"), obj("a/b/3"), obj("a/b/c/4"))
	wantList(t, s, "a/b/", obj("a/b/3"), obj("a/b/c/4"))
	wantList(t, s, "a/b", obj("a/b/3"), obj("a/b/c/4"))
	wantList(t, s, "a", obj("a-c"), obj("a.x"), obj("a/1"), obj("a/2"), obj("a/b/3"), obj("a/b/c/4"), obj("ab/5"))
	wantList(t, s, "a/b/c/4", obj("a/b/c/4"))
	wantList(t, s, "b/", obj("b/6"))
	wantList(t, s, "c/")
	wantList(t, s, "a/b/c/4/")
	wantList(t, s, "zz")
	wantList(t, s, "", obj("a-c"), obj("a.x"), obj("a/1"), obj("a/2"), obj("a/b/3"), obj("a/b/c/4"), obj("ab/5"), obj("b/6"))
}

func invalidKeys(t *testing.T, s backuprepo.Storage) {
	ctx := context.Background()
	put(t, s, "ok/key", []byte("kept"))
	bad := []string{"", "/abs", "trailing/", "a//b", "..", "../escape", "a/../b", ".", "a/./b", "Upper", "sp ace", "a\\b", "a\x00b",
		"ok/key/..", "ok/../../etc/passwd", "é", "a~b", "tab\tkey",
		strings.Repeat("a", 201), strings.Repeat("abcdefgh/", 100) + "x"}
	for _, k := range bad {
		if err := s.Put(ctx, k, bytes.NewReader([]byte("x")), 1); !errcode.Has(err, errcode.ValidInvalid) {
			t.Errorf("Put(%q): %v; want VALID_INVALID", k, err)
		}
		if _, err := s.Get(ctx, k); !errcode.Has(err, errcode.ValidInvalid) {
			t.Errorf("Get(%q): %v; want VALID_INVALID", k, err)
		}
		if err := s.Delete(ctx, k); !errcode.Has(err, errcode.ValidInvalid) {
			t.Errorf("Delete(%q): %v; want VALID_INVALID", k, err)
		}
	}
	for _, p := range []string{"/", "../", "a//", "Upper", "a/../", "x y"} {
		if _, err := s.List(ctx, p); !errcode.Has(err, errcode.ValidInvalid) {
			t.Errorf("List(%q): %v; want VALID_INVALID", p, err)
		}
	}
	wantList(t, s, "", backuprepo.Object{Key: "ok/key", Size: 4})
	wantContent(t, s, "ok/key", []byte("kept"))
}

// large puts and gets a LargeSize object generated and checked as it
// streams; the heap allocated meanwhile must stay below the object's size
// (an adapter holding it in memory whole would allocate at least that).
func large(t *testing.T, s backuprepo.Storage) {
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := s.Put(ctx, "large/object", newStream(7, LargeSize), LargeSize); err != nil {
		t.Fatalf("Put of %d bytes: %v", LargeSize, err)
	}
	runtime.ReadMemStats(&after)
	putAlloc := after.TotalAlloc - before.TotalAlloc

	rc, err := s.Get(ctx, "large/object")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer rc.Close()
	got, want := sha256.New(), sha256.New()
	n, err := io.CopyBuffer(got, rc, make([]byte, 256<<10))
	if err != nil {
		t.Fatalf("read the large object: %v", err)
	}
	_, _ = io.Copy(want, newStream(7, LargeSize))
	if n != LargeSize || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Errorf("the large object came back as %d bytes, sha256 %x; want %d bytes, sha256 %x", n, got.Sum(nil), LargeSize, want.Sum(nil))
	}
	var done runtime.MemStats
	runtime.ReadMemStats(&done)
	getAlloc := done.TotalAlloc - after.TotalAlloc
	t.Logf("heap allocated: %d MiB by the put, %d MiB by the get of a %d MiB object", putAlloc>>20, getAlloc>>20, LargeSize>>20)
	if putAlloc >= LargeSize || getAlloc >= LargeSize {
		t.Errorf("the put allocated %d bytes and the get %d; an object of %d bytes must be streamed, not held", putAlloc, getAlloc, LargeSize)
	}
	wantList(t, s, "large/", backuprepo.Object{Key: "large/object", Size: LargeSize})
}

func concurrentPuts(t *testing.T, s backuprepo.Storage) {
	const writers, each = 16, 4
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("c/%02d/%d", w, i)
				data := random(uint64(w*each+i), 32<<10+w*each+i)
				if err := s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
					errs <- fmt.Errorf("Put(%s): %w", key, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var want []backuprepo.Object
	for w := range writers {
		for i := range each {
			key := fmt.Sprintf("c/%02d/%d", w, i)
			data := random(uint64(w*each+i), 32<<10+w*each+i)
			wantContent(t, s, key, data)
			want = append(want, backuprepo.Object{Key: key, Size: int64(len(data))})
		}
	}
	wantList(t, s, "c/", want...)
}

var errSource = errors.New("the source of the object failed")

// failing yields its data, then fails instead of ending.
type failing struct{ r io.Reader }

func (f failing) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errSource
	}
	return n, err
}

func failingReader(t *testing.T, s backuprepo.Storage) {
	ctx := context.Background()
	old := random(11, 1000)
	put(t, s, "f/existing", old)
	for _, c := range []struct {
		name      string
		given     int64 // bytes the reader gives before it fails
		announced int64
	}{
		{"midway", 1 << 20, 4 << 20},
		{"after the last byte, instead of ending", 3 << 20, 3 << 20},
		{"at once", 0, 100},
		{"midway, past a part of a multipart upload", 20 << 20, 40 << 20},
	} {
		for _, key := range []string{"f/new", "f/existing"} {
			err := s.Put(ctx, key, failing{newStream(12, c.given)}, c.announced)
			if !errors.Is(err, errSource) {
				t.Errorf("Put(%s) with a reader failing %s: %v; want the reader's error", key, c.name, err)
			}
		}
		wantAbsent(t, s, "f/new")
		wantContent(t, s, "f/existing", old)
		wantList(t, s, "f/", backuprepo.Object{Key: "f/existing", Size: int64(len(old))})
	}
}

func wrongSize(t *testing.T, s backuprepo.Storage) {
	ctx := context.Background()
	old := []byte("before")
	put(t, s, "w/existing", old)
	for _, c := range []struct {
		name string
		n    int
		size int64
	}{
		{"shorter", 1000, 1001},
		{"longer", 1001, 1000},
		{"empty", 0, 10},
		{"longer than none", 1, 0},
		{"a MiB shorter", 5 << 20, 6 << 20},
		{"a byte longer, past a part", 17<<20 + 1, 17 << 20},
	} {
		for _, key := range []string{"w/new", "w/existing"} {
			if err := s.Put(ctx, key, newStream(21, int64(c.n)), c.size); err == nil {
				t.Errorf("Put(%s) of %d bytes announced as %d (%s) succeeded; want an error", key, c.n, c.size, c.name)
			}
		}
		wantAbsent(t, s, "w/new")
		wantContent(t, s, "w/existing", old)
	}
	if err := s.Put(ctx, "w/negative", bytes.NewReader(nil), -1); err == nil {
		t.Error("Put with size -1 succeeded; want an error: a Put's size is known")
	}
	wantList(t, s, "w/", backuprepo.Object{Key: "w/existing", Size: int64(len(old))})
}

func isCancel(err error) bool {
	return errors.Is(err, context.Canceled)
}

func cancelled(t *testing.T, s backuprepo.Storage) {
	put(t, s, "x/kept", []byte("kept"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, "x/new", bytes.NewReader([]byte("x")), 1); !isCancel(err) {
		t.Errorf("Put with a cancelled context: %v; want context.Canceled", err)
	}
	if err := s.Put(ctx, "x/kept", bytes.NewReader([]byte("y")), 1); !isCancel(err) {
		t.Errorf("Put over an object with a cancelled context: %v; want context.Canceled", err)
	}
	if rc, err := s.Get(ctx, "x/kept"); !isCancel(err) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("Get with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := s.List(ctx, "x/"); !isCancel(err) {
		t.Errorf("List with a cancelled context: %v; want context.Canceled", err)
	}
	if err := s.Delete(ctx, "x/kept"); !isCancel(err) {
		t.Errorf("Delete with a cancelled context: %v; want context.Canceled", err)
	}
	wantAbsent(t, s, "x/new")
	wantContent(t, s, "x/kept", []byte("kept"))
}

// cancelling reads from r and cancels its context once it has given after
// bytes.
type cancelling struct {
	r      io.Reader
	after  int64
	cancel context.CancelFunc
}

func (c *cancelling) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.after -= int64(n); c.after <= 0 {
		c.cancel()
	}
	return n, err
}

func cancelledMidway(t *testing.T, s backuprepo.Storage) {
	old := []byte("old")
	put(t, s, "m/existing", old)
	for _, key := range []string{"m/new", "m/existing"} {
		ctx, cancel := context.WithCancel(context.Background())
		err := s.Put(ctx, key, &cancelling{r: newStream(31, 8<<20), after: 1 << 20, cancel: cancel}, 8<<20)
		cancel()
		if !isCancel(err) {
			t.Errorf("Put(%s) cancelled after a MiB: %v; want context.Canceled", key, err)
		}
	}
	wantAbsent(t, s, "m/new")
	wantContent(t, s, "m/existing", old)
	wantList(t, s, "m/", backuprepo.Object{Key: "m/existing", Size: int64(len(old))})
}
