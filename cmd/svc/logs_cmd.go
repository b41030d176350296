package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	goruntime "runtime"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svchost/svc/api"
)

// newLogsCmd is `svc logs APP`: a workload's last lines of output.
func newLogsCmd() *cobra.Command {
	var f clientFlags
	var workload string
	var tail int
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs APP",
		Short: "An app's runtime output; -f follows it",
		Long: "An app's runtime output, oldest first (GET /api/v1/apps/{appID}/logs): --tail lines (default 100) of --workload (default the primary one); -f follows it as it is written until Ctrl-C.\n\n" +
			"Print the last --tail lines of a workload's output.\n\n" +
			"With -f/--follow the lines written after them are printed as they come (GET …/logs?follow=true, server-sent events), until Ctrl-C or\n" +
			"the workload's job stops (a redeploy replaced it: run svc logs -f again). Following needs the process runtime.\n" +
			"With --output json the API's answer is printed unchanged; with -f each event's data, one a line.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < 0 {
				return usageError("--tail is a number of lines, 1 to 10000")
			}
			c, a, _, err := f.app(cmd, args[0])
			if err != nil {
				return err
			}
			if follow {
				return followLogs(cmd, f.printer(cmd), c, a.ID, workload, tail)
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
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "go on printing lines as they are written, until Ctrl-C")
	return cmd
}

// followLogs prints the last tail lines of a workload's output and then
// each new one, until Ctrl-C (exit 0) or the output ends: its job stopped
// (exit 0, said on stderr) or svc fell behind (exit 1).
func followLogs(cmd *cobra.Command, p printer, c *api.Client, appID, workload string, tail int) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	end, err := c.FollowLogs(ctx, appID, workload, tail, func(l api.AppLogLine, raw json.RawMessage) error {
		if p.json {
			return p.raw(raw)
		}
		return p.line("%s", l.Line)
	})
	switch {
	case ctx.Err() != nil:
		return nil // Ctrl-C: what was asked for
	case err != nil:
		return refusal(cmd.ErrOrStderr(), err)
	case end.Reason == "lagged":
		return &exitError{code: 1, err: errors.New("the output came faster than it could be shown and lines were lost; run svc logs -f again")}
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "svc: the workload's job stopped (a redeploy replaced it, or the app was stopped); run svc logs -f again to follow the next one")
	return nil
}

// newOpenCmd is `svc open APP`: the app's URL, in a browser when there is
// one to open it in.
func newOpenCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "open APP",
		Short: "Print the app's URL, and open it in a browser on a desktop",
		Long:  "Print the app's URL (GET /api/v1/apps/{appID}), and open it in a browser when stdout is a terminal and the system has an opener (xdg-open, open).",
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
