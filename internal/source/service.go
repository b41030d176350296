package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/raftstore"
)

// Source kinds, as apps.Source records them.
const (
	KindRepository = "repository"
	KindArchive    = "archive"
)

// checkoutPrefix names checkouts: chk_<ULID>, sorting by creation.
const checkoutPrefix ids.Prefix = "chk"

// Checkout is one fetched copy of an app's source.
type Checkout struct {
	ID string `json:"id"`
	// Dir is the root of the checkout: the archive's contents, or the
	// repository's tree without .git.
	Dir string `json:"dir"`
	// Commit is the commit checked out, or sha256:<hex> of the archive.
	Commit string `json:"commit"`
	// Kind is repository or archive.
	Kind string `json:"kind"`
	// Source is the source recorded on the app.
	Source    apps.Source `json:"source"`
	CreatedAt time.Time   `json:"created_at"`
}

// AppDir is where the app lives in the checkout: Dir, or its subdir.
func (c Checkout) AppDir() string { return filepath.Join(c.Dir, filepath.FromSlash(c.Source.Subdir)) }

// appRecords is what the service needs of the apps service.
type appRecords interface {
	Get(id string) (apps.App, error)
	SetSource(ctx context.Context, id string, src apps.Source) error
}

// policyReader gives the current host policy.
type policyReader interface {
	Current() policy.Policy
}

// storeReader reads the replicated store, for the list of every app.
type storeReader interface {
	Read() *raftstore.Reader
}

var (
	_ appRecords   = (*apps.Service)(nil)
	_ policyReader = (*policy.Service)(nil)
	_ storeReader  = (*raftstore.Store)(nil)
)

// Deps configure the service.
type Deps struct {
	// WorkDir is the work dir; checkouts live under <WorkDir>/apps.
	WorkDir string
	Apps    appRecords
	Policy  policyReader
	Limits  Limits
	// Git clones repositories; AllowFile stays off in production.
	Git    Fetcher
	Now    func() time.Time
	Logger *slog.Logger
	// OnCheckout, if set, is called after every successful checkout, once
	// the app's source is recorded and the current pointer swapped; it
	// must return quickly (detection starts its own work).
	OnCheckout func(ctx context.Context, appID string, c Checkout)
	// OnFetchFailed, if set, is told when a background fetch fails, with
	// a message from which credentials are removed.
	OnFetchFailed func(ctx context.Context, appID, message string)
	// Peers fetch the checkouts this server lacks from the other servers
	// (Ensure); nil for a single server, which then has no one to ask.
	Peers Peers
	// Store lists every app for SyncCheckouts; without it SyncCheckouts
	// fails.
	Store storeReader
	// Keep names an app's checkouts to keep besides its current one: the
	// sources of the releases whose builds are kept (the scheduler's
	// KeptCheckouts), so that a rollback can build from its own source.
	// It is asked whenever older checkouts are removed (a new checkout,
	// Sweep); nil keeps only the current one.
	Keep func(appID string) []string
}

// Service keeps apps' checkouts: <WorkDir>/apps/<app id>/source/<checkout
// id>, a current link naming the newest, and <checkout id>.json beside it.
// One checkout of an app runs at a time; a new one that succeeds replaces
// the older ones but those Deps.Keep names (releases' sources, which
// CheckoutOf gives). The app's record names its checkout (Source.CheckoutID),
// which every server of a cluster keeps: the one that made it serves it
// (OpenBlob) and the others fetch it (Ensure, SyncCheckouts).
type Service struct {
	d       Deps
	mu      sync.Mutex
	busy    map[string]chan struct{} // per app: held while a checkout runs
	bg      sync.WaitGroup
	ctx     context.Context // ends at Close: background fetches stop
	stop    context.CancelFunc
	closeMu sync.Mutex
	closed  bool
	// trees is held for reading while a checkout is packed for another
	// server (OpenBlob), and for writing while checkouts are deleted, so
	// that a checkout is never packed half deleted.
	trees sync.RWMutex
	// fetching holds, per blob name, a channel closed when the running
	// Ensure of that checkout ends (guarded by mu).
	fetching map[string]chan struct{}
}

