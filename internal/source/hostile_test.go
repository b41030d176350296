package source

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// zeros reads n zero bytes without holding them.
func zeros(n int64) io.Reader { return io.LimitReader(zeroReader{}, n) }

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// gzipBomb is a tar.gz of one file of size zero bytes, built from one
// compressed 16 MiB chunk repeated as gzip members (a gzip stream may be
// a series of members), so that building it costs little.
func gzipBomb(t testing.TB, name string, size int64) []byte {
	t.Helper()
	const chunk = 16 << 20
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
		t.Fatal(err)
	}
	member := func(r io.Reader) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		if _, err := io.Copy(zw, r); err != nil {
			t.Fatal(err)
		}
		zw.Close()
		return b.Bytes()
	}
	out := member(bytes.NewReader(hdr.Bytes()))
	z := member(zeros(chunk))
	for i := int64(0); i < size/chunk; i++ {
		out = append(out, z...)
	}
	out = append(out, member(zeros(size%chunk+1024))...) // the rest, the end blocks
	return out
}

// rawTarHeader is a ustar header block written by hand, for what
// archive/tar refuses to write (or rewrites).
func rawTarHeader(name string, typ byte, size int) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[136:148], "00000000000\x00")
	b[156] = typ
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// paxTar is an archive of one file whose name is given by a pax record,
// written by hand (archive/tar refuses a NUL there).
func paxTar(name, body string) []byte {
	rec := " path=" + name + "\n"
	n := len(rec)
	for {
		l := len(strconv.Itoa(n)) + len(rec)
		if l == n {
			break
		}
		n = l
	}
	rec = strconv.Itoa(n) + rec
	var b bytes.Buffer
	b.Write(rawTarHeader("PaxHeaders/x", 'x', len(rec)))
	b.WriteString(rec)
	b.Write(make([]byte, (512-len(rec)%512)%512))
	b.Write(rawTarHeader("placeholder", '0', len(body)))
	b.WriteString(body)
	b.Write(make([]byte, (512-len(body)%512)%512))
	b.Write(make([]byte, 1024))
	return b.Bytes()
}

