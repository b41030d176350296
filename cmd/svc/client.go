package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/api"
)

// clientFlags are what every API client command is given: the server's
// address and a token (flags, else SVC_ADDR and SVC_TOKEN, else what
// `svc login` stored), and the output format.
type clientFlags struct {
	addr, token, output string
}

// add declares the flags on cmd and its subcommands.
func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.addr, "addr", "", "the server's address, such as http://localhost:8080 (default $SVC_ADDR, else svc login's)")
	cmd.PersistentFlags().StringVar(&f.token, "token", "", "an API token (default $SVC_TOKEN, else svc login's)")
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "table", "table, or json for the API's JSON unchanged")
}

// client returns the API client the flags, the environment and the config
// file name; a missing address or a bad output format is a usage error
// (exit 2).
func (f *clientFlags) client() (*api.Client, error) {
	if f.output != "table" && f.output != "json" {
		return nil, usageError("--output is table or json, not %q", f.output)
	}
	var file cliConfig
	if path, err := cliConfigPath(); err == nil {
		if file, err = loadConfig(path); err != nil {
			return nil, err
		}
	}
	addr, token := resolve(f.addr, f.token, os.Getenv("SVC_ADDR"), os.Getenv("SVC_TOKEN"), file)
	if addr == "" {
		return nil, usageError("no server address: run svc login, or set --addr or SVC_ADDR")
	}
	c, err := api.New(addr, api.WithToken(token))
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return c, nil
}

// printer is the printer of the command's stdout in the flags' format.
func (f *clientFlags) printer(cmd *cobra.Command) printer {
	return newPrinter(cmd.OutOrStdout(), f.output)
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

// app is the client and the app a command names (by ID or slug), with the
// API's answer for it; a refusal is the command's failure.
func (f *clientFlags) app(cmd *cobra.Command, ref string) (*api.Client, api.App, json.RawMessage, error) {
	c, err := f.client()
	if err != nil {
		return nil, api.App{}, nil, err
	}
	a, raw, err := findApp(cmd.Context(), c, ref)
	if err != nil {
		return nil, api.App{}, nil, refusal(cmd.ErrOrStderr(), err)
	}
	return c, a, raw, nil
}
