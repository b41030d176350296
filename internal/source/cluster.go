package source

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// Peers fetch a blob (a checkout packed by OpenBlob, named by BlobName)
// from the other svc servers into w: raftstore.Store does, over the
// cluster port. A blob no server has is an error wrapping fs.ErrNotExist
// (the composition root translates raftstore.ErrBlobNotFound); any other
// error means some server could not answer. Bytes may reach w before an
// error.
type Peers interface {
	FetchBlob(ctx context.Context, name string, w io.Writer) (int64, error)
}

// BlobPrefix starts the name of every blob this package serves.
const BlobPrefix = "checkout-"

const blobSuffix = ".tar.gz"

// BlobName is the name under which a checkout travels between servers:
// checkout-<app id>-<checkout id>.tar.gz. It passes
// raftstore.ValidBlobName for any app and checkout ID.
func BlobName(appID, checkoutID string) string {
	return BlobPrefix + appID + "-" + checkoutID + blobSuffix
}

// parseBlobName takes a blob name apart; ok only for a well-formed app
// and checkout ID.
func parseBlobName(name string) (appID, checkoutID string, ok bool) {
	rest, ok := strings.CutPrefix(name, BlobPrefix)
	if !ok {
		return "", "", false
	}
	if rest, ok = strings.CutSuffix(rest, blobSuffix); !ok {
		return "", "", false
	}
	appID, checkoutID, ok = strings.Cut(rest, "-")
	if !ok || !appIDRE.MatchString(appID) || !ids.Valid(checkoutPrefix, checkoutID) {
		return "", "", false
	}
	return appID, checkoutID, true
}

// errAbsent says a checkout is not in this server's work dir.
var errAbsent = errors.New("the checkout is not here")

// errTooLarge ends a fetch that sends more than a packed checkout can be.
var errTooLarge = errors.New("larger than a packed checkout can be")

// maxEnsureRounds bounds how often Ensure looks again after the app's
// source changed under it.
const maxEnsureRounds = 5

// entryOverhead bounds what one entry adds to a packed checkout besides
// its bytes: a header, a PAX header with a long name and link target, and
// padding.
const entryOverhead = 8 << 10

// forFetched returns the limits a checkout fetched from another server is
// extracted under: l, but for the two that bound an upload's encoding
// rather than what lands on disk. The packed size may reach what a
// checkout within MaxTotalBytes and MaxEntries packs to, and the ratio is
// at least 16:1, which no honest blob reaches (OpenBlob packs with
// Huffman coding only, at most 8:1); a blob made to expand more is
// refused like any archive.
func (l Limits) forFetched() Limits {
	l = l.withDefaults()
	l.MaxArchiveBytes = max(l.MaxArchiveBytes, l.MaxTotalBytes+int64(l.MaxEntries)*entryOverhead+1<<20)
	l.MaxRatio = max(l.MaxRatio, 16)
	return l
}

// OpenBlob serves a checkout of this server to another one (raftstore's
// BlobSource): name is BlobName(app, checkout). The checkout is packed
// into a gzipped tar (regular files with their modes, directories and
// symbolic links; nothing else) in an unlinked temporary file, which is
// gone once the reader is closed. A checkout that is not here, or a name
// this package does not serve, is an error wrapping fs.ErrNotExist.
func (s *Service) OpenBlob(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	appID, id, ok := parseBlobName(name)
	if !ok {
		return nil, 0, fmt.Errorf("blob %q: %w", name, fs.ErrNotExist)
	}
	dir, err := s.sourceDir(appID)
	if err != nil {
		return nil, 0, fmt.Errorf("blob %s: %w", name, fs.ErrNotExist)
	}
	s.trees.RLock()
	defer s.trees.RUnlock()
	dest := filepath.Join(dir, id)
	if !complete(dest) {
		return nil, 0, fmt.Errorf("checkout %s of app %s: %w", id, appID, fs.ErrNotExist)
	}
	f, err := s.scratch(".blob-")
	if err != nil {
		return nil, 0, fmt.Errorf("pack checkout %s: %w", id, err)
	}
	if err := pack(ctx, dest, f); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("pack checkout %s: %w", id, err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("pack checkout %s: %w", id, err)
	}
	return f, size, nil
}

