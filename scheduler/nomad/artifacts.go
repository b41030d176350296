package nomad

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// ArtifactPath is where the artifact handler expects to be mounted on the
// svc server's main listener: GET /artifacts/<id>.tar.gz?expires=&sig=
// downloads an artifact, PUT (a build job uploading what it built) stores
// one. Each URL is signed for one method and one artifact.
const ArtifactPath = "/artifacts/"

// DefaultMaxUploadBytes caps an uploaded build when the store's
// configuration sets no cap.
const DefaultMaxUploadBytes = 4 << 30

// ArtifactsConfig configures an artifact store.
type ArtifactsConfig struct {
	// Dir holds the packed artifacts (<id>.tar.gz and <id>.tar.gz.sha256).
	// Required.
	Dir string
	// Key signs download URLs (HMAC-SHA256); at least 32 bytes. Every
	// server that may answer a download must hold the same key.
	Key []byte
	// TTL is how long a signed URL stays valid; 0 means one hour. Nomad
	// downloads an allocation's artifact when the allocation starts: a
	// job rescheduled after the URL expired cannot fetch it until it is
	// registered again.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxUploadBytes caps an uploaded build (compressed); 0 means
	// DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// Peers are the other svc servers, whose stores a missing artifact
	// is fetched from (a build uploaded to another node, or packed by a
	// leader that is gone); nil for a single server.
	Peers Peers
}

// Peers fetch an artifact's file (ArtifactBlobs' blob name) from the
// other svc servers into w: raftstore.Store does, over the cluster port.
// A blob no server has is an error wrapping fs.ErrNotExist (cmd/svc
// translates the store's); any other error means some server could not
// answer. Bytes may reach w before an error.
type Peers interface {
	FetchBlob(ctx context.Context, name string, w io.Writer) (int64, error)
}

// Artifacts is the controller's artifact store: builds packed as .tar.gz,
// served to Nomad clients at short-lived HMAC-signed URLs. It is an
// http.Handler for GET ArtifactPath<id>.tar.gz.
type Artifacts struct {
	cfg ArtifactsConfig
	mu  sync.Mutex // one packing at a time
}

var _ http.Handler = (*Artifacts)(nil)

// NewArtifacts opens an artifact store after checking its configuration.
func NewArtifacts(cfg ArtifactsConfig) (*Artifacts, error) {
	if cfg.Dir == "" {
		return nil, errors.New("nomad artifacts: a directory is required")
	}
	if len(cfg.Key) < 32 {
		return nil, errors.New("nomad artifacts: the signing key must be at least 32 bytes")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("nomad artifacts: %w", err)
	}
	cfg.Key = append([]byte(nil), cfg.Key...)
	return &Artifacts{cfg: cfg}, nil
}

// published is a packed artifact.
type published struct {
	ID     string
	SHA256 string
}

func (a *Artifacts) file(id string) string { return filepath.Join(a.cfg.Dir, id+".tar.gz") }

// Publish packs the artifact's directory once (later calls find it
// packed) and returns its ID and SHA-256.
func (a *Artifacts) Publish(art scheduler.Artifact) (published, error) {
	return a.publish(art.ID, art.Dir, nil)
}

// PublishSource packs an app's source tree for a build job to download,
// leaving out the top-level .git directory (history the build does not
// need, and may be large).
func (a *Artifacts) PublishSource(id, dir string) (published, error) {
	return a.publish(id, dir, func(rel string) bool { return rel == ".git" })
}

// Ensure makes sure the artifact is in this server's store: packed here
// already, else fetched from a peer, else packed from its directory. An
// artifact that is nowhere is NOT_FOUND; peers that cannot answer are
// ADAPTER_UNAVAILABLE.
func (a *Artifacts) Ensure(ctx context.Context, art scheduler.Artifact) (published, error) {
	if pub, ok := a.Lookup(art.ID); ok {
		return pub, nil
	}
	pub, err := a.fetch(ctx, art.ID)
	switch {
	case err == nil:
		return pub, nil
	case !errors.Is(err, fs.ErrNotExist):
		return published{}, err
	case art.Dir != "":
		return a.Publish(art)
	}
	return published{}, errcode.New(errcode.NotFound, "artifact %s is on no svc server", art.ID).
		WithRemedy("deploy again: the build is rebuilt")
}