func many(n int, f func(i int) entry) []entry {
	out := make([]entry, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func deepName(levels int) string {
	return strings.Repeat("d/", levels-1) + "f"
}

func randomBytes(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return string(b)
}

// hostile is one archive that must be refused with its message.
type hostile struct {
	name  string
	data  func(t testing.TB, s *sandbox) []byte
	kind  Kind
	lim   Limits
	want  string // in the message
	entry string // details.entry, when the refusal names one
	limit any    // details.limit, when a limit was crossed
}

func hostileArchives() []hostile {
	tarOf := func(entries ...entry) func(testing.TB, *sandbox) []byte {
		return func(t testing.TB, _ *sandbox) []byte { return makeTar(t, entries...) }
	}
	zipOf := func(entries ...entry) func(testing.TB, *sandbox) []byte {
		return func(t testing.TB, _ *sandbox) []byte { return makeZip(t, entries...) }
	}
	small := Limits{MaxTotalBytes: 1 << 20}
	return []hostile{
		// Paths.
		{name: "tar ../escape", data: tarOf(file("ok.txt", "ok"), file("../escape.txt", "pwned")), kind: Tar, want: "path traversal", entry: "../escape.txt"},
		{name: "tar ../ into the canary", data: tarOf(file("../../../../canary/pwned", "x")), kind: Tar, want: "path traversal", entry: "../../../../canary/pwned"},
		{name: "tar .. inside", data: tarOf(file("a/../../b", "x")), kind: Tar, want: "path traversal"},
		{name: "tar absolute path", data: func(t testing.TB, s *sandbox) []byte {
			return makeTar(t, file(filepath.Join(s.canary, "pwned"), "x"))
		}, kind: Tar, want: "the name is an absolute path"},
		{name: "tar /etc", data: tarOf(file("/etc/cron.d/pwn", "x")), kind: Tar, want: "the name is an absolute path", entry: "/etc/cron.d/pwn"},
		{name: "tar drive letter", data: tarOf(file("C:/Windows/evil", "x")), kind: Tar, want: "Windows drive letter"},
		{name: "tar backslash", data: tarOf(file(`..\..\evil`, "x")), kind: Tar, want: "backslash"},
		{name: "tar control character", data: tarOf(file("a\nb", "x")), kind: Tar, want: "control character"},
		{name: "tar NUL in a pax name", data: func(testing.TB, *sandbox) []byte { return paxTar("a\x00b", "x") }, kind: Tar, want: "damaged or not a tar archive"},
		{name: "tar not UTF-8", data: tarOf(file("caf\xe9", "x")), kind: Tar, want: "not valid UTF-8"},

		// Links.
		{name: "tar symlink to /etc then a file through it", data: tarOf(symlink("etc", "/etc"), file("etc/passwd", "root::0:0::/:/bin/sh\n")), kind: Tar, want: "the link target is an absolute path", entry: "etc"},
		{name: "tar symlink to the canary then a file through it", data: func(t testing.TB, s *sandbox) []byte {
			return makeTar(t, symlink("c", s.canary), file("c/keep.txt", "pwned"))
		}, kind: Tar, want: "the link target is an absolute path"},
		{name: "tar file through an inside symlink", data: tarOf(dir("sub"), symlink("in", "sub"), file("in/x", "x")), kind: Tar, want: `would be written through the symbolic link "in"`, entry: "in/x"},
		{name: "tar relative symlink out", data: tarOf(symlink("up", "../../../../canary")), kind: Tar, want: "points outside the checkout", entry: "up"},
		{name: "tar symlink chain escape", data: tarOf(symlink("s", "."), symlink("t", "s/..")), kind: Tar, want: "points outside the checkout", entry: "t"},
		{name: "tar symlink chain escape, link made later", data: tarOf(symlink("t", "a/b/../.."), dir("a"), symlink("a/b", "..")), kind: Tar, want: "points outside the checkout", entry: "t"},
		{name: "tar symlink loop", data: tarOf(symlink("x", "y"), symlink("y", "x/z")), kind: Tar, want: "loops"},
		{name: "tar hard link to /etc/passwd", data: tarOf(entry{name: "passwd", typ: tar.TypeLink, link: "/etc/passwd"}), kind: Tar, want: `hard link to "/etc/passwd"`, entry: "passwd"},
		{name: "tar hard link out", data: tarOf(entry{name: "l", typ: tar.TypeLink, link: "../../canary/keep.txt"}), kind: Tar, want: "hard link"},
		{name: "tar hard link to a later file", data: tarOf(entry{name: "l", typ: tar.TypeLink, link: "f"}, file("f", "x")), kind: Tar, want: "comes earlier in the archive"},
		{name: "tar hard link to a symlink", data: tarOf(symlink("s", "f"), file("f", "x"), entry{name: "l", typ: tar.TypeLink, link: "s"}), kind: Tar, want: "hard link"},

		// Types.
		{name: "tar char device", data: tarOf(entry{name: "null", typ: tar.TypeChar, mode: 0o666}), kind: Tar, want: "device files are not accepted", entry: "null"},
		{name: "tar block device", data: tarOf(entry{name: "sda", typ: tar.TypeBlock, mode: 0o660}), kind: Tar, want: "device files are not accepted"},
		{name: "tar fifo", data: tarOf(entry{name: "pipe", typ: tar.TypeFifo, mode: 0o644}), kind: Tar, want: "named pipes (FIFOs) are not accepted"},
		{name: "tar unknown type", data: func(testing.TB, *sandbox) []byte {
			return append(rawTarHeader("vol", 'V', 0), make([]byte, 1024)...)
		}, kind: Tar, want: `tar type "V"`},

		// Duplicates.
		{name: "tar dir replaced by a symlink", data: tarOf(dir("a"), symlink("a", "/etc"), file("a/passwd", "x")), kind: Tar, want: "duplicate entry", entry: "a"},
		{name: "tar dir replaced by an inside symlink", data: tarOf(dir("a"), dir("b"), symlink("a", "b"), file("a/x", "x")), kind: Tar, want: "duplicate entry", entry: "a"},
		{name: "tar file twice", data: tarOf(file("f", "1"), file("f", "2")), kind: Tar, want: "duplicate entry"},
		{name: "tar file under a file", data: tarOf(file("f", "1"), file("f/x", "2")), kind: Tar, want: `its parent "f" is a file`},
		{name: "tar symlink under a symlink", data: tarOf(dir("d"), symlink("s", "d"), symlink("s/t", "/etc")), kind: Tar, want: "would be written through the symbolic link"},

		// Sizes.
		{name: "gzip bomb, 1 GiB of zeros", data: func(t testing.TB, _ *sandbox) []byte { return gzipBomb(t, "zeros", 1<<30) }, kind: TarGz, want: "over the limit of 104857600", entry: "zeros", limit: float64(DefaultMaxFileBytes)},
		{name: "gzip bomb under the per-file limit", data: func(t testing.TB, _ *sandbox) []byte {
			return gz(t, makeTar(t, many(2, func(i int) entry {
				return entry{name: fmt.Sprintf("z%d", i), typ: tar.TypeReg, mode: 0o644, reader: zeros(4 << 20), size: 4 << 20}
			})...))
		}, kind: TarGz, want: "over the ratio limit of 200:1", entry: "z0", limit: "200:1"},
		{name: "tar hard-link copies over the ratio", data: tarOf(append([]entry{file("f", randomBytes(64<<10))}, many(5, func(i int) entry {
			return entry{name: fmt.Sprintf("l%d", i), typ: tar.TypeLink, link: "f"}
		})...)...), kind: Tar, lim: Limits{MaxRatio: 2, RatioGraceBytes: 1}, want: "over the ratio limit of 2:1", entry: "l2"},
		{name: "tar total over the limit", data: tarOf(file("a", randomBytes(600<<10)), file("b", randomBytes(600<<10))), kind: Tar, lim: small, want: "add up to more than the limit of 1048576 bytes", entry: "b", limit: float64(1 << 20)},
		{name: "tar file over the limit", data: tarOf(file("a", randomBytes(2<<10))), kind: Tar, lim: Limits{MaxFileBytes: 1 << 10}, want: "the file is 2048 bytes, over the limit of 1024", entry: "a"},
		{name: "archive over the limit", data: tarOf(file("a", randomBytes(64<<10))), kind: Tar, lim: Limits{MaxArchiveBytes: 16 << 10}, want: "larger than the limit of 16384 bytes", limit: float64(16 << 10)},
		{name: "tar 30000 entries", data: tarOf(many(30000, func(i int) entry { return file(fmt.Sprintf("f%d", i), "") })...), kind: Tar, want: "more than 20000 entries", entry: "f20000", limit: float64(20000)},
		{name: "tar too deep", data: tarOf(file(deepName(33), "x")), kind: Tar, want: "33 levels deep, over the limit of 32", limit: float64(32)},
		{name: "tar name too long", data: tarOf(file(strings.Repeat("n", 300), "x")), kind: Tar, want: "a name in the path is 300 bytes, over the limit of 255", limit: float64(255)},
		{name: "tar path too long", data: tarOf(file(strings.Repeat("abcdefghi/", 110)+"f", "x")), kind: Tar, want: "the name is 1101 bytes, over the limit of 1024"},
		{name: "tar link target too long", data: tarOf(symlink("l", strings.Repeat("a/", 600))), kind: Tar, want: "the link target is 1200 bytes"},
		{name: "empty tar", data: tarOf(), kind: Tar, want: "holds no files"},
		{name: "not an archive", data: func(testing.TB, *sandbox) []byte { return []byte(strings.Repeat("garbage ", 200)) }, kind: Tar, want: "damaged or not a tar archive"},
		{name: "not a gzip stream", data: func(testing.TB, *sandbox) []byte { return []byte("plain text, not gzip") }, kind: TarGz, want: "not a gzip archive"},
		{name: "truncated tar.gz", data: func(t testing.TB, _ *sandbox) []byte {
			b := gz(t, makeTar(t, file("a", randomBytes(8<<10))))
			return b[:len(b)/2]
		}, kind: TarGz, want: "damaged"},

		// Zip.
		{name: "zip slip", data: zipOf(file("ok", "ok"), file("../../../../canary/pwned", "x")), kind: Zip, want: "path traversal", entry: "../../../../canary/pwned"},
		{name: "zip absolute path", data: func(t testing.TB, s *sandbox) []byte { return makeZip(t, file(filepath.Join(s.canary, "pwned"), "x")) }, kind: Zip, want: "absolute path"},
		{name: "zip backslash slip", data: zipOf(file(`..\..\canary\pwned`, "x")), kind: Zip, want: "backslash"},
		{name: "zip NUL in a name", data: zipOf(file("a\x00b", "x")), kind: Zip, want: "the name contains a NUL byte"},
		{name: "zip symlink to the canary then a file through it", data: func(t testing.TB, s *sandbox) []byte {
			return makeZip(t, symlink("c", s.canary), file("c/keep.txt", "pwned"))
		}, kind: Zip, want: "the link target is an absolute path", entry: "c"},
		{name: "zip relative symlink out", data: zipOf(symlink("up", "../../..")), kind: Zip, want: "points outside the checkout"},
		{name: "zip symlink chain escape", data: zipOf(symlink("s", "."), symlink("t", "s/../canary")), kind: Zip, want: "points outside the checkout", entry: "t"},
		{name: "zip dir replaced by a symlink", data: zipOf(dir("a/"), symlink("a", "/etc"), file("a/passwd", "x")), kind: Zip, want: "duplicate entry", entry: "a"},
		{name: "zip device", data: zipOf(entry{name: "dev", mode: 0o644, zmode: fs.ModeDevice | fs.ModeCharDevice}), kind: Zip, want: "device files are not accepted"},
		{name: "zip fifo", data: zipOf(entry{name: "pipe", mode: 0o644, zmode: fs.ModeNamedPipe}), kind: Zip, want: "named pipes (FIFOs) are not accepted"},
		{name: "zip socket", data: zipOf(entry{name: "sock", mode: 0o644, zmode: fs.ModeSocket}), kind: Zip, want: "sockets are not accepted"},
		{name: "zip bomb", data: zipOf(many(2, func(i int) entry {
			return entry{name: fmt.Sprintf("z%d", i), mode: 0o644, reader: zeros(4 << 20)}
		})...), kind: Zip, want: "over the ratio limit of 200:1", entry: "z0"},
		{name: "zip declaring 1 GiB", data: func(t testing.TB, _ *sandbox) []byte { return zipDeclaring(t, 1<<30) }, kind: Zip, want: "1073741824 bytes uncompressed, over the limit of 104857600"},
		{name: "zip declaring less than it holds", data: func(t testing.TB, _ *sandbox) []byte { return zipLying(t) }, kind: Zip, want: "damaged or not a zip archive"},
		{name: "zip 30000 entries", data: zipOf(many(30000, func(i int) entry { return file(fmt.Sprintf("f%d", i), "") })...), kind: Zip, want: "more than 20000 entries", entry: "f20000"},
		{name: "zip too deep", data: zipOf(file(deepName(40), "x")), kind: Zip, want: "40 levels deep"},
		{name: "zip encrypted", data: func(t testing.TB, _ *sandbox) []byte { return zipEncrypted(t) }, kind: Zip, want: "encrypted entries are not accepted"},
		{name: "zip total over the limit", data: zipOf(file("a", randomBytes(600<<10)), file("b", randomBytes(600<<10))), kind: Zip, lim: small, want: "add up to more than the limit of 1048576 bytes", entry: "b"},
		{name: "not a zip", data: func(testing.TB, *sandbox) []byte { return []byte(strings.Repeat("x", 100)) }, kind: Zip, want: "damaged or not a zip archive"},
	}
}

// zipDeclaring is a zip whose one entry declares size bytes uncompressed.
func zipDeclaring(t testing.TB, size uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "big", Method: zip.Deflate, CompressedSize64: 4, UncompressedSize64: size})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte{0x03, 0x00, 0x00, 0x00})
	zw.Close()
	return buf.Bytes()
}