// scratch creates a temporary file under <WorkDir>/apps and unlinks it at
// once: it is gone however this ends, a crash included.
func (s *Service) scratch(prefix string) (*os.File, error) {
	dir := filepath.Join(s.d.WorkDir, "apps")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// complete says whether a checkout is whole at dest: its directory (put
// in place by one rename) and its .json (written after it).
func complete(dest string) bool {
	fi, err := os.Lstat(dest)
	if err != nil || !fi.IsDir() {
		return false
	}
	fi, err = os.Lstat(dest + ".json")
	return err == nil && fi.Mode().IsRegular()
}

// pack writes the tree at dir as a gzipped tar to w, read through an
// os.Root so that nothing outside dir is ever read.
func pack(ctx context.Context, dir string, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	zw, err := gzip.NewWriterLevel(w, gzip.HuffmanOnly)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: p, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}
		switch typ := fi.Mode().Type(); {
		case typ == fs.ModeSymlink:
			if h.Linkname, err = root.Readlink(p); err != nil {
				return err
			}
			h.Typeflag = tar.TypeSymlink
		case typ == fs.ModeDir:
			h.Typeflag, h.Name = tar.TypeDir, p+"/"
		case typ.IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		default:
			return nil // a checkout holds nothing else
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, h.Size)
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

// Ensure returns the app's checkout that its record names
// (Source.CheckoutID), making it this server's current one first when it
// is not: a checkout here already only needs the pointer swapped; one that
// is not is fetched from the other servers (Deps.Peers) into a temporary
// file, holding no lock (a server never waits for another while it holds
// an app's lock, so two fetching from each other cannot deadlock), and
// extracted by Extract as an upload is, with the same refusals and this
// server's limits (forFetched), under the app's lock and only if the
// record still names it: a newer checkout (an upload meanwhile) is never
// replaced by an older one. Concurrent calls for one checkout fetch it
// once. A record without a checkout ID (made before checkouts were named)
// means whatever is current here. Installing a fetched checkout does not
// call OnCheckout: detection ran where it was made.
//
// When no server has it, a repository source is cloned again at its
// recorded commit; otherwise, and when that clone fails, the answer is
// NOT_FOUND with a remedy. Servers that could not answer are
// ADAPTER_UNAVAILABLE; a blob the extractor refuses is ADAPTER_FAILED.
func (s *Service) Ensure(ctx context.Context, appID string) (Checkout, error) {
	dir, err := s.sourceDir(appID)
	if err != nil {
		return Checkout{}, err
	}
	for round := 0; ; round++ {
		src, err := s.recorded(appID)
		if err != nil {
			return Checkout{}, err
		}
		if src.CheckoutID == "" {
			return s.Current(appID)
		}
		if currentID(dir) == src.CheckoutID {
			c, err := s.Current(appID)
			if err != nil || c.ID == src.CheckoutID {
				return c, err
			}
		}
		if round == maxEnsureRounds {
			return Checkout{}, errcode.New(errcode.StateInvalid, "the source of app %s kept changing while this server fetched it", appID).
				WithRemedy("retry")
		}
		if err := s.obtainOnce(ctx, appID, dir, src, true); err != nil {
			return Checkout{}, err
		}
	}
}

// recorded returns the app's recorded source; the zero Source when it has
// none. A checkout ID that is not one is an error.
func (s *Service) recorded(appID string) (apps.Source, error) {
	a, err := s.d.Apps.Get(appID)
	if err != nil {
		return apps.Source{}, err
	}
	if a.Source == nil {
		return apps.Source{}, nil
	}
	if id := a.Source.CheckoutID; id != "" && !ids.Valid(checkoutPrefix, id) {
		return apps.Source{}, fmt.Errorf("app %s: the record names %q, which is not a checkout ID", appID, shorten(id))
	}
	return *a.Source, nil
}

// currentID is the checkout the app's current pointer names here; "" for
// none.
func currentID(dir string) string {
	id, err := os.Readlink(filepath.Join(dir, "current"))
	if err != nil {
		return ""
	}
	return filepath.Base(id)
}

// obtainOnce runs obtain unless an Ensure (or CheckoutOf) of the same
// checkout runs already; then it waits for that one to end, and the
// caller looks again. makeCurrent makes it the app's current checkout
// (Ensure), which it must then be the record's.
func (s *Service) obtainOnce(ctx context.Context, appID, dir string, src apps.Source, makeCurrent bool) error {
	key := BlobName(appID, src.CheckoutID)
	s.mu.Lock()
	if ch, running := s.fetching[key]; running {
		s.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("wait for the app's checkout being fetched: %w", ctx.Err())
		}
	}
	ch := make(chan struct{})
	s.fetching[key] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.fetching, key)
		s.mu.Unlock()
		close(ch)
	}()
	return s.obtain(ctx, appID, dir, src, makeCurrent)
}

