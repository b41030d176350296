package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/svchost/svc/backupstores/local"
	"github.com/svchost/svc/backupstores/s3"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/backups"
	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/schema"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
)

// Environment variables that carry the S3 storage's keys to svc restore
// (never flags: a command line is visible to every user of the machine).
const (
	envRestoreAccessKey = "SVC_RESTORE_S3_ACCESS_KEY_ID"
	envRestoreSecretKey = "SVC_RESTORE_S3_SECRET_ACCESS_KEY"
)

func newRestoreCmd() *cobra.Command {
	var o restoreOptions
	cmd := &cobra.Command{
		Use:   "restore --bundle ID --identity FILE",
		Short: "Restore a disaster-recovery bundle into a new installation (offline; run before the first svc serve)",
		Long: `Restore a disaster-recovery bundle (POST /api/v1/backups without app_id) into
the work directory of a new installation: the store as it was saved (the
same digest), the keyring, the apps' sources and builds, and every volume.

It reads the bundle from the backup storage it was written to: a local
directory (--storage local --setting path=DIR, the old server's
<work dir>/backups or a copy of it) or S3-compatible storage (--storage s3
--setting endpoint=… --setting bucket=… [--setting prefix=…], the keys in
` + envRestoreAccessKey + ` and ` + envRestoreSecretKey + `). It decrypts
with the age identity in --identity: the old installation's backup key
(<work dir>/keyring/backup-key), which also authenticates the bundle (a
bundle it does not authenticate is refused), or a key of one of
backups.recipients with --trust-unauthenticated (that key decrypts, but
cannot tell a bundle the installation wrote from one made up by whoever
could write to the storage).

The whole bundle is verified before anything is written. The work
directory comes from the same configuration svc serve reads (--config,
SVC_* variables) and must not hold a store. Afterwards, start the server
with that configuration: svc serve. See docs/disaster-recovery.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.bundle == "" || o.identity == "" {
				return &exitError{code: 2, err: errors.New("--bundle (a backup ID, or latest) and --identity (an age identity file) are both required (see svc restore --help)")}
			}
			cfg, err := config.Load(config.LoadArgs{Env: os.Environ(), File: o.config})
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("configuration refused; nothing was restored:\n%w", err)}
			}
			return restoreBundle(cmd.Context(), cfg, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.bundle, "bundle", "", `the bundle's backup ID (bkp_…), or "latest" for the newest bundle in the storage`)
	f.StringVar(&o.identity, "identity", "", "file of the age identity the bundle is decrypted with (AGE-SECRET-KEY-1…)")
	f.StringVar(&o.storage, "storage", "local", "kind of the backup storage: local or s3")
	f.StringArrayVar(&o.settings, "setting", nil, "a setting of the storage as name=value (repeatable): path for local; endpoint, bucket, prefix, region, ca_file, insecure_http for s3")
	f.StringVar(&o.config, "config", "", "YAML configuration file of the new installation (as for svc serve)")
	f.BoolVar(&o.trustUnauthenticated, "trust-unauthenticated", false, "restore a bundle decrypted with a backups.recipients key, which cannot authenticate it (only from storage no one else can write)")
	return cmd
}

type restoreOptions struct {
	bundle, identity, storage, config string
	settings                          []string
	trustUnauthenticated              bool
}

// restoreBundle restores a bundle into cfg's work directory: verified
// first, then every part restored, the store installed and opened to check
// its digest, and the volumes handed to their apps' users.
func restoreBundle(ctx context.Context, cfg *config.Config, o restoreOptions, out io.Writer) (err error) {
	work := cfg.Server.WorkDir
	ids, err := readIdentities(o.identity)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	st, err := openRestoreStorage(ctx, o)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if c, ok := st.(io.Closer); ok {
		defer c.Close()
	}
	repo, b := bundleReader(st, ids, o.trustUnauthenticated, restoreJournal(work))
	id, m, err := b.find(ctx, st, o.bundle)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "bundle %s, taken %s: %d parts, %d bytes\n", m.BackupID, m.CreatedAt.Format("2006-01-02 15:04:05 MST"), len(m.Parts), m.PlainBytes)
	if b.with == nil {
		fmt.Fprintln(out, "authenticated: written with the installation's backup key")
	} else {
		fmt.Fprintln(out, "NOT authenticated (--trust-unauthenticated): decrypted with a recipient key, which cannot tell a bundle the installation wrote from one made up by whoever could write to the storage")
	}
	if _, problems := repo.Verify(ctx, id, b.with...); len(problems) > 0 {
		return fmt.Errorf("the bundle does not verify; nothing was restored: %w (and %d more problems)", problems[0], len(problems)-1)
	}
	fmt.Fprintln(out, "verified: every chunk is whole and decrypts")

	staging := filepath.Join(work, "bundle-"+strings.ToLower(id))
	targets := map[string]string{}
	dirs := bundleDirs(work)
	var vols []string
	for _, p := range m.Parts {
		switch vid, isVol := backups.VolumeOfPart(p.Name); {
		case p.Name == backups.PartStore:
			targets[p.Name] = filepath.Join(staging, "store")
		case isVol:
			vols = append(vols, vid)
			targets[p.Name] = volumeDataDir(work, vid)
		case dirs[p.Name] != "":
			targets[p.Name] = dirs[p.Name]
		default:
			return fmt.Errorf("the bundle holds a part %q that this build does not know; restore it with the svc release that took it", p.Name)
		}
	}
	if targets[backups.PartStore] == "" {
		return fmt.Errorf("backup %s is not a disaster-recovery bundle (it holds no store); restore an app's backup with svc backups restore", id)
	}
	if err := mustBeNew(cfg.RaftDir(), targets); err != nil {
		return &exitError{code: 1, err: err}
	}
	defer func() {
		_ = os.RemoveAll(staging)
		if err != nil {
			// Nothing of a failed restore stays: the work dir was new.
			for _, t := range targets {
				_ = os.RemoveAll(t)
			}
			_ = os.RemoveAll(cfg.RaftDir())
		}
	}()
	for _, t := range targets {
		if err := os.MkdirAll(filepath.Dir(t), 0o711); err != nil {
			return err
		}
	}
	if err := repo.Restore(ctx, id, targets, b.with...); err != nil {
		return fmt.Errorf("restore the bundle's files: %w", err)
	}
	saved, err := raftstore.Install(raftstore.InstallConfig{Dir: cfg.RaftDir(), NodeID: cfg.Cluster.NodeID, RaftAddr: cfg.Cluster.RaftAddr,
		Tables: schema.Tables()}, targets[backups.PartStore])
	if err != nil {
		return err
	}
	attached, err := checkRestored(ctx, cfg, saved, id, m.PlainBytes, out)
	if err != nil {
		return err
	}
	if err := handOver(ctx, cfg, attached); err != nil {
		return err
	}
	plural := "s"
	if len(vols) == 1 {
		plural = ""
	}
	fmt.Fprintf(out, "restored into %s: the store, %s and %d volume%s\n", work, strings.Join(slices.Sorted(maps.Keys(dirs)), ", "), len(vols), plural)
	fmt.Fprintln(out, "next: start the server with the same configuration (svc serve); it runs the apps the bundle recorded")
	return nil
}

