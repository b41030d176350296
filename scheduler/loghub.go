package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// logHub holds the output of the deploys this node runs while they run, so
// that readers follow it line by line; a finished deploy's output is in the
// store (DeployLogs).
type logHub struct {
	now  func() time.Time
	mu   sync.Mutex
	live map[string]*liveLog
}

func newLogHub(now func() time.Time) *logHub { return &logHub{now: now, live: map[string]*liveLog{}} }

// liveLog is one running deploy's output.
type liveLog struct {
	now   func() time.Time
	mu    sync.Mutex
	lines []LogLine
	// dropped counts the lines let go from the front to bound memory;
	// readers' positions count them too.
	dropped int
	// changed is closed and replaced whenever a line is added or the log
	// ends.
	changed chan struct{}
	done    bool
}

// maxLiveLines caps the lines a running deploy keeps in memory.
const maxLiveLines = 20000

func (h *logHub) open(id string) *liveLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := &liveLog{now: h.now, changed: make(chan struct{})}
	h.live[id] = l
	return l
}

func (h *logHub) get(id string) *liveLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live[id]
}

// close ends a deploy's live log; followers see the end and read the rest
// from the store.
func (h *logHub) close(id string) {
	h.mu.Lock()
	l := h.live[id]
	delete(h.live, id)
	h.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		l.done = true
		close(l.changed)
		l.mu.Unlock()
	}
}

func (l *liveLog) add(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	if len(line) > 8192 {
		line = line[:8192] + "…"
	}
	if len(l.lines) >= maxLiveLines {
		n := len(l.lines) / 10
		l.lines = slices.Delete(l.lines, 0, n)
		l.dropped += n
	}
	l.lines = append(l.lines, LogLine{Time: l.now().UTC(), Stream: stream, Line: line})
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *liveLog) snapshot() []LogLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// from returns the lines from index i on, whether the log ended, and a
// channel closed at the next change.
// Positions count every line added, those let go included; a reader that
// fell behind the front is told how many it missed.
func (l *liveLog) from(i int) ([]LogLine, int, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LogLine
	next := l.dropped + len(l.lines)
	if i < l.dropped {
		out = append(out, LogLine{Time: l.now().UTC(), Stream: LogSystem, Line: fmt.Sprintf("… %d lines left out of this long log …", l.dropped-i)})
		i = l.dropped
	}
	if k := i - l.dropped; k < len(l.lines) {
		out = append(out, l.lines[k:]...)
	}
	return out, next, l.done, l.changed
}

// FollowLogs sends a deployment's output to emit, line by line: while it
// runs on this node, each line as it is written; once it has finished, its
// whole kept log. It returns the deployment as it ended. A deployment that
// runs on another node is followed by waiting for its end.
func (s *Service) FollowLogs(ctx context.Context, appID, depID string, emit func(LogLine) error) (Deployment, error) {
	d, err := s.Get(appID, depID)
	if err != nil {
		return Deployment{}, err
	}
	sent := 0
	for d.Active() {
		if l := s.logs.get(depID); l != nil {
			lines, next, done, changed := l.from(sent)
			for _, line := range lines {
				if err := emit(line); err != nil {
					return d, err
				}
			}
			sent = next
			if !done {
				select {
				case <-ctx.Done():
					return d, ctx.Err()
				case <-changed:
				}
				continue
			}
		} else {
			// Not running here (yet, or on another node): wait for a
			// change of the deployment.
			r := s.d.Store.Read()
			cur, _, ok := Deployments.Get(r, depID)
			if ok && cur.Active() && s.logs.get(depID) == nil {
				wctx, cancel := context.WithTimeout(ctx, time.Second)
				_ = r.Wait(wctx)
				cancel()
				if ctx.Err() != nil {
					return d, ctx.Err()
				}
			}
		}
		if d, err = s.Get(appID, depID); err != nil {
			return Deployment{}, err
		}
	}
	if sent > 0 {
		// Followed live to its end: every line was sent.
		return d, nil
	}
	kept, _, ok := DeployLogs.Get(s.d.Store.Read(), depID)
	if !ok {
		return d, nil
	}
	head := len(kept.Lines)
	if kept.Dropped > 0 {
		head = headLines(kept.Lines)
	}
	for i, line := range kept.Lines {
		if i == head {
			gap := LogLine{Time: line.Time, Stream: LogSystem, Line: fmt.Sprintf("… %d lines left out of this long log …", kept.Dropped)}
			if err := emit(gap); err != nil {
				return d, err
			}
		}
		if err := emit(line); err != nil {
			return d, err
		}
	}
	return d, nil
}

// headLines is where capLog cut a long log: the lines within its head
// budget.
func headLines(lines []LogLine) int {
	budget, used := maxLogBytes/4, 0
	for i, l := range lines {
		if used+len(l.Line)+32 > budget {
			return i
		}
		used += len(l.Line) + 32
	}
	return len(lines)
}
