package source

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"github.com/svchost/svc/internal/errcode"
)

// Kind is the format of an archive.
type Kind string

// Archive formats.
const (
	Tar   Kind = "tar"
	TarGz Kind = "tar.gz"
	Zip   Kind = "zip"
)

// contentTypes are the upload content types and the format each names.
var contentTypes = map[string]Kind{
	"application/gzip":  TarGz,
	"application/x-tar": Tar,
	"application/zip":   Zip,
}

// KindOf returns the archive format a Content-Type names. Anything else is
// refused as VALID_INVALID with status 415.
func KindOf(contentType string) (Kind, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if k, ok := contentTypes[mt]; err == nil && ok {
		return k, nil
	}
	return "", errcode.New(errcode.ValidInvalid, "the body must be an archive: Content-Type application/gzip (tar.gz), application/x-tar or application/zip").
		WithStatus(http.StatusUnsupportedMediaType).WithDetail("content_type", contentType)
}

// Stats describe an extraction.
type Stats struct {
	Files        int
	Dirs         int
	Symlinks     int
	Bytes        int64  // written, uncompressed
	ArchiveBytes int64  // read, as uploaded
	SHA256       string // hex digest of the archive as uploaded
}

// Extract unpacks an archive into dest, which must not exist. It writes
// into a fresh directory beside dest and renames it into place only when
// the whole archive was accepted, so a refused archive leaves nothing
// behind. The format is sniffed from the first bytes (gzip and zip magic)
// and kind is only the claim of the uploader.
//
// Entries are refused, as VALID_INVALID naming the entry and the limit,
// for: absolute paths, .., Windows drives and backslashes, NUL and control
// characters, over-long names and too-deep paths, duplicates, anything
// written through a symbolic link, links leading outside dest (at any step
// of a chain), hard links other than to a file extracted before (which is
// copied), devices, FIFOs and sockets; and the archive for too many
// entries, too many bytes (per file, in total, or compressed) and a
// compression ratio over the limit. Files are 0644, or 0755 when any
// execute bit was set; directories 0755; setuid, setgid and sticky bits are
// dropped. A read error of r (such as *http.MaxBytesError) is returned
// wrapped, uncoded.
func Extract(ctx context.Context, r io.Reader, kind Kind, dest string, lim Limits) (Stats, error) {
	lim = lim.withDefaults()
	if err := absent(dest); err != nil {
		return Stats{}, fmt.Errorf("extract: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-")
	if err != nil {
		return Stats{}, fmt.Errorf("extract: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return Stats{}, fmt.Errorf("extract: %w", err)
	}
	defer root.Close()
	in := &input{r: r, limit: lim.MaxArchiveBytes, sum: sha256.New()}
	x := &extractor{ctx: ctx, root: root, lim: lim, in: in, t: newTree("archive entry", lim), spoolDir: filepath.Dir(dest)}
	if err := x.run(kind); err != nil {
		if in.err != nil {
			return Stats{}, in.err
		}
		return Stats{}, err
	}
	if err := root.Chmod(".", 0o755); err != nil {
		return Stats{}, fmt.Errorf("extract: %w", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return Stats{}, fmt.Errorf("extract: %w", err)
	}
	done = true
	x.stats.ArchiveBytes = in.n
	x.stats.SHA256 = hex.EncodeToString(in.sum.Sum(nil))
	return x.stats, nil
}

// input reads the archive as uploaded: it counts, hashes, enforces the
// archive limit and remembers the first read error, which wins over
// whatever a decoder makes of it.
type input struct {
	r     io.Reader
	n     int64
	limit int64
	sum   hash.Hash
	err   error
}

func (in *input) Read(p []byte) (int, error) {
	if in.err != nil {
		return 0, in.err
	}
	n, err := in.r.Read(p)
	in.sum.Write(p[:n])
	in.n += int64(n)
	if in.n > in.limit {
		in.err = errcode.New(errcode.ValidInvalid, "the archive is larger than the limit of %d bytes", in.limit).
			WithStatus(http.StatusRequestEntityTooLarge).WithDetail("limit", in.limit)
		return n, in.err
	}
	if err != nil && err != io.EOF {
		in.err = fmt.Errorf("read archive: %w", err)
		return n, in.err
	}
	return n, err
}

type extractor struct {
	ctx      context.Context
	root     *os.Root
	lim      Limits
	in       *input
	t        *tree
	spoolDir string
	stats    Stats
	buf      []byte
	// Archive bytes read so far, for the ratio.
	compressed func() int64
}

func (x *extractor) run(claimed Kind) error {
	br := bufio.NewReader(x.in)
	head, _ := br.Peek(512)
	if x.in.err != nil {
		return x.in.err
	}
	kind := sniff(head, claimed)
	var err error
	switch kind {
	case Zip:
		err = x.zip(br)
	case TarGz:
		x.compressed = func() int64 { return x.in.n }
		var gz *gzip.Reader
		if gz, err = gzip.NewReader(br); err != nil {
			return x.damaged("", "gzip", err)
		}
		err = x.tar(gz, "tar.gz")
	case Tar:
		// A plain tar never expands, but for sparse files and hard-link
		// copies: the ratio bounds those too.
		x.compressed = func() int64 { return x.in.n }
		err = x.tar(br, "tar")
	default:
		return errcode.New(errcode.ValidInvalid, "unknown archive format %q", kind)
	}
	if err != nil {
		return err
	}
	if x.stats.Files == 0 && len(x.t.links) == 0 {
		return errcode.New(errcode.ValidInvalid, "the archive holds no files")
	}
	// The rest of the upload (padding, trailing data) counts against the
	// limit and the digest.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return err
	}
	return x.finish()
}

// sniff trusts magic bytes over the claimed format.
func sniff(head []byte, claimed Kind) Kind {
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return TarGz
	case bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return Zip
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return Tar
	}
	return claimed
}

// damaged is the error of an archive its decoder cannot read.
func (x *extractor) damaged(entry, format string, err error) error {
	if x.in.err != nil {
		return x.in.err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if entry == "" {
		return errcode.Wrap(err, errcode.ValidInvalid, "the archive is damaged or not a %s archive", format)
	}
	return errcode.Wrap(err, errcode.ValidInvalid, "%s %q: the archive is damaged or not a %s archive", x.t.label, shorten(entry), format).
		WithDetail("entry", shorten(entry))
}

func (x *extractor) tar(r io.Reader, format string) error {
	tr := tar.NewReader(r)
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return x.damaged("", format, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // pax metadata of the whole archive (git archive writes the commit there)
		}
		if err := x.t.count(hdr.Name); err != nil {
			return err
		}
		p, err := x.t.clean(hdr.Name)
		if err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = x.dir(hdr.Name, p)
		case tar.TypeReg, '\x00':
			err = x.file(hdr.Name, p, fs.FileMode(hdr.Mode), tr, hdr.Size, format)
		case tar.TypeSymlink:
			err = x.link(hdr.Name, p, hdr.Linkname)
		case tar.TypeLink:
			err = x.hardlink(hdr.Name, p, hdr.Linkname)
		case tar.TypeChar, tar.TypeBlock:
			err = x.t.refuse(hdr.Name, nil, "device files are not accepted")
		case tar.TypeFifo:
			err = x.t.refuse(hdr.Name, nil, "named pipes (FIFOs) are not accepted")
		default:
			err = x.t.refuse(hdr.Name, nil, "entries of tar type %q are not accepted (only files, directories and links)", string(hdr.Typeflag))
		}
		if err != nil {
			return err
		}
	}
}

