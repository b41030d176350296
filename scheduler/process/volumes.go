package process

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// Volumes are an app's directories under WorkDir/volumes/<appID>/<volume>,
// made (0700) on first use and never removed by the runtime: they outlive
// jobs and the app. A sandboxed workload sees a volume at its mount path.
// Without a sandbox the runtime cannot mount at an absolute path, so it
// points the workload at the directory instead: the environment variable
// SVC_VOLUME_<NAME> (the volume's name in upper case, '-' as '_') holds
// its path, and a symbolic link at <artifact dir>/<mount path less its
// leading '/'> leads to it.

// VolumeDir returns the host directory of an app's volume (which may not
// exist yet). The names must be plain names (checked by Run; here the
// caller's).
func (r *Runtime) VolumeDir(appID, volume string) string {
	return filepath.Join(r.cfg.WorkDir, "volumes", appID, volume)
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
		if !scheduler.PlainName(m.Volume) {
			return errcode.Invalid(field, "the volume name %q is not a plain name", m.Volume)
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
		dir := r.VolumeDir(appID, m.Volume)
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
