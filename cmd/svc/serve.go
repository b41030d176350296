package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/idempotency"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/operator"
	"github.com/svchost/svc/internal/password"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/schema"
	"github.com/svchost/svc/internal/telemetry"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/server"
)

func newServeCmd(root *cobra.Command) *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a server: the API, the console and the edge, on the embedded defaults or as a cluster node",
		Long: `Run a server. Configuration comes from SVC_* environment variables, which win
over the YAML file named with --config, which wins over the defaults.
GET /api/v1/config shows every setting with its value and origin.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(config.LoadArgs{Env: os.Environ(), File: configPath})
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("configuration refused; nothing was started:\n%w", err)}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serve(ctx, cfg, cmd.ErrOrStderr(), commandRefs(root))
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "YAML configuration file")
	return cmd
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Log.Level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs a server until ctx ends, then drains requests in flight and
// shuts the store down.
func serve(ctx context.Context, cfg *config.Config, logw io.Writer, commands []server.CommandRef) error {
	log := newLogger(cfg, logw)
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	now := func() time.Time { return time.Now().UTC() }

	metrics := telemetry.New()
	store, err := raftstore.Open(raftstore.Config{
		NodeID:   cfg.Cluster.NodeID,
		Dir:      cfg.RaftDir(),
		RaftAddr: cfg.Cluster.RaftAddr,
		Peers:    peers(cfg.Cluster.Peers),
		Secret:   []byte(cfg.Cluster.Secret),
		Tables:   schema.Tables(),
		Logger:   log,
		Metrics:  metrics,
		Timing: raftstore.Timing{
			SnapshotThreshold: cfg.Cluster.SnapshotThreshold,
			SnapshotInterval:  cfg.Cluster.SnapshotInterval,
			TrailingLogs:      cfg.Cluster.TrailingLogs,
		},
	})
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Warn("store shutdown", "err", err)
		}
	}()
	cfg.SetNodeID(store.NodeID())
	metrics.WatchStore(store.Status)

	ops := operator.New(store, store.NodeID(), now)
	idem := idempotency.New(store, now)
	pol := policy.NewService(store, cfg.Policy, now)
	ident := identity.New(identity.Deps{
		Store:  store,
		Hasher: password.NewHasher(password.DefaultParams, 2*runtime.GOMAXPROCS(0)),
		Policy: pol,
		// Ten wrong passwords per account, and fifty per client address,
		// in fifteen minutes; then the caller waits.
		AccountLimit: throttle.New(10, 15*time.Minute, now, 100_000),
		ClientLimit:  throttle.New(50, 15*time.Minute, now, 100_000),
		Now:          now,
		Logger:       log,
	})
	store.RunWhileLeader("idempotency-expiry", idem.ExpiryLoop(10*time.Minute))
	store.RunWhileLeader("probe-expiry", ops.ExpiryLoop(5*time.Minute))
	store.RunWhileLeader("session-expiry", raftstore.Every(10*time.Minute, ident.ExpireSessions))
	firstRun(ctx, ident, cfg.Admin.Password, log)

	api, err := server.New(server.Deps{
		Logger:         log,
		Version:        version,
		Config:         cfg,
		Identity:       ident,
		Policy:         pol,
		Facts:          store,
		Operator:       ops,
		Idempotency:    idem,
		Ready:          store,
		Metrics:        metrics,
		MetricsHandler: metrics.Handler(),
		Commands:       commands,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Addr)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("listen on %s (SVC_SERVER_ADDR): %w", cfg.Server.Addr, err)}
	}
	base := "http://" + displayAddr(ln.Addr())
	log.Info("svc is serving", "console", base+"/", "api", base+"/api/v1", "version", version,
		"node_id", store.NodeID(), "work_dir", cfg.Server.WorkDir, "store", cfg.RaftDir())
	if err := api.Serve(ctx, ln, cfg.Server.ShutdownTimeout); err != nil {
		return err
	}
	log.Info("stopped serving; shutting the store down")
	return nil
}

// firstRun creates the administrator "admin" with SVC_ADMIN_PASSWORD when no
// account has ever existed; otherwise the installation waits for setup. The
// variable is read on the first run only. It runs in the background, trying
// again until the store has a leader, so that a cluster's nodes can start
// one at a time.
func firstRun(ctx context.Context, ident *identity.Service, pw string, log *slog.Logger) {
	if pw == "" {
		return
	}
	go func() {
		for attempt := 1; ; attempt++ {
			created, err := ident.FirstRun(ctx, pw)
			switch {
			case err == nil && created:
				log.Info("created the administrator account \"admin\" with the password in SVC_ADMIN_PASSWORD")
				return
			case err == nil:
				return
			case errcode.CodeOf(err) != errcode.StoreUnavailable:
				log.Error("SVC_ADMIN_PASSWORD: the administrator account could not be created", "err", err)
				return
			case attempt%10 == 0:
				log.Warn("waiting for a leader to create the administrator account", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

func peers(ps []config.Peer) []raftstore.Peer {
	out := make([]raftstore.Peer, len(ps))
	for i, p := range ps {
		out[i] = raftstore.Peer{ID: p.ID, Addr: p.Addr}
	}
	return out
}

// displayAddr turns a listener address into one a browser can open.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() || ip.IsLoopback() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