func (x *extractor) zip(r io.Reader) error {
	f, err := os.CreateTemp(x.spoolDir, ".upload-*.zip")
	if err != nil {
		return fmt.Errorf("spool archive: %w", err)
	}
	_ = os.Remove(f.Name()) // unlinked: gone however this ends
	defer f.Close()
	size, err := io.Copy(f, r)
	if err != nil {
		if x.in.err != nil {
			return x.in.err
		}
		return fmt.Errorf("spool archive: %w", err)
	}
	zr, err := zip.NewReader(f, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return x.damaged("", "zip", err)
	}
	// Refuse what the central directory declares before writing anything.
	if len(zr.File) > x.lim.MaxEntries {
		return x.t.refuse(zr.File[x.lim.MaxEntries].Name, x.lim.MaxEntries, "more than %d entries", x.lim.MaxEntries)
	}
	var declared uint64
	for _, zf := range zr.File {
		if zf.UncompressedSize64 > uint64(x.lim.MaxFileBytes) {
			return x.t.refuse(zf.Name, x.lim.MaxFileBytes, "the file is %d bytes uncompressed, over the limit of %d", zf.UncompressedSize64, x.lim.MaxFileBytes)
		}
		declared += zf.UncompressedSize64
		if declared > uint64(x.lim.MaxTotalBytes) {
			return x.t.refuse(zf.Name, x.lim.MaxTotalBytes, "the files add up to more than the limit of %d bytes uncompressed", x.lim.MaxTotalBytes)
		}
	}
	var compressed int64
	x.compressed = func() int64 { return compressed }
	for _, zf := range zr.File {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		if err := x.t.count(zf.Name); err != nil {
			return err
		}
		p, err := x.t.clean(zf.Name)
		if err != nil {
			return err
		}
		compressed += int64(min(zf.CompressedSize64, uint64(size)))
		mode := zf.Mode()
		switch {
		case zf.Flags&0x1 != 0:
			err = x.t.refuse(zf.Name, nil, "encrypted entries are not accepted")
		case mode&fs.ModeSymlink != 0:
			err = x.zipLink(zf, p)
		case mode.IsDir():
			err = x.dir(zf.Name, p)
		case mode&fs.ModeDevice != 0:
			err = x.t.refuse(zf.Name, nil, "device files are not accepted")
		case mode&fs.ModeNamedPipe != 0:
			err = x.t.refuse(zf.Name, nil, "named pipes (FIFOs) are not accepted")
		case mode&fs.ModeSocket != 0:
			err = x.t.refuse(zf.Name, nil, "sockets are not accepted")
		case !mode.IsRegular():
			err = x.t.refuse(zf.Name, nil, "entries of mode %s are not accepted (only files, directories and links)", mode.Type())
		default:
			err = x.zipFile(zf, p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) zipFile(zf *zip.File, p string) error {
	if zf.UncompressedSize64 > uint64(x.lim.MaxFileBytes) {
		return x.t.refuse(zf.Name, x.lim.MaxFileBytes, "the file is %d bytes uncompressed, over the limit of %d", zf.UncompressedSize64, x.lim.MaxFileBytes)
	}
	if u := zf.UncompressedSize64; u > uint64(x.lim.RatioGraceBytes) && u/max(zf.CompressedSize64, 1) > uint64(x.lim.MaxRatio) {
		return x.ratioRefusal(zf.Name)
	}
	rc, err := zf.Open()
	if err != nil {
		return x.damaged(zf.Name, "zip", err)
	}
	defer rc.Close()
	return x.file(zf.Name, p, zf.Mode(), rc, int64(zf.UncompressedSize64), "zip")
}

func (x *extractor) zipLink(zf *zip.File, p string) error {
	rc, err := zf.Open()
	if err != nil {
		return x.damaged(zf.Name, "zip", err)
	}
	defer rc.Close()
	target, err := io.ReadAll(io.LimitReader(rc, int64(x.lim.MaxPathBytes)+1))
	if err != nil {
		return x.damaged(zf.Name, "zip", err)
	}
	return x.link(zf.Name, p, string(target))
}

// mkdirs creates the missing parents of p, refusing any that is a link or
// a file.
func (x *extractor) mkdirs(entry, p string) error {
	missing, err := x.t.missingParents(entry, p)
	if err != nil {
		return err
	}
	for _, d := range missing {
		if err := x.mkdir(d); err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) mkdir(p string) error {
	if err := x.root.Mkdir(p, 0o755); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	if err := x.root.Chmod(p, 0o755); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	x.t.nodes[p] = &node{kind: dirNode}
	x.stats.Dirs++
	return nil
}

func (x *extractor) dir(entry, p string) error {
	if p == "" {
		return nil // the root itself ("./")
	}
	if n := x.t.nodes[p]; n != nil {
		if n.kind == dirNode {
			return nil // a directory named twice
		}
		return x.t.fresh(entry, p)
	}
	if err := x.mkdirs(entry, p); err != nil {
		return err
	}
	return x.mkdir(p)
}

func (x *extractor) link(entry, p, target string) error {
	if p == "" {
		return x.t.refuse(entry, nil, "the root of the archive cannot be a link")
	}
	if err := x.mkdirs(entry, p); err != nil {
		return err
	}
	return x.t.addLink(entry, p, target)
}

// hardlink copies a file extracted earlier; any other target is refused.
func (x *extractor) hardlink(entry, p, target string) error {
	t, err := x.t.clean(target)
	if err != nil {
		return x.t.refuse(entry, nil, "hard link to %q: its target is not a file of the archive", shorten(target))
	}
	if n := x.t.nodes[t]; n == nil || n.kind != fileNode {
		return x.t.refuse(entry, nil, "hard link to %q: only hard links to a file that comes earlier in the archive are accepted", shorten(target))
	}
	src, err := x.root.OpenFile(t, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	return x.file(entry, p, info.Mode(), src, info.Size(), "tar")
}

// file writes one regular file, never through a link, with the limits.
func (x *extractor) file(entry, p string, mode fs.FileMode, r io.Reader, size int64, format string) error {
	if p == "" {
		return x.t.refuse(entry, nil, "the root of the archive cannot be a file")
	}
	if size > x.lim.MaxFileBytes {
		return x.t.refuse(entry, x.lim.MaxFileBytes, "the file is %d bytes, over the limit of %d", size, x.lim.MaxFileBytes)
	}
	if x.stats.Bytes+size > x.lim.MaxTotalBytes {
		return x.t.refuse(entry, x.lim.MaxTotalBytes, "the files add up to more than the limit of %d bytes uncompressed", x.lim.MaxTotalBytes)
	}
	if err := x.t.fresh(entry, p); err != nil {
		return err
	}
	if err := x.mkdirs(entry, p); err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if mode&0o111 != 0 {
		perm = 0o755
	}
	f, err := x.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	x.t.nodes[p] = &node{kind: fileNode}
	x.stats.Files++
	if err := x.copy(entry, f, r, format); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil { // exact, whatever the umask
		f.Close()
		return fmt.Errorf("extract: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	return nil
}

func (x *extractor) copy(entry string, w io.Writer, r io.Reader, format string) error {
	if x.buf == nil {
		x.buf = make([]byte, 32<<10)
	}
	var n int64
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		k, err := r.Read(x.buf)
		if k > 0 {
			n += int64(k)
			x.stats.Bytes += int64(k)
			switch {
			case n > x.lim.MaxFileBytes:
				return x.t.refuse(entry, x.lim.MaxFileBytes, "the file is more than %d bytes, over the limit", x.lim.MaxFileBytes)
			case x.stats.Bytes > x.lim.MaxTotalBytes:
				return x.t.refuse(entry, x.lim.MaxTotalBytes, "the files add up to more than the limit of %d bytes uncompressed", x.lim.MaxTotalBytes)
			}
			if err := x.checkRatio(entry); err != nil {
				return err
			}
			if _, err := w.Write(x.buf[:k]); err != nil {
				return fmt.Errorf("extract: %w", err)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return x.damaged(entry, format, err)
		}
	}
}

func (x *extractor) checkRatio(entry string) error {
	if x.compressed == nil || x.stats.Bytes <= x.lim.RatioGraceBytes {
		return nil
	}
	if x.stats.Bytes/max(x.compressed(), 1) > x.lim.MaxRatio {
		return x.ratioRefusal(entry)
	}
	return nil
}

func (x *extractor) ratioRefusal(entry string) error {
	return x.t.refuse(entry, fmt.Sprintf("%d:1", x.lim.MaxRatio),
		"the archive expands more than %d times its compressed size, over the ratio limit of %d:1 (a decompression bomb?)", x.lim.MaxRatio, x.lim.MaxRatio)
}

// finish checks every link against the final tree and creates them.
func (x *extractor) finish() error {
	if err := x.t.checkLinks(); err != nil {
		return err
	}
	for _, p := range x.t.links {
		if err := x.root.Symlink(x.t.nodes[p].target, p); err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		x.stats.Symlinks++
	}
	return nil
}

// absent fails unless nothing is at path.
func absent(path string) error {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return fmt.Errorf("%s already exists", path)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return err
}
