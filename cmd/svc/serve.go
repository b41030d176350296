package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/console"
	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/idempotency"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/idle"
	"github.com/svchost/svc/internal/operator"
	"github.com/svchost/svc/internal/password"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/schema"
	"github.com/svchost/svc/internal/security"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/telemetry"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/internal/upgrade"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler/nomad"
	"github.com/svchost/svc/scheduler/process"
	"github.com/svchost/svc/server"
	"github.com/svchost/svc/toolserver"
)

func newServeCmd(root *cobra.Command) *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a server: the API, the console and the edge, on the embedded defaults or as a cluster node",
		Long: `Run a server. Configuration comes from SVC_* environment variables, which win
over the YAML file named with --config, which wins over the defaults.
GET /api/v1/config shows every setting with its value and origin.
POST /api/v1/restart restarts the server in place: it reads the file again,
but not the environment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The environment is read once; every restart loads the file
			// again over this same snapshot.
			env := os.Environ()
			load := func() (*config.Config, error) {
				cfg, err := config.Load(config.LoadArgs{Env: env, File: configPath})
				if err == nil {
					err = checkDeclaredAdapters(cfg)
				}
				if err != nil {
					return nil, err
				}
				return cfg, nil
			}
			cfg, err := load()
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("configuration refused; nothing was started:\n%w", err)}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serve(ctx, cfg, load, cmd.ErrOrStderr(), commandRefs(root))
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
//
// It runs in generations. A restart (POST /api/v1/restart) ends the current
// one as ctx ending would (the server stops taking requests and finishes
// those in flight, then the store closes), and the next begins: reload
// loads the configuration again, build reopens the store and builds every
// service anew, and the new server takes over the same listening socket.
// A configuration that has become invalid is logged and the previous one
// kept, so that a restart never takes the service down.
func serve(ctx context.Context, cfg *config.Config, reload func() (*config.Config, error), logw io.Writer, commands []server.CommandRef) error {
	ln, err := listen(cfg.Server.Addr, ctx.Done())
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("listen on %s (SVC_SERVER_ADDR): %w", cfg.Server.Addr, err)}
	}
	defer ln.Close()
	up := newUpgrades(cfg, logw)
	up.atStart(ln, newLogger(cfg, logw)) // may exec the previous binary
	procs, err := processRuntime(cfg)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer func() { _ = procs.Close() }() // the latest: an upgrade rolled back makes another
	reportIsolation(newLogger(cfg, logw), cfg, procs)
	var prev *generation
	var applied uint64 // the store's applied index when the previous generation ended
	for {
		gen, genCtx, rt, err := start(ctx, cfg, prev, logw, commands, procs, up, ln.Addr())
		if err != nil {
			return err
		}
		cfg = gen.cfg // the previous one when the reloaded one did not start
		rt.catchUp(genCtx, applied)
		// There is no console yet: the line names what is there.
		base := "http://" + displayAddr(ln.Addr())
		gen.log.Info("svc is serving", "api", base+"/api/v1", "reference", base+"/api/v1/reference", "version", version,
			"node_id", rt.nodeID, "work_dir", cfg.Server.WorkDir, "store", cfg.RaftDir(),
			"generation", gen.n, "started_at", gen.startedAt.Format(time.RFC3339Nano))
		go up.afterServing(genCtx, rt.store, rt.nodeID, gen.log)
		go rt.upgrade.Follow(genCtx) // this server's turns in cluster-wide upgrades
		err = rt.api.Serve(genCtx, ln.next(), cfg.Server.ShutdownTimeout)
		gen.stop()
		switch {
		case ctx.Err() != nil || !gen.restarting.Load():
			// The process ends, or serving failed on its own.
			if err == nil {
				gen.log.Info("stopped serving; shutting the store down")
			}
			rt.close()
			return err
		case err != nil:
			gen.log.Warn("restart: requests in flight did not finish in time and were cut", "err", err)
		}
		gen.log.Info("restart: stopped serving; shutting the store down")
		applied = rt.store.Status().AppliedIndex
		rt.close()
		if p := up.take(); p != nil {
			// Returns only when the new binary was rolled back.
			if procs, err = up.run(ctx, p, cfg, procs, ln, gen.log); err != nil {
				return err
			}
		}
		cfg = reloadConfig(reload, cfg, ln.Addr(), gen.log)
		prev = gen
	}
}

// generation is one run of the services, from the process's start or a
// restart to the next restart or the process's end.
type generation struct {
	n         int // 1 for the first
	cfg       *config.Config
	log       *slog.Logger
	startedAt time.Time // strictly later than the previous generation's
	commands  []server.CommandRef
	// procs is the process runtime, which outlives generations (but an
	// upgrade's trial, which stops the apps).
	procs *process.Runtime
	// upgrades drives in-place upgrades, across generations.
	upgrades *upgrades
	// artifacts is the nomad runtime's artifact store (nil, with
	// artifactsErr, when it could not open).
	artifacts    *nomad.Artifacts
	artifactsErr error
	// mainAddr is where the main listener (console and API) listens.
	mainAddr net.Addr
	// stop ends the generation's context: its server drains and returns.
	stop       context.CancelFunc
	restarting atomic.Bool
}

// newGeneration prepares the generation after prev (nil for the first) and
// its context, which ends with parent or a restart.
func newGeneration(parent context.Context, cfg *config.Config, prev *generation, logw io.Writer, commands []server.CommandRef) (*generation, context.Context) {
	g := &generation{n: 1, cfg: cfg, log: newLogger(cfg, logw), startedAt: time.Now().UTC().Truncate(time.Microsecond), commands: commands}
	if prev != nil {
		g.n = prev.n + 1
		if !g.startedAt.After(prev.startedAt) {
			g.startedAt = prev.startedAt.Add(time.Microsecond)
		}
	}
	ctx, stop := context.WithCancel(parent)
	g.stop = stop
	return g, ctx
}

// restart asks for the next generation and returns at once. The first call
// ends the generation's serving; later calls, while that restart is
// pending, do nothing.
func (g *generation) restart() {
	if g.restarting.CompareAndSwap(false, true) {
		g.log.Info("restart requested: finishing requests in flight, then reloading the config file and reopening the store")
		g.stop()
	}
}

// start builds the generation after prev on cfg. When cfg is a reloaded
// configuration that does not start, it logs why and builds on the
// previous generation's instead.
func start(parent context.Context, cfg *config.Config, prev *generation, logw io.Writer, commands []server.CommandRef, procs *process.Runtime, up *upgrades, mainAddr net.Addr) (*generation, context.Context, *runtime, error) {
	gen, ctx := newGeneration(parent, cfg, prev, logw, commands)
	gen.procs, gen.upgrades, gen.mainAddr = procs, up, mainAddr
	rt, err := build(ctx, gen)
	if err != nil && prev != nil && prev.cfg != cfg {
		gen.stop()
		gen.log.Error("restart: the reloaded configuration did not start; starting on the previous one", "err", err)
		gen, ctx = newGeneration(parent, prev.cfg, prev, logw, commands)
		gen.procs, gen.upgrades, gen.mainAddr = procs, up, mainAddr
		rt, err = build(ctx, gen)
	}
	if err != nil {
		gen.stop()
		return nil, nil, nil, err
	}
	return gen, ctx, rt, nil
}

// reloadConfig loads the configuration for a restart. A refused one is
// logged, problem by problem, and the current one kept.
func reloadConfig(reload func() (*config.Config, error), cur *config.Config, listening net.Addr, log *slog.Logger) *config.Config {
	next, err := reload()
	if err != nil {
		for _, problem := range strings.Split(err.Error(), "\n") {
			log.Error("restart: configuration refused", "problem", problem)
		}
		log.Error("restart: keeping the previous configuration")
		return cur
	}
	if next.Server.Addr != cur.Server.Addr {
		log.Warn("restart: server.addr changed; the socket stays where it is until the process starts again",
			"listening", listening.String(), "configured", next.Server.Addr)
	}
	return next
}

// runtime is what build made for one generation: the API over the
// services, and what to close when the generation ends.
type runtime struct {
	api     *server.Server
	store   *raftstore.Store
	upgrade *upgrade.Service
	nodeID  string
	log     *slog.Logger
	closers []closer
}

type closer struct {
	name  string
	close func() error
}

// onClose registers what the generation must close when it ends; close
// runs them in reverse order.
func (rt *runtime) onClose(name string, close func() error) {
	rt.closers = append(rt.closers, closer{name: name, close: close})
}

func (rt *runtime) close() {
	for i := len(rt.closers) - 1; i >= 0; i-- {
		if err := rt.closers[i].close(); err != nil {
			rt.log.Warn(rt.closers[i].name+" shutdown", "err", err)
		}
	}
	rt.closers = nil
}

// catchUpTimeout bounds how long a server waits for its store before it
// serves; a cluster without a leader may not let it catch up, and the
// server then serves anyway, as after a cold start.
const catchUpTimeout = 30 * time.Second

// catchUp waits, for up to catchUpTimeout, before a generation serves:
// until a restarted server's reopened store has applied index (what it had
// applied before the restart; 0 at the process's start), so that callers
// do not meet a state older than the one they left (their token unknown,
// say), and until a single node's store has caught up (replayed its own
// log), which it does by itself in moments. Connections wait in the
// socket's backlog meanwhile. A cluster node serves without it: until its
// store has caught up with the cluster /readyz says not ready and the rest
// answers STORE_UNAVAILABLE (raftstore's CaughtUp).
func (rt *runtime) catchUp(ctx context.Context, index uint64) {
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	if err := rt.store.WaitIndex(ctx, index); err != nil {
		rt.log.Warn("restart: serving before the store has caught up", "applied_index", rt.store.Status().AppliedIndex, "before_restart", index, "err", err)
	}
	if len(rt.store.Status().Servers) > 1 {
		return
	}
	if _, err := rt.store.ConsistentRead(ctx); err != nil {
		rt.log.Warn("serving before the store has replayed its log; requests answer STORE_UNAVAILABLE until it has", "err", err)
	}
}

// build opens the store and builds every service over it, and the API over
// them, for one generation; ctx ends with the generation. To add a service:
// build it here from gen.cfg, register with rt.onClose whatever it must
// release, start its leader loops on the store, and hand it to the server
// in server.Deps. If build fails, it closes what it opened.
func build(ctx context.Context, gen *generation) (_ *runtime, err error) {
	cfg, log := gen.cfg, gen.log
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	now := func() time.Time { return time.Now().UTC() }
	rt := &runtime{log: log}
	defer func() {
		if err != nil {
			rt.close()
		}
	}()

	metrics := telemetry.New()
	blobs := &blobRouter{workDir: cfg.Server.WorkDir}
	store, err := raftstore.Open(raftstore.Config{
		NodeID:   cfg.Cluster.NodeID,
		Dir:      cfg.RaftDir(),
		RaftAddr: cfg.Cluster.RaftAddr,
		Peers:    peers(cfg.Cluster.Peers),
		Secret:   []byte(cfg.Cluster.Secret),
		Tables:   schema.Tables(),
		Blobs:    blobs,
		Logger:   log,
		Metrics:  metrics,
		// Version-gated commands: this node announces its version.
		Version:         version,
		CompareVersions: upgrade.CompareVersions,
		// An upgrade's trial writes nothing the binary it would replace
		// cannot apply: the rollback must find a store that one reads.
		VersionFloor: upgrade.TrialFrom(),
		Timing: raftstore.Timing{
			SnapshotThreshold: cfg.Cluster.SnapshotThreshold,
			SnapshotInterval:  cfg.Cluster.SnapshotInterval,
			TrailingLogs:      cfg.Cluster.TrailingLogs,
		},
	})
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	rt.store = store
	rt.onClose("store", store.Close)
	// One artifact store per generation: the nomad runtime packs into it,
	// the main listener serves and takes its files, and the other servers
	// fetch from it. One that cannot open leaves the nomad runtime
	// failing to load, with the reason.
	gen.artifacts, gen.artifactsErr = nomadArtifacts(cfg, store)
	blobs.artifacts.Store(gen.artifacts)
	cfg.SetNodeID(store.NodeID())
	rt.nodeID = store.NodeID()
	metrics.WatchStore(store.Status)

	rt.upgrade = gen.upgrades.service(cfg, store, store.NodeID(), gen.restart, log)
	ops := operator.New(store, store.NodeID(), now)
	idem := idempotency.New(store, now)
	pol := policy.NewService(store, cfg.Policy, now)
	ident := identity.New(identity.Deps{
		Store:  store,
		Hasher: password.NewHasher(password.DefaultParams, 2*goruntime.GOMAXPROCS(0)),
		Policy: pol,
		// Ten wrong passwords per account and client address, fifty per
		// client address, and a hundred per account from addresses that
		// have not signed in to it in thirty days, in fifteen minutes;
		// then the caller waits (see internal/throttle).
		AccountLimit:    throttle.New(10, 15*time.Minute, now, 100_000),
		ClientLimit:     throttle.New(50, 15*time.Minute, now, 100_000),
		AccountAnyLimit: throttle.New(100, 15*time.Minute, now, 100_000),
		KnownClients:    throttle.NewRecent(30*24*time.Hour, now, 100_000),
		Now:             now,
		Logger:          log,
	})
	storage, err := buildStorage(ctx, rt, gen, store, now)
	if err != nil {
		return nil, err
	}
	signing, err := buildEdgeSigning(ctx, gen, store, storage.ring, now)
	if err != nil {
		return nil, err
	}
	specs := spec.NewService(store, now)
	det, sources, err := buildDetection(ctx, rt, gen, store, storage, pol, specs, now)
	if err != nil {
		return nil, err
	}
	blobs.sources.Store(sources)
	store.RunWhileLeader("idempotency-expiry", idem.ExpiryLoop(10*time.Minute))
	store.RunWhileLeader("probe-expiry", ops.ExpiryLoop(5*time.Minute))
	store.RunWhileLeader("session-expiry", raftstore.Every(10*time.Minute, ident.ExpireSessions))
	store.RunWhileLeader("app-session-expiry", raftstore.Every(10*time.Minute, ident.ExpireAppSessions))
	store.RunWhileLeader("spec-retention", raftstore.Every(time.Hour, specs.SweepRetention))
	// Security scans: requested ones run in the background on the server
	// asked; the leader scans after deploys and daily, and gates running
	// apps on min_security_score. The plan refuses deploys on the score.
	sec := security.New(security.Deps{Store: store, Checkouts: sources, Policy: pol, Databases: scannerDatabases{storage.adapters}, Screeners: scannerScreeners(storage.adapters),
		Context: ctx, Now: now, Log: log.With("component", "security")})
	rt.onClose("security scans", func() error { sec.Wait(); return nil })
	plans := plan.NewService(plan.Deps{Store: store, Specs: specs, Slots: storage.slots, Secrets: storage.secrets,
		Adapters: storage.adapters, Detections: det, Policy: pol, Security: sec})
	// Detection proposes what the plan's runtime can build.
	det.UseRuntimes(plans)
	sched := buildScheduler(gen, store, storage, specs, plans, sources, pol, metrics, now)
	sec.UseScheduler(sched, sched)
	store.RunWhileLeader("security-scans", sec.Check)
	bk, err := buildBackups(gen, store, storage, sched, now)
	if err != nil {
		return nil, err
	}
	// Every node keeps copies of the builds a new leader would run.
	go func() { _ = raftstore.Every(syncInterval, sched.SyncArtifacts)(ctx) }()
	// Before the server exists: see firstRun.
	if err := firstRun(ctx, ident, cfg.Admin.Password, len(store.Status().Servers) <= 1, log); err != nil {
		return nil, err
	}
	sharing := buildSharing(store, pol, storage.ring, now, log)
	subs := buildSubscriptions(gen, store, storage, pol, now)
	proxy, err := buildEdgeProxy(ctx, rt, gen, edgeParts{store: store, ident: ident, pol: pol, sched: sched, adapters: storage.adapters, signer: signing.signer, passcodes: sharing})
	if err != nil {
		return nil, err
	}
	// Idle apps: every server stores its edge's activity stamps now and
	// then; the leader warns, stops or deletes apps idle for their days.
	idleApps := idle.New(idle.Deps{Store: store, Stamps: proxy, Releases: sched, Stopper: sched, Deleter: bk, Now: now,
		Log: log.With("component", "idle")})
	go func() { _ = idleApps.Flushing(ctx) }()
	rt.onClose("idle activity", func() error { // before the store closes
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return idleApps.FlushAll(fctx)
	})
	store.RunWhileLeader("idle-apps", idleApps.Check)

	// The web console, embedded in the binary (console/dist).
	consoleUI, err := console.New()
	if err != nil {
		return nil, err
	}
	rt.api, err = server.New(server.Deps{
		Logger:         log,
		Version:        version,
		Config:         cfg,
		Identity:       ident,
		Sharing:        sharing,
		Policy:         pol,
		Apps:           storage.apps,
		Launcher:       storage.launcher,
		Detection:      det,
		Plans:          plans,
		Deploys:        sched,
		Approvals:      sched,
		DeployLogs:     sched,
		AppControl:     sched,
		Workloads:      sched,
		Capacity:       sched,
		Icons:          storage.icons,
		Secrets:        storage.secrets,
		Specs:          specs,
		Slots:          storage.slots,
		Volumes:        storage.volumes,
		Security:       sec,
		Deleter:        bk,
		Backups:        bk,
		Subscriptions:  subs,
		Sources:        sources,
		Adapters:       storage.adapters,
		Keyring:        storage.ring,
		EdgeKeys:       signing.keys,
		Facts:          store,
		Operator:       ops,
		History:        ops,
		Idempotency:    idem,
		Ready:          store,
		Metrics:        metrics,
		MetricsHandler: metrics.Handler(),
		Commands:       gen.commands,
		Tools:          toolRefs(),
		StartedAt:      gen.startedAt,
		Restart:        gen.restart,
		Upgrades:       rt.upgrade,
		Front:          withNomadArtifacts(gen.artifacts, proxy.Front),
		AppURLs:        appAddresses{proxy: proxy, ports: sched},
		Handoff:        proxy,
		Console:        consoleUI,
		// The tool server at /mcp: its tools call the API in process.
		MCP: func(apiHandler http.Handler) (http.Handler, error) {
			return toolserver.Handler(operations(), version, apiHandler, log.With("component", "mcp"))
		},
	})
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// keptListener is the process's listening socket, which every generation's
// server shares. Listening again at each restart would leave the port free
// for a moment: with server.addr "…:0" the next listen would get another
// port, and any process (an outgoing connection, even) could take this one.
// Instead each server gets a view of the socket whose Close, called by the
// server's Shutdown, only interrupts Accept (a deadline in the past) and
// leaves the socket bound: connections that arrive during a restart wait
// in the kernel's backlog for the next generation. http.Server's Shutdown
// and Close return only after their Accept loop has, so two generations
// never accept at once. Once the process is stopping, Close closes the
// socket, so that new connections are refused while requests drain.
type keptListener struct {
	*net.TCPListener
	stopping <-chan struct{}
}

func listen(addr string, stopping <-chan struct{}) (*keptListener, error) {
	// An upgrade hands the socket on (internal/upgrade): the new binary
	// serves on it, on the same port, instead of listening again.
	ln, err := inheritedListener()
	if err == nil && ln == nil {
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	tcp, ok := ln.(*net.TCPListener)
	if !ok {
		_ = ln.Close()
		return nil, fmt.Errorf("not a TCP listener: %T", ln)
	}
	return &keptListener{TCPListener: tcp, stopping: stopping}, nil
}

// next readies the socket for the next generation's server.
func (l *keptListener) next() net.Listener {
	_ = l.SetDeadline(time.Time{}) // fails only on a closed socket, which Accept then reports
	return generationListener{l}
}

// generationListener is one generation's view of the kept socket.
type generationListener struct{ *keptListener }

// Close interrupts Accept and leaves the socket open for the next
// generation, unless the process is stopping.
func (l generationListener) Close() error {
	select {
	case <-l.stopping:
		return l.TCPListener.Close()
	default:
		return l.SetDeadline(time.Unix(1, 0))
	}
}

// firstRun applies SVC_ADMIN_PASSWORD: it creates the administrator
// "admin" when no account has ever existed; on any later run the variable
// is not read. The installation must never be open for setup while the
// password is set (identity.Service.ExpectAdmin), so:
//
//   - on a single node (the store's only voter) it runs before the server
//     answers anything: build returns once the account exists, and
//     connections wait in the listening socket's backlog meanwhile; a
//     password the rules refuse stops the server from starting;
//   - in a cluster it runs in the background (a leader may need the other
//     nodes to start first); until it is done the node reports not ready
//     (/readyz), answers GET /setup as set up and refuses POST /setup. The
//     first leader's write wins (any node's write reaches it); a node whose
//     password the rules refuse stays not ready, and says why in its log.
//
// Give every node of a cluster the same SVC_ADMIN_PASSWORD, or none: a node
// started without it knows nothing of the account until it is written.
func firstRun(ctx context.Context, ident *identity.Service, pw string, single bool, log *slog.Logger) error {
	if pw == "" {
		return nil
	}
	ident.ExpectAdmin()
	if single {
		err := applyAdminPassword(ctx, ident, pw, log)
		if err != nil && ctx.Err() == nil {
			return &exitError{code: 2, err: err}
		}
		return err // nil, or the process is stopping
	}
	go func() {
		if err := applyAdminPassword(ctx, ident, pw, log); err != nil && ctx.Err() == nil {
			log.Error("this node stays not ready and refuses setup until it is restarted with a usable SVC_ADMIN_PASSWORD", "err", err)
		}
	}()
	return nil
}

// applyAdminPassword runs FirstRun until it is done, waiting for a leader
// (each attempt waits up to adminAttempt) and saying so in the log.
func applyAdminPassword(ctx context.Context, ident *identity.Service, pw string, log *slog.Logger) error {
	const adminAttempt = 10 * time.Second
	for {
		actx, cancel := context.WithTimeout(ctx, adminAttempt)
		created, err := ident.FirstRun(actx, pw)
		cancel()
		switch {
		case err == nil:
			if created {
				log.Info("created the administrator account \"admin\" with the password in SVC_ADMIN_PASSWORD")
			}
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errcode.CodeOf(err) != errcode.StoreUnavailable:
			return fmt.Errorf("SVC_ADMIN_PASSWORD: the administrator account could not be created: %w", err)
		}
		log.Warn("SVC_ADMIN_PASSWORD: waiting for a leader of the store to create the administrator account", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
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
