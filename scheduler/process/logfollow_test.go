package process

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// A follower gets the kept lines, then every line added after them, none
// lost or repeated between the two; one that falls followBuffer lines
// behind is let go as lagged (the writer never waits); closing the log
// ends the others.
func TestLogFileFollow(t *testing.T) {
	l, err := openLogFile(filepath.Join(t.TempDir(), "web.log"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	l.Add("one")
	l.Add("two")
	kept, fl := l.Follow()
	slow, lag := l.Follow()
	if !slices.Equal(kept, []string{"one", "two"}) || !slices.Equal(slow, kept) {
		t.Fatalf("kept = %q, %q; want one, two", kept, slow)
	}
	l.Add("three")
	if got := <-fl.lines; got != "three" {
		t.Errorf("the next line = %q; want three", got)
	}
	<-lag.lines // "three"
	for i := range followBuffer + 1 {
		l.Add(fmt.Sprint("line ", i))
		if i < followBuffer-1 {
			<-fl.lines // the first keeps up (for all but the last two)
		}
	}
	n := 0
	for range lag.lines {
		n++
	}
	if !lag.lagged || n != followBuffer {
		t.Errorf("the reader that never read: lagged %v after %d lines; want lagged after %d", lag.lagged, n, followBuffer)
	}
	l.Close()
	var rest []string
	for line := range fl.lines {
		rest = append(rest, line)
	}
	if fl.lagged || len(rest) != 2 {
		t.Errorf("after Close the follower that kept up got %q (lagged %v); want its last two lines, then the end", rest, fl.lagged)
	}
	l.Unfollow(fl) // after the end, a no-op
	if kept, after := l.Follow(); len(kept) == 0 {
		t.Errorf("Follow of a closed log: kept %q", kept)
	} else if _, open := <-after.lines; open {
		t.Errorf("Follow of a closed log: the follower is open")
	}
}

// BenchmarkLogFileAdd is a workload's line written to its log, with no
// reader following it and with one that keeps up: following adds a
// channel send per line to the write path.
func BenchmarkLogFileAdd(b *testing.B) {
	for _, followers := range []int{0, 1} {
		b.Run(fmt.Sprintf("followers=%d", followers), func(b *testing.B) {
			l, err := openLogFile(filepath.Join(b.TempDir(), "web.log"), 1<<30)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			done := make(chan struct{})
			if followers == 1 {
				_, fl := l.Follow()
				go func() {
					defer close(done)
					for range fl.lines {
					}
				}()
			} else {
				close(done)
			}
			line := "GET /healthz from 127.0.0.1 in 120µs: a line of a usual length"
			b.ReportAllocs()
			for b.Loop() {
				l.Add(line)
			}
			b.StopTimer()
			l.Close()
			<-done
		})
	}
}
