package scheduler

import (
	"strings"
	"testing"
	"time"
)

// A reader that fell behind lines let go from the front of a long live log
// is told how many it missed, and then gets every later line once.
func TestLiveLogReaderBehindTheFront(t *testing.T) {
	h := newLogHub(time.Now)
	l := h.open("dep_1")
	for i := range maxLiveLines + 10 {
		l.add(LogBuild, "line "+string(rune('a'+i%26)))
	}
	lines, next, done, _ := l.from(5)
	if done || next != maxLiveLines+10 {
		t.Fatalf("next = %d, done = %v", next, done)
	}
	dropped := maxLiveLines / 10
	if !strings.Contains(lines[0].Line, "lines left out") || len(lines) != 1+maxLiveLines+10-dropped {
		t.Fatalf("got %d lines, first %q", len(lines), lines[0].Line)
	}
	l.add(LogRun, "last")
	more, next2, _, _ := l.from(next)
	if len(more) != 1 || more[0].Line != "last" || next2 != next+1 {
		t.Fatalf("after one more line: %+v, next %d", more, next2)
	}
	h.close("dep_1")
	if _, _, done, _ := l.from(next2); !done {
		t.Fatal("a closed log is done")
	}
}
