package backuprepo

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"filippo.io/age"

	"github.com/svchost/svc/internal/errcode"
)

// Limits of what a repository writes and reads back.
const (
	// ChunkSize is the most plaintext one chunk holds: files are cut into
	// chunks of this size (the last one shorter).
	ChunkSize = 1 << 20
	// maxChunkObject bounds a chunk object read back: its plaintext and
	// age's overhead (a header per recipient, 16 bytes a 64 KiB segment).
	maxChunkObject = ChunkSize + 64<<10
	// maxManifest bounds a manifest read back.
	maxManifest = 64 << 20
	// maxEntries bounds the entries of one part.
	maxEntries = 1 << 20
)

// Keys are what a repository encrypts to and decrypts with: the
// installation's identity (it reads, and the key naming chunks derives
// from it), and the recipients every object is also encrypted to (the
// identity's own recipient is always one).
type Keys struct {
	Identity   *age.X25519Identity
	Recipients []age.Recipient
}

// Repo is a backup repository over a Storage.
type Repo struct {
	st     Storage
	keys   Keys
	macKey []byte
	// authKey authenticates manifests (Manifest.MAC).
	authKey []byte
	// journal is the directory of restore journals (Recover reads it).
	journal string
	// writing counts the writes under way, which Prune waits out.
	mu      sync.Mutex
	writing int
}

// New returns the repository over st with keys; restore journals are kept
// in journalDir (on the same machine as the targets).
func New(st Storage, k Keys, journalDir string) *Repo {
	mk, err := hkdf.Key(sha256.New, []byte(k.Identity.String()), nil, "svc backup chunk names", 32)
	if err != nil {
		panic(err) // only for a length hkdf cannot give
	}
	ak, err := hkdf.Key(sha256.New, []byte(k.Identity.String()), nil, "svc backup manifest mac", 32)
	if err != nil {
		panic(err)
	}
	return &Repo{st: st, keys: k, macKey: mk, authKey: ak, journal: journalDir}
}

// Part is one thing a backup holds, by name: a directory tree. Hold, if
// set, is called before the tree is read (to pause what writes it) and
// what it returns after.
type Part struct {
	Name string
	Dir  string
	Hold func(ctx context.Context) (release func(), err error)
}

// Entry is a file, directory or symbolic link of a part, by its slash path
// relative to the part's root ("." is the root).
type Entry struct {
	Path   string      `json:"p"`
	Type   string      `json:"t"` // "d", "f" or "l"
	Mode   fs.FileMode `json:"m"`
	MTime  time.Time   `json:"mt"`
	Size   int64       `json:"s,omitempty"`
	Target string      `json:"l,omitempty"`
	Chunks []Chunk     `json:"c,omitempty"`
}

// Chunk is a piece of a file: its object's name, its plaintext's size and
// SHA-256.
type Chunk struct {
	ID   string `json:"id"`
	Size int64  `json:"s"`
	Hash string `json:"h"`
}

// PartManifest is a part as a manifest records it.
type PartManifest struct {
	Name    string  `json:"name"`
	Entries []Entry `json:"entries"`
}

// Manifest is a backup's table of contents.
type Manifest struct {
	Format     int            `json:"format"`
	BackupID   string         `json:"backup_id"`
	CreatedAt  time.Time      `json:"created_at"`
	Parts      []PartManifest `json:"parts"`
	PlainBytes int64          `json:"plain_bytes"`
	// SizeBytes is what the backup stored: its new chunks and manifest
	// (chunks it shares with earlier backups are not counted again).
	SizeBytes int64 `json:"size_bytes"`
	// MAC authenticates the manifest (its JSON without the MAC) under a
	// key derived from the installation's identity: age encrypts to a
	// public key, so whoever can write to the storage and knows that key
	// could otherwise make up a backup that decrypts.
	MAC string `json:"mac,omitempty"`
}

const manifestFormat = 1

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Keys of a backup's objects: IDs are written lower case (storage keys
// are; ULIDs read the same in either case).
func manifestKey(id string) string { return "backups/" + strings.ToLower(id) }
func chunkKey(id string) string    { return "chunks/" + id[:2] + "/" + id }
func lockKey(id string) string     { return "locks/" + strings.ToLower(id) }

