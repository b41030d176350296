package storagetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/svchost/svc/backupstores/local"
	"github.com/svchost/svc/internal/backuprepo"
)

// The suite is proved by storages that each break one rule: run in a
// child process (a failing case cannot be expected in this one), the case
// about that rule must fail.

const envBroken = "SVC_STORAGETEST_BROKEN"

// base is a storage that keeps the contract: the local adapter.
func base(t *testing.T) backuprepo.Storage {
	s, err := local.New(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// broken storages, by name: each wraps a correct one.
var broken = map[string]func(backuprepo.Storage) backuprepo.Storage{
	"writes what it read before the reader failed": func(s backuprepo.Storage) backuprepo.Storage { return partialOnFailure{s} },
	"holds an object in memory":                    func(s backuprepo.Storage) backuprepo.Storage { return buffering{s} },
	"stores what the reader holds, whatever the size": func(s backuprepo.Storage) backuprepo.Storage {
		return sizeIgnored{buffering{s}}
	},
	"answers an absent object without NOT_FOUND": func(s backuprepo.Storage) backuprepo.Storage { return uncoded{s} },
	"fails to delete an absent object":           func(s backuprepo.Storage) backuprepo.Storage { return strictDelete{s} },
	"lists everything whatever the prefix":       func(s backuprepo.Storage) backuprepo.Storage { return listAll{s} },
	"ignores its context":                        func(s backuprepo.Storage) backuprepo.Storage { return deaf{s} },
	"drops the last byte of a large object":      func(s backuprepo.Storage) backuprepo.Storage { return truncating{s} },
}

func TestTheSuiteFailsBrokenStorages(t *testing.T) {
	for name, wantFail := range map[string][]string{
		"writes what it read before the reader failed":    {"a put whose reader fails leaves no object and keeps the one before"},
		"holds an object in memory":                       {"a 64 MiB object is streamed, not held in memory"},
		"stores what the reader holds, whatever the size": {"a put whose reader holds another size than announced leaves no object"},
		"answers an absent object without NOT_FOUND":      {"an absent object is NOT_FOUND", "delete is idempotent"},
		"fails to delete an absent object":                {"delete is idempotent"},
		"lists everything whatever the prefix":            {"list finds the keys under a prefix and no others"},
		"ignores its context":                             {"a cancelled context stops every operation", "a context cancelled during a put leaves no object"},
		"drops the last byte of a large object":           {"a 64 MiB object is streamed, not held in memory"},
	} {
		t.Run(name, func(t *testing.T) {
			var cases []string
			for _, c := range wantFail {
				cases = append(cases, regexp.QuoteMeta(strings.ReplaceAll(c, " ", "_")))
			}
			cmd := exec.Command(os.Args[0], "-test.run", "^TestBrokenStorage$/^("+strings.Join(cases, "|")+")$", "-test.v")
			cmd.Env = append(os.Environ(), envBroken+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed a storage that %s (%v); want it to fail:\n%s", name, err, out)
			}
			for _, c := range wantFail {
				if !strings.Contains(string(out), "--- FAIL: TestBrokenStorage/"+strings.ReplaceAll(c, " ", "_")) {
					t.Errorf("a storage that %s did not fail the case %q:\n%s", name, c, out)
				}
			}
		})
	}
}

// TestBrokenStorage runs the suite on the broken storage the parent names;
// without one it does nothing.
func TestBrokenStorage(t *testing.T) {
	name := os.Getenv(envBroken)
	if name == "" {
		t.Skip("run by TestTheSuiteFailsBrokenStorages")
	}
	wrap, ok := broken[name]
	if !ok {
		t.Fatalf("no broken storage %q", name)
	}
	Run(t, func(t *testing.T) backuprepo.Storage { return wrap(base(t)) })
}

// partialOnFailure stores what its reader gave before failing.
type partialOnFailure struct{ backuprepo.Storage }

func (p partialOnFailure) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	b, err := io.ReadAll(r)
	if err != nil {
		_ = p.Storage.Put(ctx, key, bytes.NewReader(b), int64(len(b)))
		return err
	}
	return p.Storage.Put(ctx, key, bytes.NewReader(b), size)
}

// buffering reads an object whole before storing it.
type buffering struct{ backuprepo.Storage }

func (b buffering) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return b.Storage.Put(ctx, key, bytes.NewReader(data), size)
}

// sizeIgnored stores whatever its reader holds.
type sizeIgnored struct{ buffering }

func (s sizeIgnored) Put(ctx context.Context, key string, r io.Reader, _ int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return s.Storage.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
}

type uncoded struct{ backuprepo.Storage }

func (u uncoded) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := u.Storage.Get(ctx, key)
	if err != nil {
		return nil, errors.New("no such object")
	}
	return rc, nil
}

type strictDelete struct{ backuprepo.Storage }

func (s strictDelete) Delete(ctx context.Context, key string) error {
	rc, err := s.Storage.Get(ctx, key)
	if err != nil {
		return err
	}
	rc.Close()
	return s.Storage.Delete(ctx, key)
}

type listAll struct{ backuprepo.Storage }

func (l listAll) List(ctx context.Context, _ string) ([]backuprepo.Object, error) {
	return l.Storage.List(ctx, "")
}

// deaf does everything with a context that is never cancelled.
type deaf struct{ backuprepo.Storage }

func (d deaf) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return d.Storage.Put(context.WithoutCancel(ctx), key, r, size)
}
func (d deaf) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return d.Storage.Get(context.WithoutCancel(ctx), key)
}
func (d deaf) List(ctx context.Context, prefix string) ([]backuprepo.Object, error) {
	return d.Storage.List(context.WithoutCancel(ctx), prefix)
}
func (d deaf) Delete(ctx context.Context, key string) error {
	return d.Storage.Delete(context.WithoutCancel(ctx), key)
}

// truncating serves large objects one byte short.
type truncating struct{ backuprepo.Storage }

func (tr truncating) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := tr.Storage.Get(ctx, key)
	if err != nil || !strings.HasPrefix(key, "large/") {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, LargeSize-1), rc}, nil
}
