// Package config owns the startup configuration of svc serve: the catalogue
// of settings, loading them from defaults, an optional YAML file and the
// environment (the environment wins over the file, the file over the
// default), the origin of each value, their validation, the host policy
// settings fixed at startup, and the adapters declared at startup (with
// their credentials read from files or variables).
//
// It must not touch storage or HTTP and must not start anything. Load is a
// pure function of its arguments plus the reading of the named file: it reads
// the environment only from LoadArgs.Env and writes nothing to disk.
package config

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svchost/svc/internal/policy"
)

// Origin says where a setting's value came from.
type Origin string

const (
	OriginEnvironment Origin = "environment"
	OriginConfigFile  Origin = "config_file"
	OriginDefault     Origin = "default"
)

// Setting is one startup setting as GET /api/v1/config lists it. Value is
// omitted for secret settings.
type Setting struct {
	Name   string `json:"name"`
	Env    string `json:"env"`
	Value  string `json:"value,omitempty"`
	Origin Origin `json:"origin"`
	Secret bool   `json:"secret,omitempty"`
}

// Peer is a member of the Raft cluster.
type Peer struct {
	ID   string
	Addr string
}

// Config is the loaded startup configuration.
type Config struct {
	Database struct {
		// URL is where the store keeps its data: empty for the bundled store
		// under <work_dir>/raft, or file:///path or /path for a directory.
		URL string
	}
	Server struct {
		Addr       string
		BaseDomain string
		// AppsDomain, when set, is the domain apps are served under,
		// apart from the console: <slug>.<apps domain> in subdomain
		// routing, the host of the apps' ports in port routing. Empty:
		// the base domain (subdomain) or the console's host (port).
		AppsDomain      string
		RoutingMode     string // port, subdomain or path
		Issuer          string // derived when not set, see Load
		ExternalURL     string
		ProxyUpstream   string
		WorkDir         string
		ShutdownTimeout time.Duration
		// TrustedProxies are the proxies whose X-Forwarded-For svc believes
		// (see internal/clientip); empty: none, the client is always the
		// connection's peer.
		TrustedProxies []netip.Prefix
	}
	App struct {
		PortStart, PortEnd int
	}
	Admin struct {
		Password string // empty: the identity code generates one
	}
	Log struct {
		Level  slog.Level
		Format string // text or json
	}
	// Events are the webhook dispatcher's settings: the waits before each
	// retry of a failed delivery, the bound of one attempt, and how long a
	// subscription may fail every attempt before it is turned off.
	Events struct {
		RetrySchedule  []time.Duration
		AttemptTimeout time.Duration
		DisableAfter   time.Duration
	}
	// Disk is the disk limits' check: how often the leader reads the disk
	// use of every running app with a limit (resources.disk_bytes).
	Disk struct {
		CheckInterval time.Duration
	}
	// Backups are encrypted to the installation's own key (keyring/backup-key
	// in the work dir) and to these age public keys (age1…): the holder of
	// any of their identities can read every backup.
	Backups struct {
		Recipients []string
		// BundleInterval schedules an installation bundle that often (0:
		// only when asked); BundleKeep is how many completed scheduled
		// ones are kept.
		BundleInterval time.Duration
		BundleKeep     int
	}
	Reconciler struct {
		Backoff []time.Duration
		// Workers is how many apps the reconciler reconciles at once
		// (each app's runtime calls bounded by Runtime.StartTimeout).
		Workers int
	}
	// Runtime bounds the embedded process runtime's builds and starts: a
	// build running longer fails with BUILD_TIMEOUT, a workload not ready
	// within StartTimeout fails its deploy.
	Runtime struct {
		BuildTimeout time.Duration
		StartTimeout time.Duration
		// AdvertiseHost is the address the process runtime reaches
		// workloads at; empty is 127.0.0.1. Another address makes an app
		// that listens only on loopback fail its deploy
		// (BUILD_LISTENS_ON_LOOPBACK).
		AdvertiseHost string
		// Isolation is the least isolation of the process runtime's
		// workloads and builds: "sandbox" (the default) or "none", which
		// an operator must choose explicitly where the host cannot run the
		// sandbox.
		Isolation string
		// SandboxHostPorts are TCP ports of the host's loopback that
		// sandboxed workloads reach on their own loopback (a database on
		// this host, for slots); no other port of the host is reachable.
		SandboxHostPorts []int
		// WorkloadPortStart..WorkloadPortEnd are the host ports the
		// process runtime gives workloads that do not ask for one: below
		// the kernel's ephemeral range, so that no outgoing connection
		// takes a port between its pick and the workload's listen, and
		// below Nomad's dynamic ports (20000-32000) on a host that runs
		// both. svc's own port, the apps' range and the sandbox host
		// ports in it are never given out.
		WorkloadPortStart, WorkloadPortEnd int
		// GoCacheSeed is a Go build cache, written only by the server, that
		// seeds each app's own at its first Go build; empty is one in the
		// runtime's cache directory.
		GoCacheSeed string
	}
	Cluster struct {
		// NodeID names this node. Empty on a single node means the id
		// generated once and kept in the store directory (see SetNodeID);
		// a cluster node must be given one, since cluster.peers names it.
		NodeID   string
		RaftAddr string // empty: a single node without a network transport
		Peers    []Peer // includes this node
		Secret   string
		// SnapshotThreshold is how many log entries are written before the
		// store snapshots its state, checked every SnapshotInterval (at a
		// random point of it); TrailingLogs is how many entries it keeps
		// after a snapshot, for followers that fall behind. Raft's defaults
		// but the interval: a snapshot holds live state only (history tables
		// stay on disk), so checking often keeps the log short at little cost.
		SnapshotThreshold uint64
		SnapshotInterval  time.Duration
		TrailingLogs      uint64
	}
	// Upgrade is the in-place upgrade's (POST /api/v1/upgrade): the
	// Ed25519 public key every uploaded binary's signature must verify
	// with (nil: unsigned binaries are accepted), and how long the new
	// binary has to become ready before it is rolled back.
	Upgrade struct {
		SigningPublicKey ed25519.PublicKey
		ReadyTimeout     time.Duration
	}
	Policy policy.Fixed
	// Adapters are the adapters declared in the config file or
	// SVC_ADAPTERS (the environment's list wins, whole), credentials read.
	Adapters []Adapter
	Settings []Setting // every setting with its value and origin, sorted by Name
	Warnings []string
	File     string // the config file's path, "" if none
}

