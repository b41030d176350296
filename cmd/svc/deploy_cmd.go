package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/api"
)

// newDeployCmd is `svc deploy APP`: deploy a revision, and with --follow
// show its output live and its outcome.
func newDeployCmd() *cobra.Command {
	var f clientFlags
	var revision uint64
	var follow bool
	cmd := &cobra.Command{
		Use:   "deploy APP",
		Short: "Deploy an app's pinned revision (or --revision N); --follow streams its log",
		Long: "Deploy the pinned revision, or --revision N (POST /api/v1/apps/{appID}/deployments); --follow shows the deploy's output live (GET …/deployments/{depID}/logs) and exits 1 unless it succeeds.\n\n" +
			"Deploy an app's pinned revision, or --revision N, with its current source.\n\n" +
			"With --follow the deploy's output is shown as it is written, then its outcome; the exit status is 1 unless it succeeded.\n" +
			"With --output json the API's answers are printed unchanged, one a line: the deployment, then with --follow each log event's data and the end event's data.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, a, _, err := f.app(cmd, args[0])
			if err != nil {
				return err
			}
			return deploy(cmd, f.printer(cmd), c, a, revision, follow)
		},
	}
	f.add(cmd)
	cmd.Flags().Uint64Var(&revision, "revision", 0, "the spec revision to deploy (default: the pinned one)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "show the deploy's output live, then its outcome")
	return cmd
}

// deploy deploys a's revision (0: the pinned one) and prints the
// deployment; with follow it shows the deploy's output live and fails
// (exit 1) unless it succeeded. svc deploy and svc launch share it.
func deploy(cmd *cobra.Command, p printer, c *api.Client, a api.App, revision uint64, follow bool) error {
	ctx := cmd.Context()
	d, raw, err := c.Deploy(ctx, a.ID, revision)
	if err != nil {
		return refusal(cmd.ErrOrStderr(), err)
	}
	if p.json {
		if err := p.raw(raw); err != nil {
			return err
		}
	} else {
		_ = p.line("Deploying %s revision %d: deployment %s, %s", a.Slug, d.Revision, d.ID, p.state(d.State))
		if d.ApprovalsRequired > 0 {
			_ = p.line("It waits for %d approval(s): %s; someone else holding app.deploy approves it with: svc deployments approve %s %s", d.ApprovalsRequired, strings.Join(d.ApprovalReasons, "; "), a.Slug, d.ID)
		}
	}
	if !follow {
		return nil
	}
	end, err := followDeploy(cmd, p, c, a.ID, a.Slug, d.ID)
	if err != nil {
		return err
	}
	if end.State == "succeeded" {
		return p.line("Deployment %s %s; svc status %s", d.ID, p.state(end.State), a.Slug)
	}
	why := deref(end.ErrorCode)
	if got, err := c.Deployment(ctx, a.ID, d.ID); err == nil && got.ErrorMessage != nil {
		why += ": " + *got.ErrorMessage
	}
	_ = p.line("Deployment %s %s", d.ID, p.state(end.State))
	return &exitError{code: 1, err: fmt.Errorf("deployment %s %s: %s", d.ID, end.State, why)}
}

// followDeploy shows a deployment's log as it is written (the API's event
// data unchanged with --output json) with its phase on the progress line,
// and returns how it ended. svc deploy, svc launch and svc deployments
// logs share it.
func followDeploy(cmd *cobra.Command, p printer, c *api.Client, appID, slug, depID string) (api.DeployEnd, error) {
	pr := newProgress(cmd, p)
	defer pr.done()
	phase := "queued"
	pr.step("Deploying " + slug + ": " + phase)
	return c.FollowDeployment(cmd.Context(), appID, depID, func(l *api.LogLine, _ *api.DeployEnd, raw json.RawMessage) error {
		if p.json {
			return p.raw(raw)
		}
		if l == nil {
			return nil
		}
		if next := deployPhase(phase, *l); next != phase {
			phase = next
			pr.step("Deploying " + slug + ": " + phase)
		}
		return pr.print(func() error { return p.line("%-6s | %s", l.Stream, l.Line) })
	})
}
