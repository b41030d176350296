// Command svc is the whole product in one binary: `svc serve` runs a server
// on the embedded defaults or as a node of a cluster; the other commands are
// clients of the API.
//
// This package is the composition root: it reads flags and configuration,
// wires the concrete store, services and adapters together, and handles
// signals. It must hold no business logic.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/server"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// exitError carries a process exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func (e *exitError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit code: 0, 1 when
// the command failed (an API refusal prints its code, message and remedy
// on stderr), 2 when it was used wrongly.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		printError(stderr, err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "svc",
		Short:         "Self-hosted application hosting",
		Long:          "svc hosts web apps: it detects how they run, keeps their configuration as spec revisions, deploys them, and fronts them with an identity-aware proxy.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(root), newVersionCmd(), newAdaptersCmd(), newLoginCmd(), newLogoutCmd(),
		newAppsCmd(), newStatusCmd(), newDeployCmd(), newLaunchCmd(), newLogsCmd(), newOpenCmd())
	root.AddCommand(newMCPCmd())
	usageErrors(root)
	return root
}

// usageErrors makes every way of using a command wrongly exit 2: a bad
// flag, wrong arguments, an unknown subcommand. A command that only
// groups others prints its help when called bare.
func usageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args = cobra.NoArgs // an unknown subcommand
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
		if check := c.Args; check != nil {
			c.Args = func(c *cobra.Command, args []string) error {
				if err := check(c, args); err != nil {
					return &exitError{code: 2, err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version)
			return err
		},
	}
}

// commandRefs lists the CLI's commands for the generated reference.
func commandRefs(root *cobra.Command) []server.CommandRef {
	var out []server.CommandRef
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			out = append(out, server.CommandRef{Command: sub.CommandPath(), Summary: sub.Short, Usage: sub.UseLine()})
			walk(sub)
		}
	}
	walk(root)
	return out
}
