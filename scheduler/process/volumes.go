package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// Volumes are directories under WorkDir/volumes/<vol_ID>/data, made
// (0700) on first use and never removed by a job: they outlive jobs and
// the app, and an app that takes a kept volume over finds its data there
// (RemoveVolume removes one when the volume is discarded). A volume's
// directory of the layout from before volumes had IDs,
// WorkDir/volumes/<appID>/<volume>, is moved to its ID's place the first
// time a job mounts it. A sandboxed workload sees a volume at its mount
// path. Without a sandbox the runtime cannot mount at an absolute path,
// so it points the workload at the directory instead: the environment
// variable SVC_VOLUME_<NAME> (the volume's name in upper case, '-' as
// '_') holds its path, and a symbolic link at <artifact dir>/<mount path
// less its leading '/'> leads to it.

// VolumeDir returns the host directory of a mount's volume (which may not
// exist yet): by its ID, or by the app's ID and its name for a mount
// without one. The names must be plain names (checked by Run; here the
// caller's).
func (r *Runtime) VolumeDir(appID string, m scheduler.Mount) string {
	if m.ID != "" {
		return r.VolumePath(m.ID)
	}
	return r.legacyVolumeDir(appID, m.Volume)
}

// VolumePath returns the host directory of a volume's data by its ID.
func (r *Runtime) VolumePath(volumeID string) string {
	return filepath.Join(r.cfg.WorkDir, "volumes", volumeID, "data")
}

func (r *Runtime) legacyVolumeDir(appID, volume string) string {
	return filepath.Join(r.cfg.WorkDir, "volumes", appID, volume)
}

// RemoveVolume removes a volume's data for good (the volume was
// discarded). A volume that has none is no error.
func (r *Runtime) RemoveVolume(volumeID string) error {
	if !scheduler.PlainName(volumeID) {
		return errcode.Invalid("volume_id", "the volume ID %q is not a plain name", volumeID)
	}
	defer r.forgetUsed(volumeID)
	if err := os.RemoveAll(filepath.Dir(r.VolumePath(volumeID))); err != nil {
		return fmt.Errorf("remove volume %s: %w", volumeID, err)
	}
	return nil
}

// adoptLegacy moves a volume's data from the layout by app ID and name to
// its ID's place, once: when the new place has nothing yet.
func (r *Runtime) adoptLegacy(appID string, m scheduler.Mount) error {
	if m.ID == "" {
		return nil
	}
	old := r.legacyVolumeDir(appID, m.Volume)
	if _, err := os.Lstat(old); err != nil {
		return nil
	}
	dir := r.VolumePath(m.ID)
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	return os.Rename(old, dir)
}

