package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/api"
)

// newAppsCmd is `svc apps`: list, show, create and delete apps.
func newAppsCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "apps",
		Short: "Apps: list, show, create, update, start, stop, delete (an app is named by its ID or slug)",
		Long:  "List, show, create and delete apps (/api/v1/apps); an app is named by its ID or its slug.",
		Args:  cobra.NoArgs,
	}
	f.add(cmd)
	var cursor string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "The apps you can administer",
		Long:  "The apps you can administer (GET /api/v1/apps); a table of every page, or with --output json the one page asked for (--cursor, --limit).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			p := f.printer(cmd)
			if p.json {
				_, raw, err := c.Apps(cmd.Context(), cursor, limit)
				if err != nil {
					return refusal(cmd.ErrOrStderr(), err)
				}
				return p.raw(raw)
			}
			var rows [][]string
			for next := cursor; ; {
				page, _, err := c.Apps(cmd.Context(), next, limit)
				if err != nil {
					return refusal(cmd.ErrOrStderr(), err)
				}
				for _, a := range page.Items {
					rows = append(rows, []string{a.Slug, a.Name, p.state(a.State), pinned(a.Pinned), deref(a.URL), a.ID})
				}
				if next = page.NextCursor; next == "" || limit > 0 {
					break
				}
			}
			return p.table([]string{"SLUG", "NAME", "STATE", "REVISION", "URL", "ID"}, rows)
		},
	}
	list.Flags().StringVar(&cursor, "cursor", "", "start after this app (a page's next_cursor)")
	list.Flags().IntVar(&limit, "limit", 0, "at most this many apps: one page (default: every app in the table, the server's page size in JSON)")
	get := &cobra.Command{
		Use:   "get APP",
		Short: "An app's name, slug, source, state and pinned revision",
		Long:  "An app's name, slug, source, state and pinned revision (GET /api/v1/apps/{appID}).",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, a, raw, err := f.app(cmd, args[0])
			if err != nil {
				return err
			}
			p := f.printer(cmd)
			if p.json {
				return p.raw(raw)
			}
			return printApp(p, a)
		},
	}
	var n api.NewApp
	var repo api.NewRepository
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an app in draft, from a git repository with --repo",
		Long:  "Create an app in draft (POST /api/v1/apps), from a git repository with --repo; you get an owner grant on it.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			n.Name = args[0]
			if repo.Repository != "" {
				n.Source = &repo
			} else if repo.Ref != "" || repo.Subdir != "" {
				return usageError("--ref and --subdir go with --repo")
			}
			ans, raw, err := c.CreateApp(cmd.Context(), n)
			if err != nil {
				return refusal(cmd.ErrOrStderr(), err)
			}
			p := f.printer(cmd)
			if p.json {
				return p.raw(raw)
			}
			return printApp(p, ans.App)
		},
	}
	create.Flags().StringVar(&n.Slug, "slug", "", "the app's slug: lowercase letters, digits and dashes (default: made from the name)")
	create.Flags().StringVar(&repo.Repository, "repo", "", "a git repository to clone and detect (its URL)")
	create.Flags().StringVar(&repo.Ref, "ref", "", "the branch, tag or commit of --repo (default: its default branch)")
	create.Flags().StringVar(&repo.Subdir, "subdir", "", "the app's directory inside --repo")
	var backup, force bool
	del := &cobra.Command{
		Use:   "delete APP",
		Short: "Delete an app, keeping a final copy of its volumes unless --force",
		Long: "Delete an app (DELETE /api/v1/apps/{appID}). An app's volumes are kept as a final copy " +
			"(?backup=true) unless --force discards their data, as guarantee 4 asks of the CLI.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, a, _, err := f.app(cmd, args[0])
			if err != nil {
				return err
			}
			keep := !force || cmd.Flags().Changed("backup") && backup // both given: the API refuses the mix
			if err := c.DeleteApp(cmd.Context(), a.ID, keep, force); err != nil {
				return refusal(cmd.ErrOrStderr(), err)
			}
			return f.printer(cmd).line("Deleted app %s (%s)", a.Slug, a.ID) // 204: nothing in JSON
		},
	}
	del.Flags().BoolVar(&backup, "backup", true, "keep a final copy of the app's volumes (the default; --force instead discards them)")
	del.Flags().BoolVar(&force, "force", false, "discard the app's volumes without a copy")
	cmd.AddCommand(calls(list, "apps_list"), calls(get, "apps_get"), calls(create, "apps_create"), calls(del, "apps_delete"))
	return cmd
}