// Write backs the parts up as backup id: every file cut into chunks, each
// chunk encrypted and stored under a name derived from its content (a
// chunk the repository has already is not stored again), and the
// manifest, encrypted, last: a backup without its manifest does not exist.
func (r *Repo) Write(ctx context.Context, id string, parts []Part) (Manifest, error) {
	if !idRE.MatchString(strings.ToLower(id)) {
		return Manifest{}, errcode.Invalid("backup_id", "a backup ID is a plain name")
	}
	r.mu.Lock()
	r.writing++
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.writing--; r.mu.Unlock() }()
	lock := lockKey(id)
	stamp := time.Now().UTC().Format(time.RFC3339)
	if err := r.st.Put(ctx, lock, strings.NewReader(stamp), int64(len(stamp))); err != nil {
		return Manifest{}, err
	}
	defer func() { _ = r.st.Delete(context.WithoutCancel(ctx), lock) }()
	have := map[string]bool{}
	objs, err := r.st.List(ctx, "chunks/")
	if err != nil {
		return Manifest{}, err
	}
	for _, o := range objs {
		have[path.Base(o.Key)] = true
	}
	m := Manifest{Format: manifestFormat, BackupID: id, CreatedAt: time.Now().UTC()}
	for _, p := range parts {
		pm, err := r.writeHeld(ctx, p, have, &m)
		if err != nil {
			return Manifest{}, fmt.Errorf("back up %s: %w", p.Name, err)
		}
		m.Parts = append(m.Parts, pm)
	}
	if m.MAC, err = r.mac(m); err != nil {
		return Manifest{}, err
	}
	plain, err := json.Marshal(m)
	if err != nil {
		return Manifest{}, err
	}
	sealed, err := r.seal(plain)
	if err != nil {
		return Manifest{}, err
	}
	m.SizeBytes += int64(len(sealed))
	if err := r.st.Put(ctx, manifestKey(id), bytes.NewReader(sealed), int64(len(sealed))); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// writeHeld writes a part while its Hold holds.
func (r *Repo) writeHeld(ctx context.Context, p Part, have map[string]bool, m *Manifest) (PartManifest, error) {
	if p.Hold != nil {
		release, err := p.Hold(ctx)
		if err != nil {
			return PartManifest{}, err
		}
		defer release()
	}
	return r.writePart(ctx, p, have, m)
}

// writePart walks a tree (never following a link, through os.Root) and
// stores its files' chunks.
func (r *Repo) writePart(ctx context.Context, p Part, have map[string]bool, m *Manifest) (PartManifest, error) {
	pm := PartManifest{Name: p.Name}
	root, err := os.OpenRoot(p.Dir)
	if err != nil {
		return pm, err
	}
	defer root.Close()
	buf := make([]byte, ChunkSize)
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := Entry{Path: rel, Mode: fi.Mode().Perm(), MTime: fi.ModTime().UTC()}
		switch {
		case fi.IsDir():
			e.Type = "d"
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Type = "l"
			if e.Target, err = root.Readlink(rel); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			e.Type = "f"
			if err := r.writeFile(ctx, root, rel, buf, have, &e, m); err != nil {
				return err
			}
		default:
			return nil // devices, fifos, sockets: not data
		}
		if len(pm.Entries) >= maxEntries {
			return fmt.Errorf("more than %d entries", maxEntries)
		}
		pm.Entries = append(pm.Entries, e)
		return nil
	})
	return pm, err
}

