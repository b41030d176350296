package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svchost/svc/api"
)

// newLoginCmd is `svc login`: sign in with a password and keep a
// delegated token, or keep a token made elsewhere after checking it.
func newLoginCmd() *cobra.Command {
	var addr, username, token string
	var passwordStdin, tokenStdin bool
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign in and keep a token for the other commands",
		Long:  "Sign in (POST /api/v1/sessions), mint a delegated token (POST /api/v1/tokens) and keep it with the address in the user's config directory; --token keeps an existing token after checking it (GET /api/v1/me).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, file, err := keptConfig()
			if err != nil {
				return err
			}
			addr = firstOf(addr, os.Getenv("SVC_ADDR"), file.Addr)
			if addr == "" {
				return usageError("no server address: give --addr, such as --addr http://localhost:8080")
			}
			in := bufio.NewReader(cmd.InOrStdin())
			if tokenStdin {
				if token != "" {
					return usageError("--token and --token-stdin: give one")
				}
				if token, err = readLine(in); err != nil {
					return usageError("--token-stdin: %v", err)
				}
			}
			c, err := api.New(addr, api.WithToken(token))
			if err != nil {
				return usageError("%v", err)
			}
			ctx := cmd.Context()
			var who, kept string
			if token != "" {
				me, err := c.Me(ctx)
				if err != nil {
					return refusal(cmd.ErrOrStderr(), err)
				}
				who, kept = describeMe(me), "the token given"
			} else {
				if username == "" {
					if username, err = prompt(cmd, in, "Username: ", false); err != nil {
						return err
					}
				}
				var password string
				if passwordStdin || !isTerminal(cmd.InOrStdin()) {
					password, err = readLine(in)
				} else {
					password, err = prompt(cmd, in, "Password: ", true)
				}
				if err != nil {
					return usageError("no password: %v", err)
				}
				u, err := c.SignIn(ctx, username, password)
				if err != nil {
					return refusal(cmd.ErrOrStderr(), err)
				}
				host, _ := os.Hostname()
				t, secret, err := c.CreateToken(ctx, api.NewToken{Name: "svc CLI on " + cmpOr(host, "this machine")}, false)
				if err != nil {
					return refusal(cmd.ErrOrStderr(), err)
				}
				if err := c.SignOut(ctx); err != nil { // the token is what stays
					fmt.Fprintln(cmd.ErrOrStderr(), "svc: ending the sign-in session:", err)
				}
				token, who, kept = secret, u.Username, fmt.Sprintf("a new token %q (%s)", t.Name, t.ID)
			}
			if err := saveConfig(path, cliConfig{Addr: addr, Token: token}); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Signed in to %s as %s; %s is kept in %s\n", addr, who, kept, path)
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "the server's address, such as http://localhost:8080 (default $SVC_ADDR, else the one kept)")
	cmd.Flags().StringVarP(&username, "username", "u", "", "the account's username (asked for when not given)")
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from stdin's first line (also when stdin is not a terminal)")
	cmd.Flags().StringVar(&token, "token", "", "keep this existing API token instead of signing in (it shows in the process list: prefer --token-stdin)")
	cmd.Flags().BoolVar(&tokenStdin, "token-stdin", false, "keep the API token read from stdin's first line instead of signing in")
	return cmd
}

// newLogoutCmd is `svc logout`: revoke the kept token and forget it.
func newLogoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Revoke the token svc login kept and forget it",
		Long:  "Revoke the token svc login kept (DELETE /api/v1/tokens/{tokenID}) and remove it from the user's config directory.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, file, err := keptConfig()
			if err != nil {
				return err
			}
			if file.Token == "" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "Not signed in: nothing kept in", path)
				return err
			}
			revokeErr := revokeKept(cmd, file)
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if revokeErr != nil {
				return &exitError{code: 1, err: fmt.Errorf("removed the token from %s, but the server did not revoke it: %w; revoke it from another session (svc tokens delete, or DELETE /api/v1/tokens/{tokenID})", path, revokeErr)}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Signed out of %s: the token is revoked and removed from %s\n", file.Addr, path)
			return err
		},
	}
}

// revokeKept revokes the kept token with itself; a token the server no
// longer takes is already as good as revoked.
func revokeKept(cmd *cobra.Command, file cliConfig) error {
	c, err := api.New(file.Addr, api.WithToken(file.Token))
	if err != nil {
		return err
	}
	me, err := c.Me(cmd.Context())
	if api.IsCode(err, "AUTH_INVALID") || api.IsCode(err, "AUTH_REQUIRED") {
		return nil
	}
	if err != nil {
		return err
	}
	if me.Token == nil {
		return errors.New("the server does not say which token this is")
	}
	return c.RevokeToken(cmd.Context(), me.Token.ID)
}

// describeMe names the caller for people: the user, or the token.
func describeMe(me api.Me) string {
	switch {
	case me.User != nil:
		return me.User.Username
	case me.Token != nil:
		return "token " + me.Token.Name
	}
	return "an unknown caller"
}

// readLine reads one line, without its line ending; an empty one is an
// error.
func readLine(in *bufio.Reader) (string, error) {
	s, err := in.ReadString('\n')
	s = strings.TrimRight(s, "\r\n")
	if s == "" {
		if err == nil || err == io.EOF {
			err = errors.New("nothing on stdin")
		}
		return "", err
	}
	return s, nil
}

// prompt asks on stderr and reads the answer from the terminal; secret
// answers are not echoed. Without a terminal it is a usage error.
func prompt(cmd *cobra.Command, in *bufio.Reader, question string, secret bool) (string, error) {
	f, ok := cmd.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", usageError("stdin is not a terminal: give --username, and the password on stdin")
	}
	fmt.Fprint(cmd.ErrOrStderr(), question)
	if !secret {
		return readLine(in)
	}
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(cmd.ErrOrStderr())
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// keptConfig is the config file's path and what it holds.
func keptConfig() (string, cliConfig, error) {
	path, err := cliConfigPath()
	if err != nil {
		return "", cliConfig{}, err
	}
	file, err := loadConfig(path)
	return path, file, err
}
