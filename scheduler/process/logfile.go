package process

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// minLogCap is the smallest log cap the runtime keeps to: two files of at
// least a short line each.
const minLogCap = 64

// logFile keeps a workload's output on disk up to a byte cap: lines go to
// <name>.log; once it would pass half the cap it becomes <name>.log.1
// (replacing the previous one) and a new <name>.log starts, so the two
// together never hold more than the cap. A line longer than half the cap
// is cut to fit. It is safe for concurrent use; write errors drop lines
// (logs never stop a workload).
type logFile struct {
	path string
	half int64

	mu        sync.Mutex
	f         *os.File
	size      int64
	followers map[*follower]struct{}
}

// followBuffer is how many lines a follower may fall behind the output
// before it is let go (lagged): a workload's writes never wait for a
// reader.
const followBuffer = 4096

// follower is one reader following a log: lines written after it started
// arrive on lines, which is closed when the log is closed or the reader
// fell followBuffer lines behind (then lagged is true).
type follower struct {
	lines  chan string
	lagged bool
}

// openLogFile opens (appending) or creates the log at path, with its
// directory. Files left by an earlier run under a larger cap are trimmed
// to this one.
func openLogFile(path string, capBytes int64) (*logFile, error) {
	capBytes = max(capBytes, minLogCap)
	l := &logFile{path: path, half: capBytes / 2}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	for _, p := range []string{path + ".1", path} {
		if err := trimTail(p, l.half); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	l.f, l.size = f, fi.Size()
	return l, nil
}

// Add appends one line (without its newline).
func (l *logFile) Add(line string) {
	if int64(len(line)) > l.half-1 {
		line = line[:l.half-1]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	n := int64(len(line)) + 1
	if l.size+n > l.half {
		l.rotateLocked()
		if l.f == nil {
			return
		}
	}
	b := make([]byte, 0, n)
	b = append(append(b, line...), '\n')
	w, _ := l.f.Write(b)
	l.size += int64(w)
	for fl := range l.followers {
		select {
		case fl.lines <- line:
		default:
			fl.lagged = true
			l.unfollowLocked(fl)
		}
	}
}

// Follow returns the kept lines, oldest first, and a follower that gets
// every line added after them; Unfollow lets it go. On a closed log the
// follower's channel is closed already.
func (l *logFile) Follow() ([]string, *follower) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines, _ := readLogLines(l.path)
	fl := &follower{lines: make(chan string, followBuffer)}
	if l.f == nil {
		close(fl.lines)
		return lines, fl
	}
	if l.followers == nil {
		l.followers = map[*follower]struct{}{}
	}
	l.followers[fl] = struct{}{}
	return lines, fl
}

// Unfollow lets a follower go (once it is gone, a no-op).
func (l *logFile) Unfollow(fl *follower) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unfollowLocked(fl)
}

func (l *logFile) unfollowLocked(fl *follower) {
	if _, ok := l.followers[fl]; ok {
		delete(l.followers, fl)
		close(fl.lines)
	}
}

func (l *logFile) rotateLocked() {
	_ = l.f.Close()
	l.f = nil
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	l.f, l.size = f, 0
}

// Lines returns the kept lines, oldest first.
func (l *logFile) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines, _ := readLogLines(l.path)
	return lines
}

// Tail returns the last n kept lines.
func (l *logFile) Tail(n int) []string {
	lines := l.Lines()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// Close closes the file, and ends its followers; later lines are
// dropped.
func (l *logFile) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	for fl := range l.followers {
		l.unfollowLocked(fl)
	}
}

// readLogLines reads a log's rotated file and then its current one.
// fs.ErrNotExist if neither exists.
func readLogLines(path string) ([]string, error) {
	var lines []string
	found := false
	for _, p := range []string{path + ".1", path} {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				lines = append(lines, string(b)) // a line cut short by a crash
				break
			}
			lines = append(lines, string(b[:i]))
			b = b[i+1:]
		}
	}
	if !found {
		return nil, fs.ErrNotExist
	}
	return lines, nil
}

// trimTail cuts a file longer than limit down to its last whole lines
// within limit.
func trimTail(path string, limit int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() <= limit {
		return nil
	}
	buf := make([]byte, limit)
	if _, err := f.ReadAt(buf, fi.Size()-limit); err != nil && err != io.EOF {
		return err
	}
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		buf = buf[i+1:]
	} else {
		buf = buf[:0]
	}
	return writeFileAtomic(path, buf, 0o600)
}

// writeFileAtomic writes a file through a temporary file in its directory
// and a rename: readers see the old contents or the new, never a part.
func writeFileAtomic(path string, b []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