func (r *Repo) writeFile(ctx context.Context, root *os.Root, rel string, buf []byte, have map[string]bool, e *Entry, m *Manifest) error {
	f, err := root.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			c, stored, perr := r.putChunk(ctx, buf[:n], have)
			if perr != nil {
				return perr
			}
			e.Chunks = append(e.Chunks, c)
			e.Size += int64(n)
			m.PlainBytes += int64(n)
			m.SizeBytes += stored
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// putChunk stores a chunk unless the repository has it; it returns the
// chunk and the bytes stored.
func (r *Repo) putChunk(ctx context.Context, plain []byte, have map[string]bool) (Chunk, int64, error) {
	mac := hmac.New(sha256.New, r.macKey)
	mac.Write(plain)
	sum := sha256.Sum256(plain)
	c := Chunk{ID: hex.EncodeToString(mac.Sum(nil)), Size: int64(len(plain)), Hash: hex.EncodeToString(sum[:])}
	if have[c.ID] {
		return c, 0, nil
	}
	sealed, err := r.seal(plain)
	if err != nil {
		return c, 0, err
	}
	if err := r.st.Put(ctx, chunkKey(c.ID), bytes.NewReader(sealed), int64(len(sealed))); err != nil {
		return c, 0, err
	}
	have[c.ID] = true
	return c, int64(len(sealed)), nil
}

// seal encrypts plain to the identity and the recipients.
func (r *Repo) seal(plain []byte) ([]byte, error) {
	var out bytes.Buffer
	w, err := age.Encrypt(&out, append([]age.Recipient{r.keys.Identity.Recipient()}, r.keys.Recipients...)...)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(plain); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// open decrypts an object with ids (the repository's identity when none):
// BACKUP_DECRYPT_FAILED when no key opens it, BACKUP_INCOMPLETE when it
// was altered or cut.
func (r *Repo) open(sealed []byte, what string, limit int64, ids []age.Identity) ([]byte, error) {
	if len(ids) == 0 {
		ids = []age.Identity{r.keys.Identity}
	}
	rd, err := age.Decrypt(bytes.NewReader(sealed), ids...)
	var nomatch *age.NoIdentityMatchError
	switch {
	case errors.As(err, &nomatch):
		return nil, errcode.New(errcode.BackupDecryptFailed, "%s cannot be decrypted with the key given", what).
			WithRemedy("use the installation's backup key (keyring/backup-key in the work dir) or one whose public key was a recipient")
	case err != nil:
		return nil, errcode.New(errcode.BackupIncomplete, "%s is damaged: its header does not read", what)
	}
	plain, err := io.ReadAll(io.LimitReader(rd, limit+1))
	if err != nil || int64(len(plain)) > limit {
		return nil, errcode.New(errcode.BackupIncomplete, "%s is damaged: it was altered or cut short", what)
	}
	return plain, nil
}

// get reads an object whole, at most limit bytes; an absent one is
// BACKUP_INCOMPLETE (what names it).
func (r *Repo) get(ctx context.Context, key, what string, limit int64) ([]byte, error) {
	rc, err := r.st.Get(ctx, key)
	if errcode.Has(err, errcode.NotFound) {
		return nil, errcode.New(errcode.BackupIncomplete, "%s is missing from the backup storage", what)
	}
	if err != nil {
		return nil, err
	}
	return readAll(rc, what, limit)
}

// readAll reads and closes an object, at most limit bytes.
func readAll(rc io.ReadCloser, what string, limit int64) ([]byte, error) {
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errcode.New(errcode.BackupIncomplete, "%s is larger than any the repository writes", what)
	}
	return b, nil
}

// mac is the MAC of a manifest: HMAC-SHA256 under authKey of its JSON
// without the MAC (JSON encoding of a parsed manifest gives the same
// bytes: every field is typed, and unknown fields are refused).
func (r *Repo) mac(m Manifest) (string, error) {
	m.MAC = ""
	body, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	h := hmac.New(sha256.New, r.authKey)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Manifest reads and checks a backup's manifest: NOT_FOUND for no such
// backup. Read with the repository's own identity (no ids), the manifest
// must carry its MAC under that identity's key (BACKUP_DECRYPT_FAILED
// otherwise: it was not written with this key). Read with ids given (an
// operator's recipient key, which cannot derive that key), it is
// decrypted but not authenticated.
func (r *Repo) Manifest(ctx context.Context, id string, ids ...age.Identity) (Manifest, error) {
	rc, err := r.st.Get(ctx, manifestKey(id))
	if errcode.Has(err, errcode.NotFound) {
		return Manifest{}, errcode.New(errcode.NotFound, "no backup %s in the backup storage", id)
	}
	if err != nil {
		return Manifest{}, err
	}
	sealed, err := readAll(rc, "the manifest of backup "+id, maxManifest)
	if err != nil {
		return Manifest{}, err
	}
	plain, err := r.open(sealed, "the manifest of backup "+id, maxManifest, ids)
	if err != nil {
		return Manifest{}, err
	}
	m, err := ParseManifest(plain)
	if err != nil {
		return Manifest{}, errcode.New(errcode.BackupIncomplete, "the manifest of backup %s: %v", id, err)
	}
	if !strings.EqualFold(m.BackupID, id) {
		return Manifest{}, errcode.New(errcode.BackupIncomplete, "the manifest stored as backup %s is backup %s's", id, m.BackupID)
	}
	if len(ids) == 0 {
		want, err := r.mac(m)
		if err != nil {
			return Manifest{}, err
		}
		if !hmac.Equal([]byte(want), []byte(m.MAC)) {
			return Manifest{}, ErrUnauthenticated(id)
		}
	}
	return m, nil
}

// ErrUnauthenticated is the refusal of a manifest whose MAC is not this
// installation's: it decrypts, but was not written with its key.
func ErrUnauthenticated(id string) *errcode.Error {
	return errcode.New(errcode.BackupDecryptFailed, "the manifest of backup %s is not authenticated by this installation's backup key: it was not written with it (made up by whoever could write to the storage, or another installation's)", id).
		WithRemedy("restore only backups this installation wrote; a backup decrypted with a backups.recipients key is read with that key (svc restore --identity)")
}

// ParseManifest reads a manifest's plaintext and checks it: known format,
// parts of plain names, paths that stay inside their part, chunks that add
// up to their files.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("does not read: %v", err)
	}
	if m.Format != manifestFormat {
		return Manifest{}, fmt.Errorf("format %d; this build reads %d", m.Format, manifestFormat)
	}
	seen := map[string]bool{}
	for _, p := range m.Parts {
		if p.Name == "" || seen[p.Name] || !fs.ValidPath(p.Name) {
			return Manifest{}, fmt.Errorf("a part named %q", p.Name)
		}
		seen[p.Name] = true
		if err := checkEntries(p.Entries); err != nil {
			return Manifest{}, fmt.Errorf("part %s: %v", p.Name, err)
		}
	}
	return m, nil
}