// LoadArgs are the inputs of Load.
type LoadArgs struct {
	Env  []string // KEY=VALUE entries, as os.Environ returns them
	File string   // the --config path, or "" for none
}

// ShippedBackoff is the reconciler's shipped retry schedule. Treat it as
// read-only; Load hands out copies.
var ShippedBackoff = []time.Duration{5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute}

// The bounds of disk.check_interval: a reading walks every running app's
// files, so not more often than every second; and at least daily, or a
// disk limit would hardly be one.
const (
	MinDiskCheckInterval = time.Second
	MaxDiskCheckInterval = 24 * time.Hour
	// Scheduled installation bundles: from hourly to monthly.
	MinBundleInterval = time.Hour
	MaxBundleInterval = 31 * 24 * time.Hour
)

// ShippedRetrySchedule is the webhook retry schedule the specification
// ships. Treat it as read-only; Load hands out copies.
var ShippedRetrySchedule = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour}

// source is where one raw value came from.
type source struct {
	origin Origin
	value  string
	label  string // the prefix of an error about this value
}

// Load builds the configuration from the defaults, the file args.File (when
// not empty) and the environment args.Env.
//
// Environment variables are SVC_ plus the setting name uppercased with dots
// turned into underscores; the file nests by the dots. An empty environment
// value (or a null in the file) sets a setting only where empty means unset:
// database.url, server.apps_domain, server.issuer, server.external_url, server.proxy_upstream,
// server.trusted_proxies, admin.password, cluster.node_id, cluster.raft_addr, cluster.peers and
// cluster.secret. For
// every other setting an empty value is an error. When several entries of
// args.Env have the same name, the last one wins.
//
// SVC_POLICY_<NAME> and the file's policy section fix host policy settings;
// SVC_ADAPTERS and the file's adapters section declare adapters (see
// Adapter; the environment's list wins over the file's, whole, and an empty
// SVC_ADAPTERS is unset); SVC_PORT is ignored; any other unknown SVC_ variable is a warning.
//
// All problems are reported together, one per line, each naming the variable
// or file key. No secret is ever part of an error, a warning or Settings.
func Load(args LoadArgs) (*Config, error) {
	l := &loader{args: args, c: &Config{File: args.File}, sources: map[string]source{}, fileSources: map[string]source{}}
	l.readEnv()
	l.readAdaptersEnv()
	if args.File != "" {
		l.readFile()
	}
	l.mergeSources()
	l.applyDefaults()
	l.parseSettings()
	l.fixPolicy()
	l.fixAdapters()
	l.crossCheck()
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	l.warnBackoff()
	l.warnRetrySchedule()
	l.warnTrustEveryone()
	l.warnPlainExternalURL()
	l.c.Warnings = append(l.c.Warnings, l.unknownEnv...)
	l.c.Settings = l.settings()
	return l.c, nil
}

