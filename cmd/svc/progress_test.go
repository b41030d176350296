package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/spf13/cobra"

	"github.com/svchost/svc/api"
)

// showProgress runs a progress line through its steps on a command with
// stdout and stderr as given.
func showProgress(stdout, stderr io.Writer, output string) {
	line := output + " line\n"
	cmd := &cobra.Command{}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	pr := newProgress(cmd, newPrinter(stdout, output))
	pr.step("Uploading: 0 B of 10 B")
	pr.update("Uploading: 10 B of 10 B")
	_ = pr.print(func() error { _, err := io.WriteString(stdout, line); return err })
	pr.done()
}

// The progress line is for people at a terminal: with stdout a pipe or a
// file, or with --output json, nothing but the command's lines is
// written (no carriage return, no escape sequence); on a terminal (a real
// pseudo-terminal) the line is drawn and rewritten in place.
func TestProgressOnlyOnATerminal(t *testing.T) {
	var out, errb bytes.Buffer
	showProgress(&out, &errb, "table")
	if out.String() != "table line\n" || errb.Len() != 0 {
		t.Errorf("stdout and stderr not terminals: stdout %q, stderr %q; want the line alone", out.String(), errb.String())
	}

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(ptmx) // until the tty side closes
		got <- string(b)
	}()
	file, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	showProgress(file, tty, "table") // stdout a file, stderr the terminal
	showProgress(tty, tty, "json")   // --output json
	showProgress(tty, tty, "table")  // both terminals: on
	tty.Close()
	var screen string
	select {
	case screen = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not end")
	}
	quiet, table, _ := strings.Cut(screen, "json line\r\n")
	if quiet != "" {
		t.Errorf("with stdout a file, the terminal on stderr got %q; want nothing", quiet)
	}
	want := "\r\x1b[KUploading: 0 B of 10 B\r\x1b[Ktable line\r\n\r\x1b[KUploading: 10 B of 10 B\r\x1b[K"
	if table != want {
		t.Errorf("on a terminal: %q; want %q (the status drawn, taken away for a line, drawn again, cleared)", table, want)
	}
}

// A deploy's phase follows its log: a build, the workloads starting and
// waiting for health, each workload's state.
func TestDeployPhase(t *testing.T) {
	tests := []struct {
		prev   string
		stream string
		line   string
		want   string
	}{
		{"queued", "system", "deploying revision 1 of app a (trigger api) on runtime process, source x", "queued"},
		{"queued", "system", "building workload web (command) from source x (build key k)", "building web"},
		{"building web", "build", "go: downloading", "building web"},
		{"queued", "build", "make", "building"},
		{"building web", "system", "starting workloads in order: web", "starting, waiting for health"},
		{"starting, waiting for health", "run", "listening", "starting, waiting for health"},
		{"starting, waiting for health", "system", "workload web: running=true health=healthy 127.0.0.1:8000", "waiting for health: web running=true health=healthy 127.0.0.1:8000"},
		{"waiting", "system", "deploy succeeded; the app runs revision 1", "finishing"},
	}
	for _, tt := range tests {
		if got := deployPhase(tt.prev, api.LogLine{Stream: tt.stream, Line: tt.line}); got != tt.want {
			t.Errorf("deployPhase(%q, %s %q) = %q; want %q", tt.prev, tt.stream, tt.line, got, tt.want)
		}
	}
}
