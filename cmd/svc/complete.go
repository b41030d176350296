package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/api"
)

// completeTimeout bounds asking the server for app names while a shell
// waits for completions.
const completeTimeout = 3 * time.Second

// completeApps completes a command's APP argument (its first) with the
// slugs of the apps the caller can see, each described by its name, and
// their IDs once what is typed starts one. It asks the server the flags,
// the environment or svc login name; when there is none, or the server
// refuses or does not answer in time, it offers nothing and says nothing
// (a shell's completion must never print errors).
func completeApps(f *clientFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cf := f
		if cf == nil {
			cf = flagsOf(cmd)
		}
		c, err := cf.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		defer cancel()
		return appCompletions(ctx, c, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// appCompletions lists the apps' slugs (and IDs, when toComplete starts
// one) that start with toComplete; as many as were listed when the
// server stops answering.
func appCompletions(ctx context.Context, c *api.Client, toComplete string) []cobra.Completion {
	var out []cobra.Completion
	for cursor := ""; ; {
		page, _, err := c.Apps(ctx, cursor, 500)
		if err != nil {
			return out
		}
		for _, a := range page.Items {
			if strings.HasPrefix(a.Slug, toComplete) {
				out = append(out, cobra.CompletionWithDesc(a.Slug, a.Name))
			}
			if toComplete != "" && strings.HasPrefix(a.ID, toComplete) {
				out = append(out, cobra.CompletionWithDesc(a.ID, a.Slug))
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}

// completeAppArgs gives every command whose first argument is an APP
// (its usage line reads "… APP …") and that completes nothing yet the
// completion of app slugs and IDs: the commands declared elsewhere get it
// without each naming it.
func completeAppArgs(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if fields := strings.Fields(c.Use); c.ValidArgsFunction == nil && len(fields) > 1 && fields[1] == "APP" {
			c.ValidArgsFunction = completeApps(nil)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
