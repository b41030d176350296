package objects

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/svchost/svc/internal/errcode"
)

func TestValidKey(t *testing.T) {
	for _, k := range []string{"a", "chunks/ab/ab12", "manifests/bkp_01.json", "a-b_c.d", "..a", "a..", "x/.hidden", strings.Repeat("a", MaxSegment),
		strings.Repeat("abcdefg/", MaxKey/8-1) + "abcdefgh"} {
		if err := ValidKey(k); err != nil {
			t.Errorf("ValidKey(%q): %v", k, err)
		}
	}
	for _, k := range []string{"", "/", "/a", "a/", "a//b", ".", "..", "../a", "a/..", "a/./b", "A", "a b", "a~b", "a\\b", "a\x00", "é",
		strings.Repeat("a", MaxSegment+1), strings.Repeat("abcdefg/", MaxKey/8) + "a"} {
		if err := ValidKey(k); !errcode.Has(err, errcode.ValidInvalid) {
			t.Errorf("ValidKey(%q) = %v; want VALID_INVALID", k, err)
		}
	}
}

func TestValidPrefix(t *testing.T) {
	for _, p := range []string{"", "a", "a/", "a/b", "chunks/ab/", ".", "..", "a/.", "a/.."} {
		if err := ValidPrefix(p); err != nil {
			t.Errorf("ValidPrefix(%q): %v", p, err)
		}
	}
	for _, p := range []string{"/", "/a", "a//", "../", "a/../", "./", "A", "a b/", "x~"} {
		if err := ValidPrefix(p); !errcode.Has(err, errcode.ValidInvalid) {
			t.Errorf("ValidPrefix(%q) = %v; want VALID_INVALID", p, err)
		}
	}
}

// FuzzValidKey: a valid key is a clean local path that no other spelling
// reaches, and every start of it is a valid prefix.
func FuzzValidKey(f *testing.F) {
	for _, k := range []string{"a", "a/b", "../a", "a/./b", "a//b", "chunks/ab/ab12", "a~tmp", ".", "..a/b.."} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if ValidKey(k) != nil {
			return
		}
		if path.Clean(k) != k || !filepath.IsLocal(k) || strings.HasPrefix(k, "/") || len(k) > MaxKey {
			t.Fatalf("ValidKey accepted %q, which is not a clean local path", k)
		}
		for seg := range strings.SplitSeq(k, "/") {
			if seg == ".." || seg == "." || seg == "" || strings.Contains(seg, "~") {
				t.Fatalf("ValidKey accepted %q with segment %q", k, seg)
			}
		}
		for i := range len(k) + 1 {
			if err := ValidPrefix(k[:i]); err != nil {
				t.Fatalf("ValidPrefix(%q), a start of the valid key %q: %v", k[:i], k, err)
			}
		}
	})
}

func readExact(ctx context.Context, r io.Reader, size int64) ([]byte, error) {
	return io.ReadAll(Exact(ctx, r, size))
}

func TestExact(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), 1000)
	for _, r := range []func() io.Reader{
		func() io.Reader { return bytes.NewReader(data) },
		func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
		func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
	} {
		got, err := readExact(ctx, r(), int64(len(data)))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("exact size: %d bytes, %v", len(got), err)
		}
		if _, err := readExact(ctx, r(), int64(len(data))+1); !errors.Is(err, ErrShort) {
			t.Errorf("announced one byte more: %v; want ErrShort", err)
		}
		if _, err := readExact(ctx, r(), int64(len(data))-1); !errors.Is(err, ErrLong) {
			t.Errorf("announced one byte less: %v; want ErrLong", err)
		}
		if _, err := readExact(ctx, r(), 0); !errors.Is(err, ErrLong) {
			t.Errorf("announced none: %v; want ErrLong", err)
		}
	}
	if got, err := readExact(ctx, bytes.NewReader(nil), 0); err != nil || len(got) != 0 {
		t.Errorf("empty: %q, %v", got, err)
	}
	boom := errors.New("boom")
	if _, err := readExact(ctx, io.MultiReader(bytes.NewReader(data), iotest.ErrReader(boom)), int64(len(data))); !errors.Is(err, boom) {
		t.Errorf("a reader failing after the size instead of ending: %v; want its error", err)
	}
	if _, err := readExact(ctx, iotest.TimeoutReader(bytes.NewReader(data)), int64(len(data))); !errors.Is(err, iotest.ErrTimeout) {
		t.Errorf("a failing reader: %v; want its error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := readExact(cctx, bytes.NewReader(data), int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestExactHoldsBackTheLastBytes: a reader holding more than announced
// fails before the consumer has the size announced, so that a consumer
// that stores what it read never has a whole object.
func TestExactHoldsBackTheLastBytes(t *testing.T) {
	data := make([]byte, 100)
	r := Exact(context.Background(), bytes.NewReader(data), 99)
	var got int
	buf := make([]byte, 10)
	for {
		n, err := r.Read(buf)
		got += n
		if err != nil {
			if !errors.Is(err, ErrLong) {
				t.Fatalf("err = %v; want ErrLong", err)
			}
			break
		}
	}
	if got >= 99 {
		t.Errorf("the consumer had %d bytes before the error; want fewer than the 99 announced", got)
	}
}
