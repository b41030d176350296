package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// newAdaptersCmd is `svc adapters`: list the adapters, delete one.
func newAdaptersCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "adapters",
		Short: "List and delete the installation's adapters (GET/DELETE /api/v1/adapters)",
		Args:  cobra.NoArgs,
	}
	f.add(cmd)
	cmd.AddCommand(calls(&cobra.Command{
		Use:   "list",
		Short: "List the configured adapters and the embedded defaults (GET /api/v1/adapters)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			page, raw, err := c.Adapters(cmd.Context(), "", 500)
			if err != nil {
				return refusal(cmd.ErrOrStderr(), err)
			}
			out := cmd.OutOrStdout()
			if f.output == "json" {
				_, err := fmt.Fprintf(out, "%s\n", raw)
				return err
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ADAPTER_ID\tCATEGORY\tKIND\tORIGIN\tPRIMARY\tLOADED\tSTATE")
			for _, a := range page.Items {
				state := "current"
				switch {
				case a.Deleted:
					state = "deleted, until the restart"
				case a.PendingRestart:
					state = "pending restart"
				case a.Error != nil:
					state = "failed: " + *a.Error
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\t%v\t%s\n", a.AdapterID, a.Category, a.Kind, a.Origin, a.Primary, a.Loaded, state)
			}
			if page.RestartNeeded {
				fmt.Fprintln(w, "(a restart is needed to apply changes: POST /api/v1/restart)")
			}
			return w.Flush()
		},
	}, "adapters_list"))
	cmd.AddCommand(calls(&cobra.Command{
		Use:   "delete ADAPTER_ID",
		Short: "Delete a configured adapter that nothing depends on",
		Long:  "Delete a configured adapter nothing depends on (DELETE /api/v1/adapters/{id}); a refusal names what depends on it.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := c.DeleteAdapter(cmd.Context(), args[0]); err != nil {
				return refusal(cmd.ErrOrStderr(), err)
			}
			if f.output == "json" {
				return nil // 204: the API answers nothing
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted adapter %s; it stays loaded until the next restart (POST /api/v1/restart)\n", args[0])
			return err
		},
	}, "adapters_delete"))
	return cmd
}