// findApp finds an app by its ID or its slug (the API names apps by ID
// only: a slug is looked up among the apps the caller can administer).
// raw is the API's answer for the app, as GET /apps/{appID} gives it.
func findApp(ctx context.Context, c *api.Client, ref string) (api.App, json.RawMessage, error) {
	id, err := appID(ctx, c, ref)
	if err != nil {
		return api.App{}, nil, err
	}
	ans, raw, err := c.App(ctx, id)
	return ans.App, raw, err
}

// appID is the ID of the app ref names: ref itself when it is an ID (IDs
// have an underscore, which slugs never do), else the ID of the app whose
// slug it is.
func appID(ctx context.Context, c *api.Client, ref string) (string, error) {
	if strings.Contains(ref, "_") {
		return ref, nil
	}
	id, found, err := c.AppBySlug(ctx, ref)
	if err == nil && !found {
		err = &api.Error{Status: 404, Code: "NOT_FOUND", Message: fmt.Sprintf("no app has the slug %q among the apps you can administer", ref),
			Remedy: "svc apps list shows their slugs and IDs"}
	}
	return id, err
}

func printApp(p printer, a api.App) error {
	src := "-"
	if s := a.Source; s != nil {
		src = s.Kind + " " + firstOf(s.Repository, s.Commit)
		if s.Ref != "" {
			src += " @" + s.Ref
		}
		if s.Subdir != "" {
			src += " in " + s.Subdir
		}
	}
	return p.fields("ID", a.ID, "Name", a.Name, "Slug", a.Slug, "State", p.state(a.State), "Desired", desiredOf(a),
		"Revision", pinned(a.Pinned), "Source", src, "URL", deref(a.URL), "Created", a.CreatedAt.Local().Format(time.DateTime))
}

// desiredOf is the state the app is meant to be in, and why svc itself
// stopped it when it did ("stopped (idle)").
func desiredOf(a api.App) string {
	if a.StoppedBecause != nil {
		return a.DesiredState + " (" + *a.StoppedBecause + ")"
	}
	return a.DesiredState
}

func pinned(p *api.AppPin) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(p.Revision)
}

func deref[T any](p *T) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}

// newStatusCmd is `svc status APP`.
func newStatusCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "status APP",
		Short: "An app's state, its workloads' health, and what keeps it from serving",
		Long:  "An app's state, the deployment and revision it runs, each workload's health, and what keeps it from serving (GET /api/v1/apps/{appID}/status).",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, a, _, err := f.app(cmd, args[0])
			if err != nil {
				return err
			}
			st, raw, err := c.Status(cmd.Context(), a.ID)
			if err != nil {
				return refusal(cmd.ErrOrStderr(), err)
			}
			p := f.printer(cmd)
			if p.json {
				return p.raw(raw)
			}
			if err := p.fields("App", a.Slug+" ("+a.ID+")", "State", p.state(st.State), "Desired", st.DesiredState,
				"Deployment", deref(st.DeploymentID), "Revision", deref(st.Revision), "URL", deref(a.URL)); err != nil {
				return err
			}
			if len(st.Workloads) > 0 {
				names := make([]string, 0, len(st.Workloads))
				for name := range st.Workloads {
					names = append(names, name)
				}
				slices.Sort(names)
				rows := make([][]string, 0, len(names))
				for _, name := range names {
					w := st.Workloads[name]
					run := "stopped"
					if w.Running {
						run = "running"
					}
					rows = append(rows, []string{name, p.state(run), p.state(w.Health), strconv.Itoa(w.Restarts), deref(w.ExitCode), w.Address})
				}
				_ = p.line("")
				if err := p.table([]string{"WORKLOAD", "RUNNING", "HEALTH", "RESTARTS", "LAST EXIT", "ADDRESS"}, rows); err != nil {
					return err
				}
			}
			if pr := st.Problem; pr != nil {
				_ = p.line("")
				return p.fields("Problem", pr.Code+": "+pr.Message, "Remedy", pr.Remedy)
			}
			return nil
		},
	}
	f.add(cmd)
	return cmd
}