// volumeDataDir is where the process runtime keeps a volume's data
// (process.Runtime.VolumePath, under the work dir's runtime directory).
func volumeDataDir(work, volumeID string) string {
	return filepath.Join(work, "runtime", "volumes", volumeID, "data")
}

// mustBeNew refuses a work directory that holds a store, or data where a
// part would go: a bundle restores a new installation, never over one.
func mustBeNew(raftDir string, targets map[string]string) error {
	for _, d := range append([]string{raftDir}, slices.Collect(maps.Values(targets))...) {
		es, err := os.ReadDir(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case len(es) > 0:
			return fmt.Errorf("%s is not empty: a bundle is restored only into a new installation (a work directory without a store); nothing was restored", d)
		}
	}
	return nil
}

// checkRestored opens the installed store as a single node and checks
// that its digest is the bundle's; then it completes the bundle's own
// record (saved while it was running) and returns the volumes of live
// apps (volume ID → app ID).
func checkRestored(ctx context.Context, cfg *config.Config, saved raftstore.Saved, id string, plainBytes int64, out io.Writer) (map[string]string, error) {
	store, err := raftstore.Open(raftstore.Config{NodeID: cfg.Cluster.NodeID, Dir: cfg.RaftDir(), RaftAddr: cfg.Cluster.RaftAddr,
		Secret: []byte(cfg.Cluster.Secret), Tables: schema.Tables()})
	if err != nil {
		return nil, fmt.Errorf("open the restored store: %w", err)
	}
	defer store.Close()
	digest, err := store.Digest()
	if err != nil {
		return nil, err
	}
	if digest != saved.Digest {
		return nil, fmt.Errorf("the restored store's digest is %s, not the bundle's %s; nothing was restored", digest, saved.Digest)
	}
	fmt.Fprintf(out, "store: index %d, digest %s (the bundle's)\n", saved.Applied, digest)
	attached := map[string]string{}
	items, _ := volumes.Volumes.List(store.Read(), raftstore.Query{})
	for _, it := range items {
		if v := it.Value; v.AppGoneAt == nil && v.DiscardAt == nil {
			attached[v.ID] = v.AppID
		}
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := store.ConsistentRead(wait); err != nil {
		return nil, fmt.Errorf("the restored store does not elect itself: %w", err)
	}
	if err := backups.RecordRestored(wait, store, id, saved, plainBytes, time.Now().UTC()); err != nil {
		return nil, fmt.Errorf("record the bundle in the restored store: %w", err)
	}
	return attached, nil
}

// handOver gives every live app's restored volumes to the app's user.
func handOver(ctx context.Context, cfg *config.Config, attached map[string]string) error {
	if len(attached) == 0 {
		return nil
	}
	procs, err := processRuntime(cfg)
	if err != nil {
		return fmt.Errorf("open the process runtime to hand volumes over: %w", err)
	}
	defer procs.Close()
	for _, vid := range slices.Sorted(maps.Keys(attached)) {
		if _, err := os.Stat(procs.VolumePath(vid)); err != nil {
			continue // not in the bundle
		}
		if err := procs.HandOver(ctx, attached[vid], vid); err != nil {
			return err
		}
	}
	return nil
}

// readIdentities reads an age identity file.
func readIdentities(file string) ([]age.Identity, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("--identity: %w", err)
	}
	defer f.Close()
	ids, err := age.ParseIdentities(f)
	if err != nil {
		return nil, fmt.Errorf("--identity %s holds no age identity: %w", file, err)
	}
	return ids, nil
}