// New returns the service.
func New(d Deps) (*Service, error) {
	if d.WorkDir == "" || d.Apps == nil || d.Policy == nil {
		return nil, errors.New("source: work dir, apps and policy are required")
	}
	if d.Now == nil {
		d.Now = func() time.Time { return time.Now().UTC() }
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	d.Limits = d.Limits.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	return &Service{d: d, busy: map[string]chan struct{}{}, ctx: ctx, stop: stop, fetching: map[string]chan struct{}{}}, nil
}

// Limits returns the limits in force.
func (s *Service) Limits() Limits { return s.d.Limits }

// Close stops background fetches and waits for them.
func (s *Service) Close() error {
	s.closeMu.Lock()
	s.closed = true
	s.closeMu.Unlock()
	s.stop()
	s.bg.Wait()
	return nil
}

var appIDRE = regexp.MustCompile(`^app_[0-9A-HJKMNP-TV-Z]{26}$`)

// sourceDir is <work>/apps/<app id>/source, for an ID that is safe in a path.
func (s *Service) sourceDir(appID string) (string, error) {
	if !appIDRE.MatchString(appID) {
		return "", errcode.New(errcode.NotFound, "no app %s", appID)
	}
	return filepath.Join(s.d.WorkDir, "apps", appID, "source"), nil
}

// lock holds the app's checkout slot until unlock, or fails with ctx.
func (s *Service) lock(ctx context.Context, appID string) (unlock func(), err error) {
	for {
		s.mu.Lock()
		ch, held := s.busy[appID]
		if !held {
			s.busy[appID] = make(chan struct{})
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				close(s.busy[appID])
				delete(s.busy, appID)
				s.mu.Unlock()
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the app's checkout in progress: %w", ctx.Err())
		}
	}
}

// FromArchive extracts an uploaded archive as the app's new checkout and
// records the app's source as kind archive, commit sha256:<hex> of the
// archive. contentType names the format (KindOf); a wrong one is a 415.
// Host policy's source_allowlist must allow archives (CheckArchiveAllowed).
func (s *Service) FromArchive(ctx context.Context, appID, contentType string, body io.Reader) (Checkout, error) {
	kind, err := KindOf(contentType)
	if err != nil {
		return Checkout{}, err
	}
	if err := CheckArchiveAllowed(s.d.Policy.Current().SourceAllowlist); err != nil {
		return Checkout{}, err
	}
	return s.checkout(ctx, appID, KindArchive, func(dest string) (apps.Source, error) {
		st, err := Extract(ctx, body, kind, dest, s.d.Limits)
		if err != nil {
			return apps.Source{}, err
		}
		return apps.Source{Kind: KindArchive, Commit: "sha256:" + st.SHA256}, nil
	})
}

// FromRepository clones the app's repository as its new checkout and
// records the app's source with the commit checked out. The repository
// must pass host policy's source_allowlist.
func (s *Service) FromRepository(ctx context.Context, appID string, src apps.Source) (Checkout, error) {
	if src.Kind != "" && src.Kind != KindRepository {
		return Checkout{}, errcode.Invalid("source.kind", "source.kind must be repository to fetch a repository")
	}
	if _, err := parseRepository(src.Repository, s.d.Git.AllowFile); err != nil {
		return Checkout{}, err
	}
	if err := CheckAllowed(src.Repository, s.d.Policy.Current().SourceAllowlist); err != nil {
		return Checkout{}, err
	}
	if err := checkRef(src.Ref); err != nil {
		return Checkout{}, err
	}
	subdir, err := cleanSubdir(src.Subdir)
	if err != nil {
		return Checkout{}, err
	}
	return s.checkout(ctx, appID, KindRepository, func(dest string) (apps.Source, error) {
		commit, err := s.d.Git.Clone(ctx, src.Repository, src.Ref, subdir, dest, s.d.Limits, s.d.Policy.Current().SourceAllowlist)
		if err != nil {
			return apps.Source{}, err
		}
		return apps.Source{Kind: KindRepository, Repository: withoutCredentials(src.Repository), Ref: src.Ref, Commit: commit, Subdir: subdir}, nil
	})
}

// Check says whether a repository source can be fetched, as far as can
// be told without fetching it: the address, host policy's allowlist and
// an address as host that svc never fetches from
// (POLICY_SOURCE_NOT_ALLOWED), the ref and the subdir.
func (s *Service) Check(src apps.Source) error {
	rem, err := parseRepository(src.Repository, s.d.Git.AllowFile)
	if err != nil {
		return err
	}
	allowlist := s.d.Policy.Current().SourceAllowlist
	if err := CheckAllowed(src.Repository, allowlist); err != nil {
		return err
	}
	if err := checkLiteralHost(rem, s.d.Git.policy(allowlist)); err != nil {
		return err
	}
	if err := checkRef(src.Ref); err != nil {
		return err
	}
	_, err = cleanSubdir(src.Subdir)
	return err
}

// Fetch starts FromRepository in the background, as the caller (its
// context's actor is the audit entry's), and returns at once after
// checking what can be checked now: the address, the allowlist, the ref
// and the subdir. Failures later are logged. Close stops it.
func (s *Service) Fetch(ctx context.Context, appID string, src apps.Source) error {
	if _, err := s.sourceDir(appID); err != nil {
		return err
	}
	if _, err := s.d.Apps.Get(appID); err != nil {
		return err
	}
	if err := s.Check(src); err != nil {
		return err
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return errors.New("source: the service is closed")
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(s.ctx, cancel)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer stop()
		defer cancel()
		c, err := s.FromRepository(bctx, appID, src)
		if err != nil {
			reqID := actor.From(bctx).RequestID
			s.d.Logger.Warn("fetching the app's repository failed", "app_id", appID, "repository", Redact(src.Repository),
				"request_id", reqID, "err", redactText(err.Error()))
			if s.d.OnFetchFailed != nil {
				s.d.OnFetchFailed(bctx, appID, publicMessage(err, reqID))
			}
			return
		}
		s.d.Logger.Info("fetched the app's repository", "app_id", appID, "checkout_id", c.ID, "commit", c.Commit)
	}()
	return nil
}

// publicMessage is what the app's record may say about a failed fetch: a
// coded error's code and message (which name no server path nor anything
// the server learned: see Clone), credentials redacted; anything else only
// that it failed, and where the log has it.
func publicMessage(err error, requestID string) string {
	if _, ok := errcode.As(err); ok {
		return redactText(errcode.MessageOf(err))
	}
	return fmt.Sprintf("%s: an unexpected failure on the server; its log has the cause (request %s)", errcode.Internal, requestID)
}

// checkout runs fetch into a fresh checkout directory of the app, records
// the source, swaps the current pointer and removes older checkouts.
func (s *Service) checkout(ctx context.Context, appID, kind string, fetch func(dest string) (apps.Source, error)) (Checkout, error) {
	dir, err := s.sourceDir(appID)
	if err != nil {
		return Checkout{}, err
	}
	if _, err := s.d.Apps.Get(appID); err != nil {
		return Checkout{}, err
	}
	unlock, err := s.lock(ctx, appID)
	if err != nil {
		return Checkout{}, err
	}
	defer unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Checkout{}, fmt.Errorf("checkout: %w", err)
	}
	now := s.d.Now()
	c := Checkout{ID: ids.NewAt(checkoutPrefix, now), Kind: kind, CreatedAt: now}
	c.Dir = filepath.Join(dir, c.ID)
	src, err := fetch(c.Dir)
	if err != nil {
		return Checkout{}, err
	}
	src.CheckoutID = c.ID // the record names the checkout every server keeps
	c.Source, c.Commit = src, src.Commit
	keep := false
	defer func() {
		if !keep {
			s.trees.Lock()
			defer s.trees.Unlock()
			_ = os.RemoveAll(c.Dir)
			_ = os.Remove(c.Dir + ".json")
		}
	}()
	meta, err := json.Marshal(c)
	if err != nil {
		return Checkout{}, fmt.Errorf("checkout: %w", err)
	}
	if err := writeFileAtomic(c.Dir+".json", meta); err != nil {
		return Checkout{}, fmt.Errorf("checkout: %w", err)
	}
	if err := s.d.Apps.SetSource(ctx, appID, src); err != nil {
		return Checkout{}, err
	}
	keep = true
	if err := swapCurrent(dir, c.ID); err != nil {
		return Checkout{}, fmt.Errorf("checkout: %w", err)
	}
	s.prune(appID, dir, c.ID)
	if s.d.OnCheckout != nil {
		s.d.OnCheckout(ctx, appID, c)
	}
	return c, nil
}