// RaftDir returns the store's data directory: the directory named by
// database.url, or <work_dir>/raft when it is empty. It assumes a Config that
// Load has validated.
func (c *Config) RaftDir() string {
	if dir, err := storeDir(c.Database.URL); err == nil && dir != "" {
		return dir
	}
	return filepath.Join(c.Server.WorkDir, "raft")
}

// loader carries the state of one Load.
type loader struct {
	args LoadArgs
	c    *Config

	env        map[string]string // every SVC_ variable
	unknownEnv []string          // warnings about unknown variables
	envPolicy  []string          // SVC_POLICY_ variable names, sorted

	filePolicy []filePolicyValue
	// The declared adapters of the file and of SVC_ADAPTERS (set: given
	// and not empty, even as an empty list).
	fileAdapters   []Adapter
	envAdapters    []Adapter
	envAdaptersSet bool
	fileSources    map[string]source // by setting name: the file's values
	sources        map[string]source // by setting name: the value that wins
	failed         map[string]bool   // settings whose value was refused
	errs           []error
}

// readEnv collects the SVC_ variables and sorts them into known settings,
// policy settings and unknown ones.
func (l *loader) readEnv() {
	l.env = map[string]string{}
	for _, kv := range l.args.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "SVC_") {
			continue
		}
		l.env[k] = v
	}
	for k := range l.env {
		switch {
		case k == "SVC_PORT":
			// Read only by a packaging file, never by the service.
		case k == adaptersEnv:
			// Read by readAdaptersEnv.
		case strings.HasPrefix(k, "SVC_POLICY_"):
			l.envPolicy = append(l.envPolicy, k)
		case defByEnv(k) == nil:
			l.unknownEnv = append(l.unknownEnv, fmt.Sprintf("unknown environment variable %s ignored", k))
		}
	}
	slices.Sort(l.envPolicy)
	slices.Sort(l.unknownEnv)
}

func (l *loader) errorf(format string, a ...any) {
	l.errs = append(l.errs, fmt.Errorf(format, a...))
}

// mergeSources records the values of the file and then those of the
// environment, which win.
func (l *loader) mergeSources() {
	for name, src := range l.fileSources {
		l.sources[name] = src
	}
	for _, d := range defs {
		if v, ok := l.env[d.env()]; ok {
			l.sources[d.name] = source{origin: OriginEnvironment, value: v, label: d.env()}
		}
	}
}