// obtain makes the checkout src names present on this server, and its
// current one with makeCurrent: from here, from a peer, or cloned again.
func (s *Service) obtain(ctx context.Context, appID, dir string, src apps.Source, makeCurrent bool) error {
	id := src.CheckoutID
	if err := s.install(ctx, appID, dir, src, makeCurrent, nil); !errors.Is(err, errAbsent) {
		return err
	}
	f, err := s.fetch(ctx, BlobName(appID, id))
	switch {
	case err == nil:
		defer f.Close()
		return s.install(ctx, appID, dir, src, makeCurrent, func(dest string, _ apps.Source) error {
			_, err := Extract(ctx, f, TarGz, dest, s.d.Limits.forFetched())
			if _, coded := errcode.As(err); coded && ctx.Err() == nil {
				return errcode.Wrap(err, errcode.AdapterFailed, "the copy of app %s's source (checkout %s) another svc server sent was refused: %s",
					appID, id, errcode.MessageOf(err)).WithRemedy("upload the source again with POST /api/v1/apps/%s/source", appID)
			}
			return err
		})
	case ctx.Err() != nil:
		return fmt.Errorf("fetch checkout %s: %w", id, ctx.Err())
	case makeCurrent && s.superseded(appID, id):
		return nil // the record moved on (its server may have pruned this one): the caller looks again
	case errors.Is(err, errTooLarge):
		return errcode.Wrap(err, errcode.AdapterFailed, "the copy of app %s's source (checkout %s) another svc server sent is too large", appID, id).
			WithRemedy("upload the source again with POST /api/v1/apps/%s/source", appID)
	case errors.Is(err, fs.ErrNotExist):
		return s.reclone(ctx, appID, dir, src, makeCurrent)
	}
	return errcode.Wrap(err, errcode.AdapterUnavailable, "app %s's source (checkout %s) is not on this svc server and the others could not be asked for it", appID, id).
		WithRemedy("retry once the cluster's servers answer")
}

// superseded says whether the app's record names another checkout than
// id now.
func (s *Service) superseded(appID, id string) bool {
	src, err := s.recorded(appID)
	return err == nil && src.CheckoutID != id
}

// fetch copies the named blob from the peers into an unlinked temporary
// file, rewound. Without peers the error wraps fs.ErrNotExist.
func (s *Service) fetch(ctx context.Context, name string) (*os.File, error) {
	if s.d.Peers == nil {
		return nil, fmt.Errorf("blob %s: no other server to ask: %w", name, fs.ErrNotExist)
	}
	f, err := s.scratch(".fetch-")
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", name, err)
	}
	w := &cappedWriter{w: f, left: s.d.Limits.forFetched().MaxArchiveBytes}
	if _, err := s.d.Peers.FetchBlob(ctx, name, w); err != nil {
		f.Close()
		if w.over {
			return nil, fmt.Errorf("fetch %s: %w", name, errTooLarge)
		}
		return nil, fmt.Errorf("fetch %s: %w", name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("fetch %s: %w", name, err)
	}
	return f, nil
}

// cappedWriter fails a write past its capacity.
type cappedWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.over = true
		return 0, errTooLarge
	}
	n, err := c.w.Write(p)
	c.left -= int64(n)
	return n, err
}