func checkEntries(es []Entry) error {
	if len(es) > maxEntries {
		return fmt.Errorf("%d entries", len(es))
	}
	paths := map[string]string{}
	for i, e := range es {
		if !fs.ValidPath(e.Path) || (e.Path == ".") != (i == 0) {
			return fmt.Errorf("entry %d: path %q", i, e.Path)
		}
		if parent := path.Dir(e.Path); e.Path != "." && paths[parent] != "d" {
			return fmt.Errorf("entry %s: its directory comes first", e.Path)
		}
		if _, dup := paths[e.Path]; dup {
			return fmt.Errorf("entry %s twice", e.Path)
		}
		paths[e.Path] = e.Type
		var total int64
		for _, c := range e.Chunks {
			if len(c.ID) != 64 || len(c.Hash) != 64 || c.Size <= 0 || c.Size > ChunkSize {
				return fmt.Errorf("entry %s: a chunk %q of %d bytes", e.Path, c.ID, c.Size)
			}
			total += c.Size
		}
		switch {
		case e.Type == "f" && total == e.Size:
		case e.Type == "d" && len(e.Chunks) == 0 && e.Size == 0:
		case e.Type == "l" && len(e.Chunks) == 0 && e.Target != "":
		default:
			return fmt.Errorf("entry %s: a %q of %d bytes in %d chunks", e.Path, e.Type, e.Size, len(e.Chunks))
		}
	}
	if len(es) == 0 || es[0].Type != "d" {
		return errors.New("no root directory")
	}
	return nil
}

