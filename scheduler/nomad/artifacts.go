package nomad

import (
	"archive/tar"
	"compress/gzip"
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
// svc server's main listener: GET /artifacts/<id>.tar.gz?expires=&sig=.
const ArtifactPath = "/artifacts/"

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

func plainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\?#%`) && filepath.IsLocal(s)
}

func (a *Artifacts) file(id string) string { return filepath.Join(a.cfg.Dir, id+".tar.gz") }

// Publish packs the artifact's directory once (later calls find it
// packed) and returns its ID and SHA-256.
func (a *Artifacts) Publish(art scheduler.Artifact) (published, error) {
	if !plainName(art.ID) {
		return published{}, errcode.Invalid("artifact", "the artifact ID %q is not a plain name", art.ID)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.file(art.ID)
	if sum, err := os.ReadFile(p + ".sha256"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return published{ID: art.ID, SHA256: strings.TrimSpace(string(sum))}, nil
		}
	}
	if art.Dir == "" {
		return published{}, fmt.Errorf("publish artifact %s: it has no directory", art.ID)
	}
	tmp, err := os.CreateTemp(a.cfg.Dir, "."+art.ID+".*")
	if err != nil {
		return published{}, fmt.Errorf("publish artifact %s: %w", art.ID, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if err := packTree(art.Dir, io.MultiWriter(tmp, h)); err != nil {
		tmp.Close()
		return published{}, fmt.Errorf("publish artifact %s: %w", art.ID, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return published{}, fmt.Errorf("publish artifact %s: %w", art.ID, err)
	}
	if err := tmp.Close(); err != nil {
		return published{}, fmt.Errorf("publish artifact %s: %w", art.ID, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if err := os.Rename(tmp.Name(), p); err != nil {
		return published{}, fmt.Errorf("publish artifact %s: %w", art.ID, err)
	}
	if err := os.WriteFile(p+".sha256", []byte(sum+"\n"), 0o600); err != nil {
		return published{}, fmt.Errorf("publish artifact %s: %w", art.ID, err)
	}
	return published{ID: art.ID, SHA256: sum}, nil
}

// Remove deletes a packed artifact; one that is gone is no error.
func (a *Artifacts) Remove(id string) error {
	if !plainName(id) {
		return errcode.Invalid("artifact", "the artifact ID %q is not a plain name", id)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range []string{a.file(id), a.file(id) + ".sha256"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove artifact %s: %w", id, err)
		}
	}
	return nil
}

func (a *Artifacts) sign(id string, expires int64) string {
	m := hmac.New(sha256.New, a.cfg.Key)
	fmt.Fprintf(m, "GET\n%s\n%d", id, expires)
	return hex.EncodeToString(m.Sum(nil))
}

// SignedURL is the download URL of a packed artifact under base (the svc
// server's address as Nomad clients reach it), valid for the TTL.
func (a *Artifacts) SignedURL(base, id string) string {
	exp := a.cfg.Now().Add(a.cfg.TTL).Unix()
	q := url.Values{"expires": {strconv.FormatInt(exp, 10)}, "sig": {a.sign(id, exp)}}
	return strings.TrimRight(base, "/") + ArtifactPath + url.PathEscape(id) + ".tar.gz?" + q.Encode()
}

// ServeHTTP answers GET <ArtifactPath><id>.tar.gz?expires=&sig=: the
// packed artifact when the signature is this store's and the URL has not
// expired; 403 otherwise, 404 for an artifact that is not here.
func (a *Artifacts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	id, ok := strings.CutSuffix(path.Base(r.URL.Path), ".tar.gz")
	if !ok || !plainName(id) {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	exp, err := strconv.ParseInt(q.Get("expires"), 10, 64)
	if err != nil || !hmac.Equal([]byte(q.Get("sig")), []byte(a.sign(id, exp))) {
		http.Error(w, "bad signature", http.StatusForbidden)
		return
	}
	if a.cfg.Now().Unix() > exp {
		http.Error(w, "expired", http.StatusForbidden)
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

// packTree writes dir as a gzipped tar: directories, regular files (with
// their modes) and symlinks, in walk order; anything else is skipped.
func packTree(dir string, w io.Writer) error {
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
