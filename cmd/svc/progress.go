package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svchost/svc/api"
)

// progress is one status line on stderr for long work (an upload, waiting
// for detection, a deploy's phases, waiting for health), rewritten in
// place ("\r", erase the line) with the time the current step has taken.
// It is off — every method does nothing — unless stdout and stderr are
// both terminals and the output is not JSON: a script sees no control
// sequences. Lines printed while it shows go through print, which takes
// the status line away and puts it back under them.
type progress struct {
	w     io.Writer // nil: off
	width int

	mu     sync.Mutex
	msg    string
	since  time.Time
	shown  bool
	drawn  time.Time
	ticker *time.Ticker
	stop   chan struct{}
}

// progressRedraw is how often the elapsed time is redrawn, and the least
// time between two redraws of a changing message.
const progressRedraw = 250 * time.Millisecond

// newProgress is the command's progress line: on only when stdout and
// stderr are terminals and p prints tables.
func newProgress(cmd *cobra.Command, p printer) *progress {
	errf, ok := cmd.ErrOrStderr().(*os.File)
	if p.json || !writesTerminal(cmd.OutOrStdout()) || !ok || !term.IsTerminal(int(errf.Fd())) {
		return &progress{}
	}
	width, _, err := term.GetSize(int(errf.Fd()))
	if err != nil || width < 20 {
		width = 80
	}
	return &progress{w: errf, width: width}
}

// writesTerminal reports whether w is a terminal.
func writesTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// step shows msg as a new step: its clock starts now, and it is redrawn
// with the time taken until the next step or done.
func (pr *progress) step(msg string) {
	if pr.w == nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.msg, pr.since = msg, time.Now()
	if pr.ticker == nil {
		pr.ticker, pr.stop = time.NewTicker(progressRedraw), make(chan struct{})
		go pr.tick(pr.ticker, pr.stop)
	}
	pr.drawLocked()
}

// update changes the current step's message (an upload's bytes sent),
// redrawing at most every progressRedraw.
func (pr *progress) update(msg string) {
	if pr.w == nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.msg = msg
	if time.Since(pr.drawn) >= progressRedraw {
		pr.drawLocked()
	}
}

func (pr *progress) tick(t *time.Ticker, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			pr.mu.Lock()
			if pr.msg != "" {
				pr.drawLocked()
			}
			pr.mu.Unlock()
		}
	}
}

func (pr *progress) drawLocked() {
	line := pr.msg
	if d := time.Since(pr.since); d >= time.Second {
		line += fmt.Sprintf(" (%s)", d.Truncate(time.Second))
	}
	if r := []rune(line); len(r) > pr.width-1 {
		line = string(r[:pr.width-2]) + "…"
	}
	fmt.Fprint(pr.w, "\r\x1b[K"+line)
	pr.shown, pr.drawn = true, time.Now()
}

// print runs fn (which prints lines) with the status line taken away, and
// puts it back after.
func (pr *progress) print(fn func() error) error {
	if pr.w == nil {
		return fn()
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.clearLocked()
	err := fn()
	if pr.msg != "" {
		pr.drawLocked()
	}
	return err
}

func (pr *progress) clearLocked() {
	if pr.shown {
		fmt.Fprint(pr.w, "\r\x1b[K")
		pr.shown = false
	}
}

// done takes the status line away and stops redrawing it.
func (pr *progress) done() {
	if pr.w == nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.clearLocked()
	pr.msg = ""
	if pr.ticker != nil {
		pr.ticker.Stop()
		close(pr.stop)
		pr.ticker = nil
	}
}

// countingReader reports the bytes read from r so far to fn.
type countingReader struct {
	r  io.Reader
	n  int64
	fn func(n int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.fn(c.n)
	return n, err
}

// byteSize is n bytes for people: B, KiB, MiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// deployPhase is the step a deploy is at after its log line l, from prev:
// building (a workload's build and its output), starting and waiting for
// health, the workloads' state; prev when l says nothing of the phase.
func deployPhase(prev string, l api.LogLine) string {
	switch {
	case l.Stream == "build" && !strings.HasPrefix(prev, "building"):
		return "building"
	case l.Stream != "system":
		return prev
	case strings.HasPrefix(l.Line, "building workload "):
		name, _, _ := strings.Cut(strings.TrimPrefix(l.Line, "building workload "), " ")
		return "building " + name
	case strings.HasPrefix(l.Line, "starting workloads"):
		return "starting, waiting for health"
	case strings.HasPrefix(l.Line, "workload ") && strings.Contains(l.Line, "running="):
		name, state, _ := strings.Cut(strings.TrimPrefix(l.Line, "workload "), ": ")
		return "waiting for health: " + name + " " + state
	case strings.HasPrefix(l.Line, "deploy succeeded"), strings.HasPrefix(l.Line, "deploy failed"):
		return "finishing"
	}
	return prev
}
