package fakenomad

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// download fetches an artifact as Nomad's go-getter would for an http(s)
// source: GET it (with the artifact's headers), verify the "checksum"
// option (type:hex), unpack a .tar.gz (by the path's extension or the
// "archive" option) into the destination, or save anything else there
// under its base name.
func (s *Server) download(ctx context.Context, art *api.TaskArtifact, taskDir string, env map[string]string) error {
	if art.GetterSource == nil {
		return errors.New("artifact has no source")
	}
	src := interpolate(*art.GetterSource, env)
	u, err := url.Parse(src)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("failed to download artifact %q: the fake fetches http and https sources only", redact(src))
	}
	rel := "local/"
	if art.RelativeDest != nil && *art.RelativeDest != "" {
		rel = interpolate(*art.RelativeDest, env)
	}
	dest := filepath.Join(taskDir, filepath.FromSlash(rel))
	if !within(dest, taskDir) {
		return fmt.Errorf("artifact destination %q escapes the task directory", rel)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return err
	}
	for k, v := range art.GetterHeaders {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("failed to download artifact %q: %v", redact(src), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("failed to download artifact %q: bad response code: %d", redact(src), resp.StatusCode)
	}
	tmp, err := os.CreateTemp(taskDir, ".artifact-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), resp.Body); err != nil {
		return fmt.Errorf("failed to download artifact %q: %v", redact(src), err)
	}
	if want := art.GetterOptions["checksum"]; want != "" {
		typ, sum, _ := strings.Cut(want, ":")
		if typ != "sha256" {
			return fmt.Errorf("unsupported checksum type %q", typ)
		}
		if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, sum) {
			return fmt.Errorf("checksums did not match for %s: expected %s, got %s", path.Base(u.Path), sum, got)
		}
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	archive := art.GetterOptions["archive"]
	if archive == "" && (strings.HasSuffix(u.Path, ".tar.gz") || strings.HasSuffix(u.Path, ".tgz")) {
		archive = "tar.gz"
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	if archive == "tar.gz" || archive == "tgz" {
		return untarGz(tmp, dest)
	}
	out, err := os.Create(filepath.Join(dest, path.Base(u.Path)))
	if err != nil {
		return err
	}
	defer out.Close()
	_, err = io.Copy(out, tmp)
	return err
}

// redact drops a URL's query (signatures) from messages.
func redact(src string) string {
	if i := strings.IndexByte(src, '?'); i >= 0 {
		return src[:i] + "?…"
	}
	return src
}

func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// untarGz unpacks a gzipped tar into dest, refusing entries outside it.
func untarGz(r io.Reader, dest string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("unpack artifact: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unpack artifact: %w", err)
		}
		p := filepath.Join(dest, filepath.FromSlash(h.Name))
		if !within(p, dest) {
			return fmt.Errorf("unpack artifact: entry %q escapes the destination", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			f.Close()
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		}
	}
}