// VolumeEnv is the environment variable that names a volume's directory
// to a workload.
func VolumeEnv(volume string) string {
	var b strings.Builder
	b.WriteString("SVC_VOLUME_")
	for _, c := range strings.ToUpper(volume) {
		if (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// checkMounts validates a task's mounts before anything starts.
func checkMounts(appID, workload string, mounts []scheduler.Mount) error {
	if len(mounts) == 0 {
		return nil
	}
	field := "workloads." + workload + ".mounts"
	if !scheduler.PlainName(appID) {
		return errcode.Invalid("app_id", "workload %s mounts volumes, so its job needs a plain app ID (got %q)", workload, appID)
	}
	seen := map[string]bool{}
	for _, m := range mounts {
		if !scheduler.PlainName(m.Volume) || m.ID != "" && !scheduler.PlainName(m.ID) {
			return errcode.Invalid(field, "the volume name %q (ID %q) is not a plain name", m.Volume, m.ID)
		}
		p := m.Path
		if !strings.HasPrefix(p, "/") {
			return errcode.Invalid(field, "the mount path %q of volume %s is not absolute", p, m.Volume)
		}
		for _, part := range strings.Split(p, "/") {
			if part == ".." {
				return errcode.Invalid(field, "the mount path %q of volume %s goes up with ..", p, m.Volume)
			}
		}
		clean := filepath.Clean(p)
		if clean == "/" || within(clean, "/proc") || within(clean, "/dev") || within(clean, "/sys") {
			return errcode.Invalid(field, "volume %s cannot be mounted at %q", m.Volume, p)
		}
		if seen[clean] {
			return errcode.Invalid(field, "two volumes are mounted at %q", p)
		}
		seen[clean] = true
	}
	return nil
}

// prepareMounts makes the task's volume directories and returns what the
// workload gets: environment variables and, in a sandbox, bind mounts;
// without one it links the mount paths in the working directory.
func (r *Runtime) prepareMounts(appID, workDir string, t scheduler.Task, sandboxed bool, own owner) (map[string]string, []bindMount, error) {
	env := map[string]string{}
	var binds []bindMount
	for _, m := range t.Mounts {
		if err := r.adoptLegacy(appID, m); err != nil {
			return nil, nil, fmt.Errorf("volume %s: move its data to its ID's place: %w", m.Volume, err)
		}
		dir := r.VolumeDir(appID, m)
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return nil, nil, fmt.Errorf("volume %s: %w", m.Volume, err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, nil, fmt.Errorf("volume %s: %w", m.Volume, err)
		}
		// The app's volumes are its sandbox user's (a volume written
		// before sandboxes, or by another user, is handed over once).
		for _, d := range []string{filepath.Dir(dir), dir} {
			if !own.owns(d) {
				if err := own.give(d); err != nil {
					return nil, nil, fmt.Errorf("volume %s: %w", m.Volume, err)
				}
			}
		}
		clean := filepath.Clean(m.Path)
		if sandboxed {
			env[VolumeEnv(m.Volume)] = clean
			binds = append(binds, bindMount{src: dir, dst: clean})
			continue
		}
		env[VolumeEnv(m.Volume)] = dir
		if err := linkMount(workDir, strings.TrimPrefix(clean, "/"), dir); err != nil {
			return nil, nil, errcode.Wrap(err, errcode.ValidInvalid, "volume %s cannot be linked at %s in the artifact: %v", m.Volume, m.Path, err).
				WithDetail("field", "mounts")
		}
	}
	return env, binds, nil
}

// linkMount makes rel (inside dir, never through a link out of it) a
// symbolic link to target. An existing link is replaced, and so is an
// empty directory; anything else there is an error.
func linkMount(dir, rel, target string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if parent := filepath.Dir(rel); parent != "." {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return err
		}
	}
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		if link, err := root.Readlink(rel); err == nil && link == target {
			return nil
		}
		if err := root.Remove(rel); err != nil {
			return err
		}
	case fi.IsDir():
		if !emptyDir(root, rel) {
			return errors.New("the artifact has a directory with files there")
		}
		if err := root.Remove(rel); err != nil {
			return err
		}
	default:
		return errors.New("the artifact has a file there")
	}
	return root.Symlink(target, rel)
}

func emptyDir(root *os.Root, rel string) bool {
	f, err := root.Open(rel)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.ReadDir(1)
	return errors.Is(err, io.EOF)
}

// usedTTL is how long a volume's measured use is answered again without
// walking it anew: a listing of every volume costs a walk of up to
// maxWalk entries per volume, so listings in a row (a console page that
// polls) read the last measure instead.
const usedTTL = 15 * time.Second

// usedReading is a volume's use as measured at a time.
type usedReading struct {
	bytes int64
	at    time.Time
}

// UsedBytes measures what a volume holds (a bounded walk, as usage
// readings do), or answers the measure of the last usedTTL; false when it
// has no data here.
func (r *Runtime) UsedBytes(_ context.Context, volumeID string) (int64, bool) {
	if !scheduler.PlainName(volumeID) {
		return 0, false
	}
	now := time.Now()
	r.usedMu.Lock()
	last, ok := r.used[volumeID]
	r.usedMu.Unlock()
	if ok && now.Sub(last.at) < usedTTL {
		return last.bytes, true
	}
	dir := r.VolumePath(volumeID)
	if _, err := os.Stat(dir); err != nil {
		r.forgetUsed(volumeID)
		return 0, false
	}
	n := dirSize(dir)
	r.usedMu.Lock()
	if r.used == nil {
		r.used = map[string]usedReading{}
	}
	r.used[volumeID] = usedReading{bytes: n, at: now}
	r.usedMu.Unlock()
	return n, true
}

// forgetUsed drops a volume's last measure (its data was replaced or
// removed).
func (r *Runtime) forgetUsed(volumeID string) {
	r.usedMu.Lock()
	delete(r.used, volumeID)
	r.usedMu.Unlock()
}

// HandOver makes everything in a volume the app's sandbox user's (data
// restored from a backup is written by the server); nothing to do when
// users are not switched.
func (r *Runtime) HandOver(_ context.Context, appID, volumeID string) error {
	if !scheduler.PlainName(appID) || !scheduler.PlainName(volumeID) {
		return errcode.Invalid("volume_id", "the volume ID %q is not a plain name", volumeID)
	}
	r.forgetUsed(volumeID) // restored data: measured anew
	own, err := r.ownerFor(appID)
	if err != nil {
		return err
	}
	if err := own.give(filepath.Dir(r.VolumePath(volumeID))); err != nil { // the volume's directory and all in it
		return fmt.Errorf("hand volume %s over to app %s: %w", volumeID, appID, err)
	}
	return nil
}