// zipLying declares 10 bytes and holds 100 KiB.
func zipLying(t testing.TB) []byte {
	t.Helper()
	var comp bytes.Buffer
	fw, _ := flate.NewWriter(&comp, flate.DefaultCompression)
	fw.Write(bytes.Repeat([]byte("abc"), 100<<10/3))
	fw.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "liar", Method: zip.Deflate, CompressedSize64: uint64(comp.Len()), UncompressedSize64: 10})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(comp.Bytes())
	zw.Close()
	return buf.Bytes()
}

func zipEncrypted(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "secret", Method: zip.Store, Flags: 0x1, CompressedSize64: 5, UncompressedSize64: 5})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("xxxxx"))
	zw.Close()
	return buf.Bytes()
}

func TestExtractRefusesHostileArchives(t *testing.T) {
	for _, h := range hostileArchives() {
		t.Run(h.name, func(t *testing.T) {
			s := newSandbox(t)
			_, err := extract(t, s, h.data(t, s), h.kind, h.lim)
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.ValidInvalid {
				t.Fatalf("Extract = %v, want VALID_INVALID", err)
			}
			if !strings.Contains(e.Message, h.want) {
				t.Errorf("message %q, want it to contain %q", e.Message, h.want)
			}
			if h.entry != "" && (e.Details["entry"] != h.entry || !strings.Contains(e.Message, strconv.Quote(h.entry))) {
				t.Errorf("details.entry = %q (message %q), want %q", e.Details["entry"], e.Message, h.entry)
			}
			if h.limit != nil {
				got := e.Details["limit"]
				if n, ok := got.(int64); ok {
					got = float64(n)
				} else if n, ok := got.(int); ok {
					got = float64(n)
				}
				if got != h.limit {
					t.Errorf("details.limit = %v (%T), want %v", e.Details["limit"], e.Details["limit"], h.limit)
				}
			}
			if _, err := os.Lstat(s.dest); err == nil {
				t.Errorf("a refused archive left the destination behind")
			}
			if left, _ := os.ReadDir(filepath.Dir(s.dest)); len(left) != 0 {
				t.Errorf("a refused archive left %v behind", left)
			}
			s.untouched(t)
		})
	}
}