// openRestoreStorage opens the backup storage the flags name, with the
// checks its adapter kind makes.
func openRestoreStorage(ctx context.Context, o restoreOptions) (backuprepo.Storage, error) {
	settings := map[string]string{}
	for _, s := range o.settings {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--setting %q: want name=value", s)
		}
		settings[k] = v
	}
	var kind adapters.Kind
	creds := map[string]string{}
	switch o.storage {
	case "local":
		kind = local.Kind("")
		if settings["path"] == "" {
			return nil, errors.New("--storage local needs --setting path=DIR: the directory the bundle was written to (the old server's <work dir>/backups, or a copy)")
		}
	case "s3":
		kind = s3.Kind()
		creds["access_key_id"], creds["secret_access_key"] = os.Getenv(envRestoreAccessKey), os.Getenv(envRestoreSecretKey)
		if creds["access_key_id"] == "" || creds["secret_access_key"] == "" {
			return nil, fmt.Errorf("--storage s3 needs the storage's keys in %s and %s", envRestoreAccessKey, envRestoreSecretKey)
		}
	default:
		return nil, fmt.Errorf("--storage %q: local or s3", o.storage)
	}
	if err := kind.Validate(settings, nil); err != nil {
		return nil, err
	}
	inst, err := kind.Open(ctx, adapters.Config{Settings: settings, Credentials: creds})
	if err != nil {
		return nil, err
	}
	st, ok := inst.(backuprepo.Storage)
	if !ok {
		return nil, fmt.Errorf("the %s adapter is not a backup storage", o.storage)
	}
	return st, nil
}

