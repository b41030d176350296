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
	root.AddCommand(newServeCmd(root), newVersionCmd(), newAdaptersCmd(),
		calls(newLoginCmd(), "sessions_create", "tokens_create"),
		calls(newLogoutCmd(), "tokens_delete"),
		newAppsCmd(),
		calls(newStatusCmd(), "apps_status"),
		calls(newDeployCmd(), "deployments_create", "deployments_logs"),
		calls(newLaunchCmd(), "apps_create", "source_upload", "detection_get", "detection_answer", "detection_accept", "deployments_create", "deployments_logs"),
		calls(newLogsCmd(), "apps_logs"),
		calls(newOpenCmd(), "apps_get"),
		calls(newExecCmd(), "apps_exec"),
		newMCPCmd(), newRestoreCmd(), newUpgradeCmd())
	addOperationCommands(root)
	groupCommands(root)
	usageErrors(root)
	completeAppArgs(root)
	return root
}

// commandGroups sort root's commands in its help, in this order.
var commandGroups = []struct {
	id, title string
	names     []string
}{
	{"start", "Getting started:", []string{"login", "logout", "launch", "deploy", "status", "logs", "exec", "open"}},
	{"apps", "Apps (an app is named by its ID or its slug):", []string{"apps", "source", "detection", "specs", "secrets", "slots", "volumes", "deployments", "grants", "passcode"}},
	{"access", "People and access:", []string{"me", "tokens", "users", "groups", "roles", "verbs", "passwords", "launcher", "sections", "sessions"}},
	{"install", "The installation:", []string{"setup", "policy", "config", "adapters", "capacity", "keyring", "edge-keys", "audit", "server", "raft", "raft-probes", "reference", "openapi"}},
	{"run", "Running svc:", []string{"serve", "restore", "edge", "mcp", "version", "completion"}},
}

// groupCommands puts root's commands in their groups for its help.
func groupCommands(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, g := range commandGroups {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, name := range g.names {
			if c := subcommand(root, name); c != nil {
				c.GroupID = g.id
			}
		}
	}
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
			ref := server.CommandRef{Command: sub.CommandPath(), Summary: sub.Short, Usage: sub.UseLine()}
			for _, name := range opsOf(sub) {
				ref.Endpoints = append(ref.Endpoints, endpoint(operation(name)))
			}
			out = append(out, ref)
			walk(sub)
		}
	}
	walk(root)
	return out
}
