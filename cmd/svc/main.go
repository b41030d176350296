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

func main() {
	root := newRoot()
	if err := root.Execute(); err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		fmt.Fprintln(os.Stderr, "svc:", err)
		os.Exit(code)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "svc",
		Short:         "Self-hosted application hosting",
		Long:          "svc hosts web apps: it detects how they run, keeps their configuration as spec revisions, deploys them, and fronts them with an identity-aware proxy.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(root), newVersionCmd(), newAdaptersCmd())
	return root
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
