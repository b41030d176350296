package process

import (
	"bytes"
	"sync"
)

// logRing keeps the most recent lines of output up to a byte cap: older
// lines are dropped as new ones arrive. It is an io.Writer that splits what
// it is given into lines; a partial line waits for its newline (or is cut
// at the cap). It is safe for concurrent use.
type logRing struct {
	mu      sync.Mutex
	max     int
	lines   []string
	size    int
	partial []byte
	onLine  func(line string)
}

func newLogRing(max int, onLine func(string)) *logRing {
	if max < 2 {
		max = 2
	}
	return &logRing{max: max, onLine: onLine}
}

// Write splits p into lines and keeps them. It never fails.
func (r *logRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.partial = append(r.partial, p...)
			if len(r.partial) >= r.max {
				r.addLocked(string(r.partial))
				r.partial = r.partial[:0]
			}
			break
		}
		r.partial = append(r.partial, p[:i]...)
		r.addLocked(string(r.partial))
		r.partial = r.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// Add keeps one whole line.
func (r *logRing) Add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(line)
}

func (r *logRing) addLocked(line string) {
	if len(line) > r.max-1 {
		line = line[len(line)-(r.max-1):]
	}
	if r.onLine != nil {
		r.onLine(line)
	}
	r.lines = append(r.lines, line)
	r.size += len(line) + 1
	drop := 0
	for r.size > r.max && drop < len(r.lines) {
		r.size -= len(r.lines[drop]) + 1
		drop++
	}
	if drop > 0 {
		r.lines = append(r.lines[:0:0], r.lines[drop:]...)
	}
}

// Lines returns the kept lines, oldest first.
func (r *logRing) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// Size is the bytes kept, counting a newline per line.
func (r *logRing) Size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.size
}

// lineWriter is an io.Writer that hands each whole line to emit; a line
// longer than 64 KiB is handed on in pieces. Not safe for concurrent use
// (exec copies each stream from one goroutine).
type lineWriter struct {
	emit func(line string)
	buf  []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			if len(w.buf) >= 64<<10 {
				w.emit(string(w.buf))
				w.buf = w.buf[:0]
			}
			break
		}
		w.buf = append(w.buf, p[:i]...)
		w.emit(string(w.buf))
		w.buf = w.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// Flush hands on a last line that had no newline.
func (w *lineWriter) Flush() {
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = w.buf[:0]
	}
}