// readChunk reads, decrypts and checks one chunk.
func (r *Repo) readChunk(ctx context.Context, c Chunk, what string, ids []age.Identity) ([]byte, error) {
	sealed, err := r.get(ctx, chunkKey(c.ID), what, maxChunkObject)
	if err != nil {
		return nil, err
	}
	plain, err := r.open(sealed, what, ChunkSize, ids)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(plain)
	if int64(len(plain)) != c.Size || !hmac.Equal([]byte(hex.EncodeToString(sum[:])), []byte(c.Hash)) {
		return nil, errcode.New(errcode.BackupIncomplete, "%s does not hold what the manifest says (another chunk's data, or altered)", what)
	}
	return plain, nil
}

// Verify reads every chunk a backup's manifest names back from the
// storage, decrypts and checks it, touching nothing else. It returns the
// manifest and the problems (coded: NOT_FOUND, BACKUP_INCOMPLETE,
// BACKUP_DECRYPT_FAILED; a storage failure as it came).
func (r *Repo) Verify(ctx context.Context, id string, ids ...age.Identity) (Manifest, []error) {
	m, err := r.Manifest(ctx, id, ids...)
	if err != nil {
		return Manifest{}, []error{err}
	}
	var problems []error
	err = r.walk(ctx, m, nil, ids, func(err error) bool {
		problems = append(problems, err)
		return len(problems) < 20
	}, nil)
	if err != nil {
		problems = append(problems, err)
	}
	return m, problems
}

// walk reads every chunk of the parts named in only (all when nil),
// reporting a problem to bad (stop when it returns false) and each file's
// data to emit.
func (r *Repo) walk(ctx context.Context, m Manifest, only map[string]bool, ids []age.Identity, bad func(error) bool,
	emit func(part string, e Entry, data []byte) error) error {
	for _, p := range m.Parts {
		if only != nil && !only[p.Name] {
			continue
		}
		for _, e := range p.Entries {
			for i, c := range e.Chunks {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				what := fmt.Sprintf("chunk %d of %s in %s", i+1, e.Path, p.Name)
				data, err := r.readChunk(ctx, c, what, ids)
				if _, coded := errcode.As(err); err != nil && !coded {
					return err
				}
				if err != nil {
					if !bad(err) {
						return nil
					}
					continue
				}
				if emit != nil {
					if err := emit(p.Name, e, data); err != nil {
						return err
					}
				}
			}
			if emit != nil && len(e.Chunks) == 0 {
				if err := emit(p.Name, e, nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Delete removes a backup's manifest (Prune removes the chunks no backup
// uses any more).
func (r *Repo) Delete(ctx context.Context, id string) error {
	return r.st.Delete(ctx, manifestKey(id))
}

// Prune removes the chunks no backup's manifest names. It does nothing
// while a write is under way (in this process, or in another: its lock
// object), since that write may be about to name a chunk it found there.
func (r *Repo) Prune(ctx context.Context) (removed int, err error) {
	r.mu.Lock()
	busy := r.writing > 0
	r.mu.Unlock()
	locks, err := r.st.List(ctx, "locks/")
	if err != nil || busy || len(locks) > 0 {
		return 0, err
	}
	manifests, err := r.st.List(ctx, "backups/")
	if err != nil {
		return 0, err
	}
	used := map[string]bool{}
	for _, o := range manifests {
		m, err := r.Manifest(ctx, path.Base(o.Key))
		if err != nil {
			return 0, fmt.Errorf("prune: %w", err) // never guess what a backup uses
		}
		for _, p := range m.Parts {
			for _, e := range p.Entries {
				for _, c := range e.Chunks {
					used[c.ID] = true
				}
			}
		}
	}
	chunks, err := r.st.List(ctx, "chunks/")
	if err != nil {
		return 0, err
	}
	for _, o := range chunks {
		if !used[path.Base(o.Key)] {
			if err := r.st.Delete(ctx, o.Key); err != nil {
				return removed, err
			}
			removed++
		}
	}
	return removed, nil
}

// sortedParts lists a manifest's part names.
func (m Manifest) sortedParts() []string {
	out := make([]string, 0, len(m.Parts))
	for _, p := range m.Parts {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}
