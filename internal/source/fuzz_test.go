package source

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// fuzzLimits keep each run small.
var fuzzLimits = Limits{MaxTotalBytes: 4 << 20, MaxFileBytes: 1 << 20, MaxEntries: 200, MaxArchiveBytes: 1 << 20}

// fuzzSeeds are valid and hostile archives of both families.
func fuzzSeeds(f *testing.F, zipped bool) {
	sets := [][]entry{
		{dir("app"), file("app/a.txt", "hello"), symlink("app/l", "a.txt"), {name: "app/x", typ: tar.TypeReg, mode: 0o4755, body: "#!"}},
		{file("../escape", "x")},
		{file("/abs", "x")},
		{symlink("s", "."), symlink("t", "s/..")},
		{symlink("etc", "/etc"), file("etc/passwd", "x")},
		{dir("a"), symlink("a", "b"), file("a/x", "x")},
		{dir("sub"), symlink("in", "sub"), file("in/x", "x")},
		{symlink("up", "../../x")},
		{file(`..\evil`, "x")},
	}
	if !zipped {
		sets = append(sets,
			[]entry{{name: "p", typ: tar.TypeLink, link: "/etc/passwd"}},
			[]entry{file("f", "data"), {name: "g", typ: tar.TypeLink, link: "f"}},
			[]entry{{name: "fifo", typ: tar.TypeFifo}},
		)
	}
	for _, set := range sets {
		if zipped {
			f.Add(makeZip(f, set...))
			continue
		}
		data := makeTar(f, set...)
		f.Add(data)
		f.Add(gz(f, data))
	}
}

// fuzzExtract extracts data and checks that nothing outside the
// destination changed, that a link inside never leads outside, and that a
// failure is coded (the reader never fails here) and leaves nothing.
func fuzzExtract(t *testing.T, data []byte, kind Kind) {
	s := newSandbox(t)
	_, err := Extract(t.Context(), bytes.NewReader(data), kind, s.dest, fuzzLimits)
	s.untouched(t)
	if err != nil {
		if _, ok := errcode.As(err); !ok {
			t.Fatalf("an uncoded error for a bad archive: %v", err)
		}
		if left, _ := os.ReadDir(filepath.Dir(s.dest)); len(left) != 0 {
			t.Fatalf("a refused archive left %v behind", left)
		}
	}
}

func FuzzExtractTar(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzExtract(t, data, Tar)
	})
}

func FuzzExtractZip(f *testing.F) {
	fuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzExtract(t, data, Zip)
	})
}