// bundleRead reads bundles' manifests: authenticated with the
// installation's backup key (with nil: the repository's own identity is
// that key), or, trusting them unauthenticated, decrypted with the
// identities given (with).
type bundleRead struct {
	repo *backuprepo.Repo
	ids  []age.Identity
	with []age.Identity
}

// bundleReader returns the repository to read bundles from and how. A
// single X25519 identity is taken for the installation's backup key, the
// key manifests are authenticated with; unless trustUnauthenticated, a
// manifest it decrypts but does not authenticate is refused.
func bundleReader(st backuprepo.Storage, ids []age.Identity, trustUnauthenticated bool, journal string) (*backuprepo.Repo, bundleRead) {
	var own *age.X25519Identity
	if len(ids) == 1 {
		own, _ = ids[0].(*age.X25519Identity)
	}
	if own == nil || trustUnauthenticated {
		// The repository's own key only names chunks it writes and
		// authenticates manifests; this one writes none and checks none.
		own, _ = age.GenerateX25519Identity()
		repo := backuprepo.New(st, backuprepo.Keys{Identity: own}, journal)
		with := ids
		if !trustUnauthenticated {
			with = nil // fails: the made-up key authenticates nothing
		}
		return repo, bundleRead{repo: repo, ids: ids, with: with}
	}
	repo := backuprepo.New(st, backuprepo.Keys{Identity: own}, journal)
	return repo, bundleRead{repo: repo, ids: ids}
}

// manifest reads a bundle's manifest, saying why one the key decrypts
// but does not authenticate is refused.
func (b bundleRead) manifest(ctx context.Context, id string) (backuprepo.Manifest, error) {
	m, err := b.repo.Manifest(ctx, id, b.with...)
	if b.with == nil && errcode.Has(err, errcode.BackupDecryptFailed) {
		if _, derr := b.repo.Manifest(ctx, id, b.ids...); derr == nil {
			return m, errcode.New(errcode.BackupDecryptFailed, "the key in --identity decrypts bundle %s but does not authenticate it: it is not the installation's backup key (keyring/backup-key), so the bundle could have been made up by whoever can write to the storage", id).
				WithRemedy("use the installation's backup key; or, for a backups.recipients key and storage only you can write, add --trust-unauthenticated")
		}
	}
	return m, err
}

// find reads the manifest of the bundle named, or of the newest one in
// the storage for "latest".
func (b bundleRead) find(ctx context.Context, st backuprepo.Storage, name string) (string, backuprepo.Manifest, error) {
	if name != "latest" {
		m, err := b.manifest(ctx, name)
		return name, m, err
	}
	objs, err := st.List(ctx, "backups/")
	if err != nil {
		return "", backuprepo.Manifest{}, err
	}
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		keys = append(keys, path.Base(o.Key))
	}
	slices.Sort(keys)
	for _, id := range slices.Backward(keys) {
		m, err := b.manifest(ctx, id)
		if err != nil {
			continue // another key's, or damaged: not the newest usable one
		}
		if slices.ContainsFunc(m.Parts, func(p backuprepo.PartManifest) bool { return p.Name == backups.PartStore }) {
			return m.BackupID, m, nil
		}
	}
	return "", backuprepo.Manifest{}, errors.New("the storage holds no disaster-recovery bundle this identity decrypts (and authenticates, unless --trust-unauthenticated)")
}
