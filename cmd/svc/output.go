package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/svchost/svc/api"
)

// printer writes a client command's answer: the API's JSON unchanged for
// --output json, else an aligned table or lines for people, coloured
// only on a terminal and never with NO_COLOR.
type printer struct {
	w     io.Writer
	json  bool
	color bool
}

// newPrinter is the printer of w for the output format.
func newPrinter(w io.Writer, output string) printer {
	return printer{w: w, json: output == "json", color: colorOn(w)}
}

// colorOn reports whether w is a terminal and NO_COLOR is unset (any
// value, even empty, turns colour off: no-color.org).
func colorOn(w io.Writer) bool {
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// raw prints the API's answer as it came, ending with a newline.
func (p printer) raw(b []byte) error {
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		_, err := io.WriteString(p.w, "\n")
		return err
	}
	return nil
}

// rawOr prints the API's answer with --output json, else a line for
// people.
func (p printer) rawOr(raw []byte, format string, a ...any) error {
	if p.json {
		return p.raw(raw)
	}
	return p.line(format, a...)
}

// table prints rows under a header, columns aligned; empty cells show
// as "-".
func (p printer) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = cmpOr(c, "-")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// fields prints name: value lines, names aligned.
func (p printer) fields(pairs ...string) error {
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], cmpOr(pairs[i+1], "-"))
	}
	return tw.Flush()
}

// line prints one line for people (nothing with --output json).
func (p printer) line(format string, a ...any) error {
	if p.json {
		return nil
	}
	_, err := fmt.Fprintf(p.w, format+"\n", a...)
	return err
}

// state colours a state word: green when it went well, red when it
// failed, yellow while it is under way.
func (p printer) state(s string) string {
	if !p.color {
		return s
	}
	switch s {
	case "succeeded", "running", "healthy":
		return "\x1b[32m" + s + "\x1b[0m"
	case "failed", "degraded", "rejected", "unhealthy", "crashed":
		return "\x1b[31m" + s + "\x1b[0m"
	case "queued", "building", "starting", "deploying", "waiting_approval", "restarting":
		return "\x1b[33m" + s + "\x1b[0m"
	}
	return s
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// printError writes a command's failure on stderr: an API refusal as
// "CODE: message" and "remedy: …" (the code in red on a terminal), else
// "svc: error".
func printError(w io.Writer, err error) {
	var e *api.Error
	if !errors.As(err, &e) {
		fmt.Fprintln(w, "svc:", err)
		return
	}
	code := e.Code
	if colorOn(w) {
		code = "\x1b[31m" + code + "\x1b[0m"
	}
	fmt.Fprintf(w, "%s: %s\n", code, e.Message)
	if e.Remedy != "" {
		fmt.Fprintf(w, "remedy: %s\n", e.Remedy)
	}
	if e.RequestID != "" {
		fmt.Fprintf(w, "request: %s\n", e.RequestID)
	}
}

// usageError is a command used wrongly: exit 2.
func usageError(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}
