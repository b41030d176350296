package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/api"
	"github.com/svchost/svc/server"
	"github.com/svchost/svc/toolserver"
)

// newMCPCmd is svc mcp: the tool server for AI assistants over stdio.
func newMCPCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the API as tools to an AI assistant over stdio (MCP)",
		Long: "svc mcp is a tool server for AI assistants (the Model Context Protocol) on stdin and stdout: one tool per API " +
			"operation (apps_list, deployments_create, …), each calling the API at --addr/SVC_ADDR with --token/SVC_TOKEN " +
			"(else what svc login stored). Only the protocol goes to stdout; logs go to stderr.\n\n" +
			"Give it an agent token, so that host policy's agent_disabled_verbs applies to what the assistant does: " +
			"svc tokens create --agent, or POST /api/v1/tokens {\"name\": \"assistant\", \"agent\": true}. docs/mcp.md shows " +
			"how to add it to an assistant.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			warnNotAgent(ctx, c, cmd.ErrOrStderr())
			return toolserver.ServeStdio(ctx, operations(), version, c, cmd.InOrStdin(), cmd.OutOrStdout(), log)
		},
	}
	f.add(cmd)
	return cmd
}

// warnNotAgent says on stderr when the token is not an agent token (or
// cannot be checked): the assistant then acts with every verb the token
// holds, agent_disabled_verbs aside.
func warnNotAgent(ctx context.Context, c *api.Client, stderr io.Writer) {
	me, err := c.Me(ctx)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "svc mcp: the token could not be checked (%v); every tool will fail until it is right\n", err)
	case me.Token == nil:
		fmt.Fprintln(stderr, "svc mcp: no token: tools call the API signed in as no one")
	case !me.Token.Agent:
		fmt.Fprintf(stderr, "svc mcp: warning: token %s is not an agent token, so host policy's agent_disabled_verbs does not apply to the assistant; "+
			"mint one with `svc tokens create --agent` (or POST /api/v1/tokens {\"name\": \"assistant\", \"agent\": true}) and use it instead\n", me.Token.ID)
	}
}

// toolRefs are the tool server's tools, for the reference.
func toolRefs() []server.ToolRef {
	var out []server.ToolRef
	for _, r := range toolserver.Refs(operations()) {
		out = append(out, server.ToolRef{Name: r.Name, Summary: r.Summary, Endpoint: r.Endpoint, ReadOnly: r.ReadOnly, Destructive: r.Destructive, Idempotent: r.Idempotent})
	}
	return out
}
