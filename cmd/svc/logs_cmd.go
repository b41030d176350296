package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	goruntime "runtime"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// newLogsCmd is `svc logs APP`: a workload's last lines of output.
func newLogsCmd() *cobra.Command {
	var f clientFlags
	var workload string
	var tail int
	cmd := &cobra.Command{
		Use:   "logs APP",
		Short: "An app's runtime output, oldest first (GET /api/v1/apps/{appID}/logs): --tail lines (default 100) of --workload (default the primary one)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < 0 {
				return usageError("--tail is a number of lines, 1 to 10000")
			}
			c, a, _, err := f.app(cmd, args[0])
			if err != nil {
				return err
			}
			l, raw, err := c.Logs(cmd.Context(), a.ID, workload, tail)
			if err != nil {
				return refusal(cmd.ErrOrStderr(), err)
			}
			p := f.printer(cmd)
			if p.json {
				return p.raw(raw)
			}
			for _, line := range l.Lines {
				if err := p.line("%s", line); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&workload, "workload", "w", "", "the workload (default: the app's primary workload)")
	cmd.Flags().IntVarP(&tail, "tail", "n", 0, "how many of the last lines, 1 to 10000 (default 100)")
	return cmd
}

// newOpenCmd is `svc open APP`: the app's URL, in a browser when there is
// one to open it in.
func newOpenCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "open APP",
		Short: "Print the app's URL (GET /api/v1/apps/{appID}), and open it in a browser when stdout is a terminal and the system has an opener (xdg-open, open)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, a, raw, err := f.app(cmd, args[0])
			if err != nil {
				return err
			}
			p := f.printer(cmd)
			if a.URL == nil {
				return &exitError{code: 1, err: fmt.Errorf("%s has no URL: it is not served (svc status %s)", a.Slug, a.Slug)}
			}
			if err := p.rawOr(raw, "%s", *a.URL); err != nil || p.json {
				return err
			}
			if opener := browserOpener(cmd.OutOrStdout()); opener != "" {
				if err := exec.Command(opener, *a.URL).Start(); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "svc: %s: %v\n", opener, err)
				}
			}
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

// browserOpener is the program that opens a URL in the user's browser, or
// "" when stdout is not a terminal (a script wants the URL only) or the
// system has none.
func browserOpener(stdout io.Writer) string {
	f, ok := stdout.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return ""
	}
	name := "xdg-open"
	if goruntime.GOOS == "darwin" {
		name = "open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return path
}