// reclone is obtain's last resort, when no server has the checkout: a
// repository source is cloned again at its recorded commit; anything else
// is NOT_FOUND.
func (s *Service) reclone(ctx context.Context, appID, dir string, src apps.Source, makeCurrent bool) error {
	gone := func(cause error, format string, args ...any) *errcode.Error {
		return errcode.Wrap(cause, errcode.NotFound, "app %s's source (checkout %s) is on no svc server"+format, append([]any{appID, src.CheckoutID}, args...)...).
			WithRemedy("upload the source again with POST /api/v1/apps/%s/source", appID)
	}
	if src.Kind != KindRepository || !isCommit(src.Commit) {
		return gone(nil, "")
	}
	return s.install(ctx, appID, dir, src, makeCurrent, func(dest string, src apps.Source) error {
		allowlist := s.d.Policy.Current().SourceAllowlist
		err := CheckAllowed(src.Repository, allowlist)
		if err == nil {
			_, err = s.d.Git.Clone(ctx, src.Repository, src.Commit, src.Subdir, dest, s.d.Limits, allowlist)
		}
		if _, coded := errcode.As(err); coded {
			return gone(err, ", and cloning %s again at %s failed: %s", Redact(src.Repository), src.Commit, errcode.MessageOf(err))
		}
		if err != nil {
			return fmt.Errorf("clone app %s's repository again: %w", appID, err)
		}
		return nil
	})
}

// install puts the checkout src names in place, under the app's lock. A
// checkout not here is made by fill into its directory, given the source;
// without fill, that is errAbsent. With makeCurrent it becomes the app's
// current one, only while the record names it (else install does nothing:
// the caller looks again), and is made from the record.
func (s *Service) install(ctx context.Context, appID, dir string, src apps.Source, makeCurrent bool, fill func(dest string, src apps.Source) error) error {
	unlock, err := s.lock(ctx, appID)
	if err != nil {
		return err
	}
	defer unlock()
	id := src.CheckoutID
	if makeCurrent {
		if src, err = s.recorded(appID); err != nil {
			return err
		}
		if src.CheckoutID != id {
			return nil // a newer source was recorded meanwhile
		}
	}
	dest := filepath.Join(dir, id)
	if !complete(dest) {
		if fill == nil {
			return errAbsent
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("install checkout %s: %w", id, err)
		}
		_ = os.RemoveAll(dest) // the leftovers of an interrupted install
		_ = os.Remove(dest + ".json")
		if err := s.fillCheckout(dest, src, fill); err != nil {
			return err
		}
	}
	if !makeCurrent {
		return nil
	}
	if err := swapCurrent(dir, id); err != nil {
		return fmt.Errorf("install checkout %s: %w", id, err)
	}
	s.prune(appID, dir, id)
	s.d.Logger.Info("installed the app's recorded checkout", "app_id", appID, "checkout_id", id, "commit", src.Commit)
	return nil
}

// fillCheckout makes a checkout at dest with fill and writes its .json;
// on failure nothing is left.
func (s *Service) fillCheckout(dest string, src apps.Source, fill func(dest string, src apps.Source) error) error {
	if err := fill(dest, src); err != nil {
		_ = os.RemoveAll(dest)
		return err
	}
	created, ok := ids.Time(src.CheckoutID)
	if !ok {
		created = s.d.Now()
	}
	c := Checkout{ID: src.CheckoutID, Dir: dest, Commit: src.Commit, Kind: src.Kind, Source: src, CreatedAt: created}
	meta, err := json.Marshal(c)
	if err == nil {
		err = writeFileAtomic(dest+".json", meta)
	}
	if err != nil {
		_ = os.RemoveAll(dest)
		return fmt.Errorf("install checkout %s: %w", src.CheckoutID, err)
	}
	return nil
}

// SyncCheckouts makes every app's recorded checkout current on this
// server (Ensure), for the apps whose record names a checkout this server
// lacks; the others are left as they are. A failure is logged and the
// loop goes on; it fails only when ctx ends, or without Deps.Store. It is
// meant to run on every server, on start and every little while.
func (s *Service) SyncCheckouts(ctx context.Context) error {
	if s.d.Store == nil {
		return errors.New("source: SyncCheckouts needs Deps.Store")
	}
	items, _ := apps.Apps.List(s.d.Store.Read(), raftstore.Query{})
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return err
		}
		a := it.Value
		if a.Source == nil || a.Source.CheckoutID == "" {
			continue
		}
		dir, err := s.sourceDir(a.ID)
		if err != nil || currentID(dir) == a.Source.CheckoutID {
			continue
		}
		if _, err := s.Ensure(ctx, a.ID); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.d.Logger.Warn("could not fetch the app's checkout from the other servers", "app_id", a.ID, "checkout_id", a.Source.CheckoutID, "err", err)
		}
	}
	return nil
}