// fetch copies an artifact from a peer into this store. Without peers, or
// when none has it, the error wraps fs.ErrNotExist.
func (a *Artifacts) fetch(ctx context.Context, id string) (published, error) {
	if !scheduler.PlainName(id) {
		return published{}, errcode.Invalid("artifact", "the artifact ID %q is not a plain name", id)
	}
	if a.cfg.Peers == nil {
		return published{}, fmt.Errorf("artifact %s: %w", id, fs.ErrNotExist)
	}
	tmp, sum, err := a.stage(id, func(w io.Writer) error {
		_, err := a.cfg.Peers.FetchBlob(ctx, id+".tar.gz", w)
		return err
	})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return published{}, err
		}
		return published{}, errcode.Wrap(err, errcode.AdapterUnavailable, "artifact %s: the other svc servers could not be asked for it", id).
			WithRemedy("retry once the cluster's servers answer")
	}
	defer os.Remove(tmp)
	a.mu.Lock()
	defer a.mu.Unlock()
	if pub, ok := a.lookupLocked(id); ok {
		return pub, nil
	}
	return a.commitLocked(id, tmp, sum)
}

// OpenBlob serves a packed artifact's file to another svc server
// (raftstore's BlobSource): name is <id>.tar.gz; one that is not here
// wraps fs.ErrNotExist.
func (a *Artifacts) OpenBlob(_ context.Context, name string) (io.ReadCloser, int64, error) {
	id, ok := strings.CutSuffix(name, ".tar.gz")
	if !ok || !scheduler.PlainName(id) {
		return nil, 0, fmt.Errorf("blob %q: %w", name, fs.ErrNotExist)
	}
	if _, ok := a.Lookup(id); !ok {
		return nil, 0, fmt.Errorf("artifact %s: %w", id, fs.ErrNotExist)
	}
	f, err := os.Open(a.file(id))
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// Lookup says whether an artifact is packed here, with its SHA-256.
func (a *Artifacts) Lookup(id string) (published, bool) {
	if !scheduler.PlainName(id) {
		return published{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookupLocked(id)
}

func (a *Artifacts) lookupLocked(id string) (published, bool) {
	p := a.file(id)
	sum, err := os.ReadFile(p + ".sha256")
	if err != nil {
		return published{}, false
	}
	if _, err := os.Stat(p); err != nil {
		return published{}, false
	}
	return published{ID: id, SHA256: strings.TrimSpace(string(sum))}, true
}

// publish packs dir as artifact id unless it is packed already; skip
// leaves out the entries (slash paths relative to dir) it names.
func (a *Artifacts) publish(id, dir string, skip func(rel string) bool) (published, error) {
	if !scheduler.PlainName(id) {
		return published{}, errcode.Invalid("artifact", "the artifact ID %q is not a plain name", id)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if pub, ok := a.lookupLocked(id); ok {
		return pub, nil
	}
	if dir == "" {
		return published{}, fmt.Errorf("publish artifact %s: it is not in this server's store and has no directory to pack", id)
	}
	return a.storeLocked(id, func(w io.Writer) error { return packTree(dir, w, skip) })
}

// storeLocked packs an artifact through fill and puts it in place.
func (a *Artifacts) storeLocked(id string, fill func(w io.Writer) error) (published, error) {
	tmp, sum, err := a.stage(id, fill)
	if err != nil {
		return published{}, err
	}
	defer os.Remove(tmp)
	return a.commitLocked(id, tmp, sum)
}

// stage writes an artifact through fill into a temporary file of the
// store and returns it with its SHA-256; it takes no lock.
func (a *Artifacts) stage(id string, fill func(w io.Writer) error) (string, string, error) {
	tmp, err := os.CreateTemp(a.cfg.Dir, "."+id+".*")
	if err != nil {
		return "", "", fmt.Errorf("store artifact %s: %w", id, err)
	}
	h := sha256.New()
	err = fill(io.MultiWriter(tmp, h))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", "", fmt.Errorf("store artifact %s: %w", id, err)
	}
	return tmp.Name(), hex.EncodeToString(h.Sum(nil)), nil
}

// commitLocked renames a staged file into place as artifact id, with its
// checksum beside it.
func (a *Artifacts) commitLocked(id, tmp, sum string) (published, error) {
	p := a.file(id)
	if err := os.Rename(tmp, p); err != nil {
		return published{}, fmt.Errorf("store artifact %s: %w", id, err)
	}
	if err := os.WriteFile(p+".sha256", []byte(sum+"\n"), 0o600); err != nil {
		return published{}, fmt.Errorf("store artifact %s: %w", id, err)
	}
	return published{ID: id, SHA256: sum}, nil
}

// Remove deletes a packed artifact; one that is gone is no error.
func (a *Artifacts) Remove(id string) error {
	if !scheduler.PlainName(id) {
		return errcode.Invalid("artifact", "the artifact ID %q is not a plain name", id)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.removeLocked(id)
}

// sign is the signature of a URL: the method it is good for (GET also
// serves HEAD), the artifact and the expiry.
func (a *Artifacts) sign(method, id string, expires int64) string {
	m := hmac.New(sha256.New, a.cfg.Key)
	fmt.Fprintf(m, "%s\n%s\n%d", method, id, expires)
	return hex.EncodeToString(m.Sum(nil))
}

// SignedURL is the download URL of a packed artifact under base (the svc
// server's address as Nomad clients reach it), valid for the TTL.
func (a *Artifacts) SignedURL(base, id string) string {
	return a.signedURL(http.MethodGet, base, id, a.cfg.TTL)
}

// SignedUploadURL is the URL a build job PUTs the artifact it built to,
// valid for ttl (the build's time limit and some; at least the store's
// TTL).
func (a *Artifacts) SignedUploadURL(base, id string, ttl time.Duration) string {
	return a.signedURL(http.MethodPut, base, id, max(ttl, a.cfg.TTL))
}

func (a *Artifacts) signedURL(method, base, id string, ttl time.Duration) string {
	exp := a.cfg.Now().Add(ttl).Unix()
	q := url.Values{"expires": {strconv.FormatInt(exp, 10)}, "sig": {a.sign(method, id, exp)}}
	return strings.TrimRight(base, "/") + ArtifactPath + url.PathEscape(id) + ".tar.gz?" + q.Encode()
}

// ServeHTTP answers <ArtifactPath><id>.tar.gz?expires=&sig= when the
// signature is this store's for the method and the URL has not expired
// (403 otherwise): GET and HEAD serve a packed artifact, fetched from a
// peer first when another server holds it (404 when none does, 503 when
// one could not answer), PUT stores an upload (upload).
func (a *Artifacts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.Method
	switch method {
	case http.MethodGet, http.MethodHead:
		method = http.MethodGet
	case http.MethodPut:
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	id, ok := strings.CutSuffix(path.Base(r.URL.Path), ".tar.gz")
	if !ok || !scheduler.PlainName(id) {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	exp, err := strconv.ParseInt(q.Get("expires"), 10, 64)
	if err != nil || !hmac.Equal([]byte(q.Get("sig")), []byte(a.sign(method, id, exp))) {
		http.Error(w, "bad signature", http.StatusForbidden)
		return
	}
	if a.cfg.Now().Unix() > exp {
		http.Error(w, "expired", http.StatusForbidden)
		return
	}
	if method == http.MethodPut {
		a.upload(w, r, id)
		return
	}
	if _, err := a.Ensure(r.Context(), scheduler.Artifact{ID: id}); err != nil {
		if errcode.Has(err, errcode.NotFound) {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "the artifact is on another svc server that does not answer", http.StatusServiceUnavailable)
		return
	}
	f, err := os.Open(a.file(id))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "artifact unreadable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Cache-Control", "private, no-store")
	http.ServeContent(w, r, id+".tar.gz", fi.ModTime(), f)
}

// upload stores a build job's upload: a gzipped tar, read through once
// and checked as it is written (every entry a relative path that stays
// inside the tree; directories, regular files and symlinks only), at most
// MaxUploadBytes. The first complete upload wins: the same bytes again
// (a retried request whose answer was lost) are 204, different bytes 409.
func (a *Artifacts) upload(w http.ResponseWriter, r *http.Request, id string) {
	tooBig := func() {
		http.Error(w, fmt.Sprintf("the upload is larger than %d bytes", a.cfg.MaxUploadBytes), http.StatusRequestEntityTooLarge)
	}
	if r.ContentLength > a.cfg.MaxUploadBytes {
		tooBig()
		return
	}
	body := http.MaxBytesReader(w, r.Body, a.cfg.MaxUploadBytes)
	tmp, sum, err := a.stage(id, func(w io.Writer) error { return checkTarGz(io.TeeReader(body, w)) })
	if err != nil {
		var max *http.MaxBytesError
		if errors.As(err, &max) {
			tooBig()
			return
		}
		http.Error(w, "the upload is not a gzipped tar of a build: "+errors.Unwrap(err).Error(), http.StatusBadRequest)
		return
	}
	defer os.Remove(tmp)
	a.mu.Lock()
	defer a.mu.Unlock()
	if prior, had := a.lookupLocked(id); had {
		if prior.SHA256 != sum {
			http.Error(w, "a different build was uploaded for this artifact already", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if _, err := a.commitLocked(id, tmp, sum); err != nil {
		http.Error(w, "the upload could not be stored", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// removeLocked deletes an artifact's files; one that is gone is no error.
func (a *Artifacts) removeLocked(id string) error {
	for _, p := range []string{a.file(id), a.file(id) + ".sha256"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove artifact %s: %w", id, err)
		}
	}
	return nil
}

// checkTarGz reads a gzipped tar to its end and refuses what a build
// never holds: absolute or escaping names, and entries other than
// directories, regular files and symlinks.
func checkTarGz(r io.Reader) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if _, err := checkEntry(h); err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return err
		}
	}
	// Drain what follows the tar's end, so the checksum covers every
	// byte stored.
	_, err = io.Copy(io.Discard, zr)
	return err
}

// checkEntry refuses a tar entry a tree never holds (an absolute or
// escaping name; anything but a directory, a regular file or a symlink)
// and returns its clean name.
func checkEntry(h *tar.Header) (string, error) {
	clean := path.Clean(h.Name)
	if strings.HasPrefix(h.Name, "/") || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("entry %q leaves the tree", h.Name)
	}
	switch h.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink:
	default:
		return "", fmt.Errorf("entry %q is neither a file, a directory nor a symlink", h.Name)
	}
	return clean, nil
}

// unpackRatio bounds what an upload unpacks to: this many times the
// store's upload cap.
const unpackRatio = 8

// unpack writes a packed artifact's tree into dst (made if missing; what
// it holds must not collide with the tree), refusing what would leave it
// (unpackTree).
func (a *Artifacts) unpack(id, dst string) error {
	f, err := os.Open(a.file(id))
	if err != nil {
		return fmt.Errorf("unpack artifact %s: %w", id, err)
	}
	defer f.Close()
	if err := unpackTree(f, dst, a.cfg.MaxUploadBytes*unpackRatio); err != nil {
		return fmt.Errorf("unpack artifact %s: %w", id, err)
	}
	return nil
}

// unpackTree unpacks a gzipped tar into dst through an os.Root on it, so
// that nothing is written outside it: each entry as an upload's is checked
// (checkEntry), a symlink only to a relative target inside the tree and
// nothing under one, at most limit bytes of files in all, no file written
// twice.
func unpackTree(r io.Reader, dst string, limit int64) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	var total int64
	links := map[string]bool{} // the symlinks written: nothing is written through one
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name, err := checkEntry(h)
		if err != nil || name == "." {
			if err != nil {
				return err
			}
			continue
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if links[d] {
				return fmt.Errorf("entry %q is under the symlink %q", h.Name, d)
			}
		}
		if h.Typeflag != tar.TypeDir {
			if err := root.MkdirAll(path.Dir(name), 0o700); err != nil {
				return err
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(name, fs.FileMode(h.Mode)&0o777|0o700)
		case tar.TypeSymlink:
			target := path.Join(path.Dir(name), h.Linkname)
			if path.IsAbs(h.Linkname) || target == ".." || strings.HasPrefix(target, "../") {
				return fmt.Errorf("entry %q links out of the tree (to %q)", h.Name, h.Linkname)
			}
			links[name] = true
			err = root.Symlink(h.Linkname, name)
		case tar.TypeReg:
			if total += h.Size; total > limit {
				return fmt.Errorf("the tree holds more than %d bytes", limit)
			}
			err = writeEntry(root, name, fs.FileMode(h.Mode)&0o777, tr)
		}
		if err != nil {
			return err
		}
	}
}

// writeEntry writes a new file of the tree from r.
func writeEntry(root *os.Root, name string, mode fs.FileMode, r io.Reader) error {
	f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// packTree writes dir as a gzipped tar: directories, regular files (with
// their modes) and symlinks, in walk order, but for what skip names;
// anything else is skipped.
func packTree(dir string, w io.Writer, skip func(rel string) bool) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if skip != nil && skip(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.IsDir(), fi.Mode().IsRegular():
		default:
			return nil
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname, h.Uid, h.Gid = "", "", 0, 0
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