// applyDefaults sets the default of every setting.
func (l *loader) applyDefaults() {
	c := l.c
	c.Server.Addr = ":8080"
	c.Server.BaseDomain = "svc.localhost"
	c.Server.RoutingMode = "port"
	c.Server.WorkDir = "/var/lib/svc"
	c.Server.ShutdownTimeout = 30 * time.Second
	c.App.PortStart, c.App.PortEnd = 9000, 9019
	c.Runtime.WorkloadPortStart, c.Runtime.WorkloadPortEnd = 10000, 19999
	c.Log.Level = slog.LevelInfo
	c.Log.Format = "text"
	c.Reconciler.Backoff = slices.Clone(ShippedBackoff)
	c.Reconciler.Workers = 16
	c.Disk.CheckInterval = time.Minute
	c.Backups.BundleKeep = 7
	c.Events.RetrySchedule = slices.Clone(ShippedRetrySchedule)
	c.Events.AttemptTimeout = 15 * time.Second
	c.Events.DisableAfter = 24 * time.Hour
	c.Upgrade.ReadyTimeout = time.Minute
	c.Runtime.BuildTimeout = 15 * time.Minute
	c.Runtime.StartTimeout = time.Minute
	c.Runtime.Isolation = "sandbox"
	c.Cluster.SnapshotThreshold, c.Cluster.SnapshotInterval, c.Cluster.TrailingLogs = 8192, 10*time.Second, 10240
}

// parseSettings parses every value given in the file or the environment. A
// bad value in the file is reported even when the environment overrides it:
// an unreadable value stops the service wherever it is.
func (l *loader) parseSettings() {
	l.failed = map[string]bool{}
	for i := range defs {
		d := &defs[i]
		if fsrc, ok := l.fileSources[d.name]; ok && l.sources[d.name].origin != OriginConfigFile {
			if fsrc.value != "" || !d.emptyUnset {
				if err := d.parse(&Config{}, fsrc.value, fsrc.origin); err != nil {
					l.errorf("%s: %w", fsrc.label, err)
				}
			}
		}
		src, ok := l.sources[d.name]
		if !ok {
			continue
		}
		if src.value == "" && d.emptyUnset {
			continue
		}
		if err := d.parse(l.c, src.value, src.origin); err != nil {
			l.failed[d.name] = true
			l.errorf("%s: %w", src.label, err)
		}
	}
}

// fixPolicy fixes the policy settings of the file, then those of the
// environment, which win.
func (l *loader) fixPolicy() {
	for _, fv := range l.filePolicy {
		v, err := policy.ParseYAML(fv.name, fv.value)
		if err == nil {
			err = l.c.Policy.Set(fv.name, v, policy.OriginConfigFile)
		}
		if err != nil {
			l.errorf("config file %s: policy.%s: %w", l.args.File, keyText(fv.name), policyReason(err))
		}
	}
	for _, k := range l.envPolicy {
		name := strings.ToLower(strings.TrimPrefix(k, "SVC_POLICY_"))
		v, err := policy.ParseEnv(name, l.env[k])
		if err == nil {
			err = l.c.Policy.Set(name, v, policy.OriginEnvironment)
		}
		if err != nil {
			l.errorf("%s: %w", k, policyReason(err))
		}
	}
}