// Current returns the app's current checkout; NOT_FOUND when it has none.
func (s *Service) Current(appID string) (Checkout, error) {
	dir, err := s.sourceDir(appID)
	if err != nil {
		return Checkout{}, err
	}
	id, err := os.Readlink(filepath.Join(dir, "current"))
	if errors.Is(err, fs.ErrNotExist) {
		return Checkout{}, errcode.New(errcode.NotFound, "app %s has no source checked out", appID)
	}
	if err != nil {
		return Checkout{}, fmt.Errorf("current checkout: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.Base(id)+".json"))
	if err != nil {
		return Checkout{}, fmt.Errorf("current checkout: %w", err)
	}
	var c Checkout
	if err := json.Unmarshal(b, &c); err != nil {
		return Checkout{}, fmt.Errorf("current checkout: %w", err)
	}
	return c, nil
}

// Remove deletes every checkout of an app (for an app that was deleted).
func (s *Service) Remove(ctx context.Context, appID string) error {
	dir, err := s.sourceDir(appID)
	if err != nil {
		return err
	}
	unlock, err := s.lock(ctx, appID)
	if err != nil {
		return err
	}
	defer unlock()
	s.trees.Lock()
	defer s.trees.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove checkouts: %w", err)
	}
	_ = os.Remove(filepath.Dir(dir)) // the app's area, if nothing else is left in it
	return nil
}

// Sweep removes the checkouts of apps that no longer exist, and those of
// live apps that are neither current nor kept (Deps.Keep) any more. The
// work dir is this node's own, so every node sweeps it (not only the
// leader). Problems are logged; it fails only when ctx ends.
func (s *Service) Sweep(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(s.d.WorkDir, "apps"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.d.Logger.Warn("could not list apps' checkouts", "err", err)
		}
		return nil
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := e.Name()
		if !appIDRE.MatchString(id) {
			continue
		}
		if _, err := s.d.Apps.Get(id); !errcode.Has(err, errcode.NotFound) {
			if err == nil {
				s.tidy(ctx, id)
			}
			continue
		}
		if err := s.Remove(ctx, id); err != nil {
			s.d.Logger.Warn("could not remove a deleted app's checkouts", "app_id", id, "err", err)
		}
	}
	return nil
}

