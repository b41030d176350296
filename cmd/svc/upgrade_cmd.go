package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/api"
	"github.com/svchost/svc/internal/upgrade"
)

// newUpgradeCmd is svc upgrade FILE: upload a new binary to the server
// (POST /api/v1/upgrade) and follow the upgrade (GET /api/v1/upgrade)
// until it is done or has failed; with its subcommands sign and keygen for
// signed upgrades. The generator adds svc upgrade get.
func newUpgradeCmd() *cobra.Command {
	var f clientFlags
	var sigFile string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "upgrade FILE",
		Short: "Upgrade the server in place to the svc binary FILE, and follow it until done or rolled back",
		Long: `Upload the svc binary FILE to the server (POST /api/v1/upgrade, verb
install.adapters.manage) and follow the upgrade (GET /api/v1/upgrade) until it
is done (prints from → to) or failed (prints the reason and exits 1). The
server checks the binary, swaps it in, restarts on it and rolls it back if it
does not become ready; see docs/upgrade.md.

When the server has upgrade.signing_public_key set, give the signature made
with svc upgrade sign: --signature FILE.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			call := api.Call{Query: url.Values{}, ContentType: "application/octet-stream"}
			if sigFile != "" {
				sig, err := os.ReadFile(sigFile)
				if err != nil {
					return usageError("--signature: %v", err)
				}
				call.Query.Set("signature", strings.TrimSpace(string(sig)))
			}
			file, err := os.Open(args[0])
			if err != nil {
				return usageError("%v", err)
			}
			defer file.Close()
			call.Upload = file
			ans, err := c.Do(cmd.Context(), operation("upgrade_start"), call)
			if err != nil {
				return refusal(cmd.ErrOrStderr(), err)
			}
			var started struct{ Upgrade upgrade.Status }
			if err := json.Unmarshal(ans.Body, &started); err != nil {
				return fmt.Errorf("the answer: %w", err)
			}
			p := f.printer(cmd)
			if !wait {
				return p.rawOr(ans.Body, "upgrade %s: %s → %s, %s\n", started.Upgrade.ID, started.Upgrade.From, started.Upgrade.To, started.Upgrade.State)
			}
			progress := func(upgrade.Status) {}
			if started.Upgrade.State == upgrade.StateRolling {
				order := make([]string, len(started.Upgrade.Nodes))
				for i, n := range started.Upgrade.Nodes {
					order[i] = n.ID
				}
				_ = p.line("upgrade %s: %s → %s accepted; the cluster's %d servers upgrade one at a time (%s)", started.Upgrade.ID, started.Upgrade.From, started.Upgrade.To, len(order), strings.Join(order, ", "))
				progress = rolloutProgress(p)
			} else {
				_ = p.line("upgrade %s: %s → %s accepted; the server restarts on it", started.Upgrade.ID, started.Upgrade.From, started.Upgrade.To)
			}
			st, raw, err := followUpgrade(cmd.Context(), c, started.Upgrade.ID, timeout, progress)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if p.json {
				if err := p.raw(raw); err != nil {
					return err
				}
			}
			if st.State == upgrade.StateFailed {
				reason := ""
				if st.Reason != nil {
					reason = *st.Reason
				}
				if started.Upgrade.State == upgrade.StateRolling {
					var done []string
					for _, n := range st.Nodes {
						if n.State == upgrade.StepDone {
							done = append(done, n.ID)
						}
					}
					return &exitError{code: 1, err: fmt.Errorf("rollout %s stopped: %s; servers on %s: %s, the others run their previous version", st.ID, reason, st.To, cmpOr(strings.Join(done, ", "), "none"))}
				}
				return &exitError{code: 1, err: fmt.Errorf("upgrade %s failed and was rolled back; %s still runs: %s", st.ID, st.From, reason)}
			}
			if !p.json {
				return p.line("upgraded: %s → %s", st.From, st.To)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&sigFile, "signature", "", "file holding the binary's signature (svc upgrade sign)")
	cmd.Flags().BoolVar(&wait, "wait", true, "follow the upgrade until done or failed (--wait=false: return once accepted)")
	cmd.Flags().DurationVar(&timeout, "timeout", 20*time.Minute, "how long to follow the upgrade (a cluster's servers upgrade one after another)")
	cmd.AddCommand(newUpgradeSignCmd(), newUpgradeKeygenCmd())
	return calls(cmd, "upgrade_start", "upgrade_get")
}

// followUpgrade polls GET /api/v1/upgrade until upgrade id is done or
// failed; the server does not answer while it restarts, which is waited
// through.
func followUpgrade(ctx context.Context, c *api.Client, id string, timeout time.Duration, progress func(upgrade.Status)) (upgrade.Status, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		ans, err := c.Do(actx, operation("upgrade_get"), api.Call{})
		acancel()
		if err == nil {
			var cur struct{ Upgrade *upgrade.Status }
			if err = json.Unmarshal(ans.Body, &cur); err == nil && cur.Upgrade != nil && cur.Upgrade.ID == id {
				progress(*cur.Upgrade)
				if cur.Upgrade.State == upgrade.StateDone || cur.Upgrade.State == upgrade.StateFailed {
					return *cur.Upgrade, ans.Body, nil
				}
			}
		}
		if err != nil {
			var e *api.Error
			if errors.As(err, &e) && e.Code != "STORE_UNAVAILABLE" {
				return upgrade.Status{}, nil, err
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return upgrade.Status{}, nil, fmt.Errorf("upgrade %s did not finish within %s (last: %v); see GET /api/v1/upgrade", id, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// rolloutProgress prints each server's step of a rollout as it changes.
func rolloutProgress(p printer) func(upgrade.Status) {
	seen := map[string]string{}
	return func(st upgrade.Status) {
		for _, n := range st.Nodes {
			if seen[n.ID] == n.State || n.State == upgrade.StepPending {
				continue
			}
			seen[n.ID] = n.State
			_ = p.line("  %s: %s", n.ID, n.State)
		}
	}
}

func newUpgradeSignCmd() *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "sign --key KEYFILE FILE",
		Short: "Print the signature of the svc binary FILE for a server with upgrade.signing_public_key",
		Long: `Print the base64 Ed25519 signature over the SHA-256 digest of FILE, made with
the private key in KEYFILE (base64, as svc upgrade keygen prints it). Nothing
is sent anywhere. Save it to a file and give it to svc upgrade --signature.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return usageError("--key KEYFILE is required")
			}
			text, err := os.ReadFile(keyFile)
			if err != nil {
				return usageError("--key: %v", err)
			}
			priv, err := upgrade.ParsePrivateKey(string(text))
			if err != nil {
				return usageError("--key %s: %v", keyFile, err)
			}
			file, err := os.Open(args[0])
			if err != nil {
				return usageError("%v", err)
			}
			defer file.Close()
			h := sha256.New()
			if _, err := io.Copy(h, file); err != nil {
				return &exitError{code: 1, err: err}
			}
			var digest [32]byte
			copy(digest[:], h.Sum(nil))
			_, err = fmt.Fprintln(cmd.OutOrStdout(), upgrade.Sign(priv, digest))
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "file holding the base64 Ed25519 private key")
	return cmd
}

func newUpgradeKeygenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "keygen",
		Short: "Make a signing key pair for upgrades: prints the public key (for upgrade.signing_public_key) and the private key (keep it secret)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pub, priv, err := upgrade.GenerateKey()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "public_key: %s\nprivate_key: %s\n", pub, priv)
			return err
		},
	}
}