// policyReason drops the policy package's "policy setting <name>: " prefix,
// which the caller replaces by the variable or key.
func policyReason(err error) error {
	var se *policy.SettingError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// ref names a setting in an error that involves more than one setting.
func (l *loader) ref(name string) string {
	d := defByName(name)
	src, ok := l.sources[name]
	switch {
	case !ok:
		return d.env() + " (default)"
	case src.origin == OriginConfigFile:
		return name + " (config file " + l.args.File + ")"
	default:
		return d.env()
	}
}

// crossCheck validates what involves several settings and derives the
// issuer.
func (l *loader) crossCheck() {
	c := l.c
	ok := func(names ...string) bool {
		for _, n := range names {
			if l.failed[n] {
				return false
			}
		}
		return true
	}
	if ok("app.port_start", "app.port_end") && c.App.PortStart > c.App.PortEnd {
		l.errorf("%s (%d) is greater than %s (%d); the app port range must not be empty",
			l.ref("app.port_start"), c.App.PortStart, l.ref("app.port_end"), c.App.PortEnd)
	}
	if ok("runtime.workload_port_start", "runtime.workload_port_end") && c.Runtime.WorkloadPortStart > c.Runtime.WorkloadPortEnd {
		l.errorf("%s (%d) is greater than %s (%d); the workload port range must not be empty",
			l.ref("runtime.workload_port_start"), c.Runtime.WorkloadPortStart, l.ref("runtime.workload_port_end"), c.Runtime.WorkloadPortEnd)
	}
	if ok("cluster.raft_addr", "cluster.secret", "cluster.peers", "cluster.node_id") {
		l.checkCluster()
	}
	if ok("runtime.sandbox_host_ports", "server.addr", "app.port_start", "app.port_end") {
		_, own, _ := net.SplitHostPort(c.Server.Addr)
		for _, p := range c.Runtime.SandboxHostPorts {
			if strconv.Itoa(p) == own || (p >= c.App.PortStart && p <= c.App.PortEnd) {
				l.errorf("%s names port %d, which is svc's own (%s, or the apps' range %s..%s): apps reach svc and each other only through the edge",
					l.ref("runtime.sandbox_host_ports"), p, l.ref("server.addr"), l.ref("app.port_start"), l.ref("app.port_end"))
			}
		}
	}
	if ok("server.apps_domain", "server.external_url", "server.routing_mode") {
		l.checkAppsDomain()
	}
	if _, set := l.sources["server.issuer"]; (!set || c.Server.Issuer == "") && ok("server.addr", "server.external_url") {
		c.Server.Issuer = deriveIssuer(c.Server.ExternalURL, c.Server.Addr)
	}
}

// checkAppsDomain refuses, in subdomain routing, a console (the external
// URL's host) under the apps domain: an app whose slug is the console's
// label would take its address, and every app could set cookies for it.
func (l *loader) checkAppsDomain() {
	c := l.c
	if c.Server.AppsDomain == "" || c.Server.ExternalURL == "" || c.Server.RoutingMode != "subdomain" {
		return
	}
	u, err := url.Parse(c.Server.ExternalURL)
	if err != nil {
		return
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	apps := strings.ToLower(strings.TrimSuffix(c.Server.AppsDomain, "."))
	if strings.HasSuffix(host, "."+apps) {
		l.errorf("%s puts the console at %s, under %s %s: apps are <slug>.%s, so an app could take the console's address and set its cookies; serve the console from another domain",
			l.ref("server.external_url"), host, l.ref("server.apps_domain"), apps, apps)
	}
}

func (l *loader) checkCluster() {
	c := l.c
	if c.Cluster.RaftAddr != "" && c.Cluster.NodeID == "" {
		l.errorf("%s is set but %s is not; every node of a cluster needs an id, the one %s names it by",
			l.ref("cluster.raft_addr"), defByName("cluster.node_id").env(), defByName("cluster.peers").env())
		return
	}
	if c.Cluster.RaftAddr == "" {
		if len(c.Cluster.Peers) > 0 {
			l.errorf("%s is set but %s is not; a cluster needs this node's raft address", l.ref("cluster.peers"), l.ref("cluster.raft_addr"))
		}
		return
	}
	if n := len([]rune(c.Cluster.Secret)); n < minSecretLen {
		what := "is not set"
		if n > 0 {
			what = fmt.Sprintf("has %d characters", n)
		}
		l.errorf("%s %s; it must have at least %d characters when %s is set", l.ref("cluster.secret"), what, minSecretLen, l.ref("cluster.raft_addr"))
	}
	if len(c.Cluster.Peers) == 0 {
		return
	}
	for _, p := range c.Cluster.Peers {
		if p.ID != c.Cluster.NodeID {
			continue
		}
		if canonicalAddr(p.Addr) != canonicalAddr(c.Cluster.RaftAddr) {
			l.errorf("%s lists this node %s at %s, but %s is %s; they must be the same",
				l.ref("cluster.peers"), quote(p.ID), quote(p.Addr), l.ref("cluster.raft_addr"), quote(c.Cluster.RaftAddr))
		}
		return
	}
	l.errorf("%s does not list this node %s (from %s); the peers must include it as %s=%s",
		l.ref("cluster.peers"), quote(c.Cluster.NodeID), l.ref("cluster.node_id"), c.Cluster.NodeID, c.Cluster.RaftAddr)
}

// warnBackoff warns when the retry schedule is faster than the shipped one.
func (l *loader) warnBackoff() {
	src, ok := l.sources["reconciler.backoff"]
	if !ok || !fasterThanShipped(l.c.Reconciler.Backoff, ShippedBackoff) {
		return
	}
	l.c.Warnings = append(l.c.Warnings, fmt.Sprintf(
		"SVC_RECONCILER_BACKOFF (%s) is faster than the shipped schedule %s; a failing app will be retried more aggressively",
		src.origin, formatBackoff(ShippedBackoff)))
}

// warnRetrySchedule warns when the webhook retry schedule is faster than
// the shipped one.
func (l *loader) warnRetrySchedule() {
	src, ok := l.sources["events.retry_schedule"]
	if !ok || !fasterThanShipped(l.c.Events.RetrySchedule, ShippedRetrySchedule) {
		return
	}
	l.c.Warnings = append(l.c.Warnings, fmt.Sprintf(
		"SVC_EVENTS_RETRY_SCHEDULE (%s) is faster than the shipped schedule %s; failing webhooks will be retried more aggressively",
		src.origin, formatBackoff(ShippedRetrySchedule)))
}

// warnTrustEveryone warns when server.trusted_proxies trusts every address
// of a family: any client reaching the listener directly can then choose
// the address svc throttles and records it by.
func (l *loader) warnTrustEveryone() {
	for _, p := range l.c.Server.TrustedProxies {
		if p.Bits() == 0 {
			l.c.Warnings = append(l.c.Warnings, fmt.Sprintf(
				"%s trusts every address (%s): a client that reaches svc without the proxy chooses the address it is throttled and audited by; list the proxies' addresses instead",
				defByName("server.trusted_proxies").env(), p))
			return
		}
	}
}

// warnPlainExternalURL warns when the external URL is plain http on a host
// other than localhost: the specification has an external URL mean that TLS
// ends in front of svc, and makes the session cookie Secure, which browsers
// keep only from secure origins.
func (l *loader) warnPlainExternalURL() {
	u, err := url.Parse(l.c.Server.ExternalURL)
	if err != nil || u.Scheme != "http" {
		return
	}
	if h := u.Hostname(); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return
	}
	l.c.Warnings = append(l.c.Warnings, fmt.Sprintf(
		"%s is http: an external URL says TLS ends in front of svc, so the session cookie is Secure, and browsers keep it only over https; serve svc at an https address",
		defByName("server.external_url").env()))
}

// fasterThanShipped reports whether any step is shorter than the shipped
// step at the same position (or the last shipped step beyond its end).
func fasterThanShipped(b, shipped []time.Duration) bool {
	for i, d := range b {
		if d < shipped[min(i, len(shipped)-1)] {
			return true
		}
	}
	return false
}

// settings lists every setting with its value and origin, sorted by name.
func (l *loader) settings() []Setting {
	out := make([]Setting, 0, len(defs))
	for _, d := range defs {
		s := Setting{Name: d.name, Env: d.env(), Origin: OriginDefault, Secret: d.secret}
		if src, ok := l.sources[d.name]; ok {
			s.Origin = src.origin
		}
		if !d.secret {
			s.Value = d.format(l.c)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Setting) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// SetNodeID records the node id resolved at startup for a single node that
// was not given one, so that Settings shows it (with its origin default).
func (c *Config) SetNodeID(id string) {
	if c.Cluster.NodeID != "" {
		return
	}
	c.Cluster.NodeID = id
	for i := range c.Settings {
		if c.Settings[i].Name == "cluster.node_id" {
			c.Settings[i].Value = id
		}
	}
}