// swapCurrent points dir/current at id, atomically: a new link renamed
// over the old one.
func swapCurrent(dir, id string) error {
	tmp := filepath.Join(dir, ".current-"+id)
	_ = os.Remove(tmp)
	if err := os.Symlink(id, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "current")); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// tidy prunes a live app's checkouts (prune) under its lock, keeping the
// current one (if any: a server may hold only releases' checkouts it
// fetched, CheckoutOf).
func (s *Service) tidy(ctx context.Context, appID string) {
	dir, err := s.sourceDir(appID)
	if err != nil {
		return
	}
	unlock, err := s.lock(ctx, appID)
	if err != nil {
		return
	}
	defer unlock()
	if _, err := os.Stat(dir); err == nil {
		s.prune(appID, dir, currentID(dir))
	}
}

// prune removes everything in dir but the current checkout, the kept ones
// (Deps.Keep), their metadata and the pointer: older checkouts, and
// leftovers of interrupted ones. It runs under the app's lock, so nothing
// in dir is in progress.
func (s *Service) prune(appID, dir, current string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.d.Logger.Warn("could not list old checkouts", "dir", dir, "err", err)
		return
	}
	keep := map[string]bool{current: true, current + ".json": true, "current": true}
	if s.d.Keep != nil {
		for _, id := range s.d.Keep(appID) {
			if ids.Valid(checkoutPrefix, id) {
				keep[id], keep[id+".json"] = true, true
			}
		}
	}
	s.trees.Lock()
	defer s.trees.Unlock()
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			s.d.Logger.Warn("could not remove an old checkout", "path", filepath.Join(dir, e.Name()), "err", err)
		}
	}
}

func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".meta-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