func TestOversizeUploadIsA413(t *testing.T) {
	s := newSandbox(t)
	_, err := Extract(t.Context(), zeros(64<<10), Zip, s.dest, Limits{MaxArchiveBytes: 16 << 10})
	e, ok := errcode.As(err)
	if !ok || e.Status() != http.StatusRequestEntityTooLarge {
		t.Fatalf("err = %v, want VALID_INVALID 413", err)
	}
}

// A read error of the body (the server's *http.MaxBytesError) comes back
// uncoded and wrapped, whatever the decoder made of it.
func TestReadErrorsPassThrough(t *testing.T) {
	mbe := &http.MaxBytesError{Limit: 10}
	for _, kind := range []Kind{Tar, TarGz, Zip} {
		s := newSandbox(t)
		data := makeTar(t, file("a", randomBytes(4<<10)))
		if kind == TarGz {
			data = gz(t, data)
		}
		r := io.MultiReader(bytes.NewReader(data[:len(data)/2]), errReader{mbe})
		_, err := Extract(t.Context(), r, kind, s.dest, Limits{})
		var got *http.MaxBytesError
		if !errors.As(err, &got) {
			t.Errorf("%s: err = %v, want the MaxBytesError", kind, err)
		}
		if _, coded := errcode.As(err); coded {
			t.Errorf("%s: a read error came back coded: %v", kind, err)
		}
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestCancelledExtraction(t *testing.T) {
	s := newSandbox(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Extract(ctx, bytes.NewReader(makeTar(t, file("a", "b"))), Tar, s.dest, Limits{}); err == nil {
		t.Fatal("a cancelled extraction succeeded")
	}
	s.untouched(t)
	if _, err := os.Lstat(s.dest); err == nil {
		t.Fatal("a cancelled extraction left the destination")
	}
}
