package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/api"
)

// clientFlags are what every API client command is given: the server's
// address and a token (flags, else SVC_ADDR and SVC_TOKEN), and the output
// format.
type clientFlags struct {
	addr, token, output string
}

// add declares the flags on cmd and its subcommands.
func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.addr, "addr", "", "the server's address, such as http://localhost:8080 (default $SVC_ADDR)")
	cmd.PersistentFlags().StringVar(&f.token, "token", "", "an API token (default $SVC_TOKEN)")
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "table", "table, or json for the API's JSON unchanged")
}

// client returns the API client the flags name; a missing address or a
// bad output format is a usage error (exit 2).
func (f *clientFlags) client() (*api.Client, error) {
	addr, token := f.addr, f.token
	if addr == "" {
		addr = os.Getenv("SVC_ADDR")
	}
	if token == "" {
		token = os.Getenv("SVC_TOKEN")
	}
	if f.output != "table" && f.output != "json" {
		return nil, &exitError{code: 2, err: fmt.Errorf("--output is table or json, not %q", f.output)}
	}
	if addr == "" {
		return nil, &exitError{code: 2, err: errors.New("no server address: set --addr or SVC_ADDR")}
	}
	c, err := api.New(addr, api.WithToken(token))
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return c, nil
}

// refusal turns an API error into the command's failure: code, message
// and remedy on stderr (through main), and exit 1. details.dependents, when
// the refusal names them, are printed first, one a line.
func refusal(stderr io.Writer, err error) error {
	var e *api.Error
	if !errors.As(err, &e) {
		return &exitError{code: 1, err: err}
	}
	if deps, ok := e.Details["dependents"].([]any); ok {
		for _, d := range deps {
			if m, ok := d.(map[string]any); ok {
				fmt.Fprintf(stderr, "  %v: %v (%v)\n", m["what"], m["message"], m["remedy"])
			}
		}
	}
	return &exitError{code: 1, err: e}
}
