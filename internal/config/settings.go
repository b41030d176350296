package config

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/svchost/svc/internal/clientip"
)

// def describes one startup setting.
type def struct {
	name       string // dotted, as in the file
	secret     bool   // never listed or repeated in errors
	emptyUnset bool   // an empty value means unset
	list       bool   // the file may give a sequence
	// parse checks a non-empty value (or an empty one when !emptyUnset) and
	// stores it in c. Its error does not name the setting.
	parse func(c *Config, v string, origin Origin) error
	// format renders the setting's value in c for Settings.
	format func(c *Config) string
}

// env returns the setting's environment variable.
func (d *def) env() string {
	return "SVC_" + strings.ToUpper(strings.ReplaceAll(d.name, ".", "_"))
}

// minSecretLen is the shortest accepted cluster secret.
const minSecretLen = 16

// defs is the catalogue of startup settings.
var defs = [...]def{
	{
		name: "database.url", emptyUnset: true,
		parse: func(c *Config, v string, origin Origin) error {
			if _, err := storeDirFrom(v, origin); err != nil {
				return err
			}
			c.Database.URL = v
			return nil
		},
		format: func(c *Config) string { return redact(c.Database.URL) },
	},
	{
		name: "server.addr",
		parse: func(c *Config, v string, _ Origin) error {
			if err := checkListenAddr(v); err != nil {
				return err
			}
			c.Server.Addr = v
			return nil
		},
		format: func(c *Config) string { return c.Server.Addr },
	},
	{
		name: "server.base_domain",
		parse: func(c *Config, v string, _ Origin) error {
			if !isHostname(v) {
				return fmt.Errorf("%s is not a domain name (e.g. svc.example.com)", quote(v))
			}
			c.Server.BaseDomain = v
			return nil
		},
		format: func(c *Config) string { return c.Server.BaseDomain },
	},
	{
		name: "server.apps_domain", emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			if !isHostname(v) {
				return fmt.Errorf("%s is not a domain name (e.g. apps.example.net)", quote(v))
			}
			c.Server.AppsDomain = v
			return nil
		},
		format: func(c *Config) string { return c.Server.AppsDomain },
	},
	{
		name: "server.routing_mode",
		parse: func(c *Config, v string, _ Origin) error {
			switch v {
			case "port", "subdomain", "path":
				c.Server.RoutingMode = v
				return nil
			}
			return fmt.Errorf("%s is not a routing mode (accepted: port, subdomain, path)", quote(v))
		},
		format: func(c *Config) string { return c.Server.RoutingMode },
	},
	{
		name: "server.issuer", emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			if strings.IndexFunc(v, isSpaceOrControl) >= 0 {
				return fmt.Errorf("%s contains whitespace or a control character", quote(redact(v)))
			}
			c.Server.Issuer = v
			return nil
		},
		format: func(c *Config) string { return redact(c.Server.Issuer) },
	},
	{
		name: "server.external_url", emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			if err := checkHTTPURL(v, "https://svc.example.com"); err != nil {
				return err
			}
			c.Server.ExternalURL = v
			return nil
		},
		format: func(c *Config) string { return redact(c.Server.ExternalURL) },
	},
	{
		name: "server.proxy_upstream", emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			if err := checkHTTPURL(v, "http://127.0.0.1:8081"); err != nil {
				return err
			}
			c.Server.ProxyUpstream = v
			return nil
		},
		format: func(c *Config) string { return redact(c.Server.ProxyUpstream) },
	},
	{
		name: "server.work_dir",
		parse: func(c *Config, v string, _ Origin) error {
			if v == "" || strings.ContainsRune(v, 0) {
				return fmt.Errorf("%s is not a directory path (e.g. /var/lib/svc)", quote(v))
			}
			c.Server.WorkDir = v
			return nil
		},
		format: func(c *Config) string { return c.Server.WorkDir },
	},
	{
		name: "server.shutdown_timeout",
		parse: func(c *Config, v string, _ Origin) error {
			d, err := parseDuration(v)
			if err != nil {
				return err
			}
			c.Server.ShutdownTimeout = d
			return nil
		},
		format: func(c *Config) string { return c.Server.ShutdownTimeout.String() },
	},
	{
		name: "server.trusted_proxies", list: true, emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			ps, err := clientip.ParseList(v)
			if err != nil {
				return err
			}
			c.Server.TrustedProxies = ps
			return nil
		},
		format: func(c *Config) string { return clientip.FormatList(c.Server.TrustedProxies) },
	},
	portDef("app.port_start", 1, func(c *Config) *int { return &c.App.PortStart }),
	portDef("app.port_end", 1, func(c *Config) *int { return &c.App.PortEnd }),
	portDef("runtime.workload_port_start", 1024, func(c *Config) *int { return &c.Runtime.WorkloadPortStart }),
	portDef("runtime.workload_port_end", 1024, func(c *Config) *int { return &c.Runtime.WorkloadPortEnd }),
	{
		name: "admin.password", secret: true, emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			c.Admin.Password = v
			return nil
		},
	},
	{
		name: "log.level",
		parse: func(c *Config, v string, _ Origin) error {
			levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
			l, ok := levels[strings.ToLower(v)]
			if !ok {
				return fmt.Errorf("%s is not a log level (accepted: debug, info, warn, error)", quote(v))
			}
			c.Log.Level = l
			return nil
		},
		format: func(c *Config) string { return strings.ToLower(c.Log.Level.String()) },
	},
	{
		name: "log.format",
		parse: func(c *Config, v string, _ Origin) error {
			if v != "text" && v != "json" {
				return fmt.Errorf("%s is not a log format (accepted: text, json)", quote(v))
			}
			c.Log.Format = v
			return nil
		},
		format: func(c *Config) string { return c.Log.Format },
	},
	{
		name: "runtime.advertise_host", emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			ip := net.ParseIP(v)
			if ip == nil || ip.IsUnspecified() || ip.IsMulticast() {
				return fmt.Errorf("%s is not an IP address of this host (e.g. 10.0.0.5)", quote(v))
			}
			c.Runtime.AdvertiseHost = v
			return nil
		},
		format: func(c *Config) string { return c.Runtime.AdvertiseHost },
	},
	{
		name: "runtime.build_timeout",
		parse: func(c *Config, v string, _ Origin) error {
			d, err := parseDuration(v)
			if err != nil {
				return err
			}
			c.Runtime.BuildTimeout = d
			return nil
		},
		format: func(c *Config) string { return c.Runtime.BuildTimeout.String() },
	},
	{
		name: "runtime.start_timeout",
		parse: func(c *Config, v string, _ Origin) error {
			d, err := parseDuration(v)
			if err != nil {
				return err
			}
			c.Runtime.StartTimeout = d
			return nil
		},
		format: func(c *Config) string { return c.Runtime.StartTimeout.String() },
	},
	{
		name: "runtime.isolation",
		parse: func(c *Config, v string, _ Origin) error {
			if v != "sandbox" && v != "none" {
				return fmt.Errorf("%s is not sandbox or none", quote(v))
			}
			c.Runtime.Isolation = v
			return nil
		},
		format: func(c *Config) string { return c.Runtime.Isolation },
	},
	{
		name: "runtime.sandbox_host_ports", list: true, emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			var ports []int
			for _, f := range strings.Split(v, ",") {
				f = strings.TrimSpace(f)
				if f == "" {
					continue
				}
				n, err := strconv.Atoi(f)
				if err != nil || n < 1 || n > 65535 {
					return fmt.Errorf("%s is not a TCP port", quote(f))
				}
				ports = append(ports, n)
			}
			c.Runtime.SandboxHostPorts = ports
			return nil
		},
		format: func(c *Config) string {
			out := make([]string, len(c.Runtime.SandboxHostPorts))
			for i, p := range c.Runtime.SandboxHostPorts {
				out[i] = strconv.Itoa(p)
			}
			return strings.Join(out, ",")
		},
	},
	{
		name: "runtime.go_cache_seed", emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			if !filepath.IsAbs(v) {
				return fmt.Errorf("%s is not an absolute path", quote(v))
			}
			c.Runtime.GoCacheSeed = filepath.Clean(v)
			return nil
		},
		format: func(c *Config) string { return c.Runtime.GoCacheSeed },
	},
	{
		name: "events.retry_schedule", list: true,
		parse: func(c *Config, v string, _ Origin) error {
			b, err := parseBackoff(v)
			if err != nil {
				return err
			}
			c.Events.RetrySchedule = b
			return nil
		},
		format: func(c *Config) string { return formatBackoff(c.Events.RetrySchedule) },
	},
	{
		name: "events.attempt_timeout",
		parse: func(c *Config, v string, _ Origin) error {
			d, err := parseDuration(v)
			c.Events.AttemptTimeout = d
			return err
		},
		format: func(c *Config) string { return c.Events.AttemptTimeout.String() },
	},
	{
		name: "events.disable_after",
		parse: func(c *Config, v string, _ Origin) error {
			d, err := parseDuration(v)
			c.Events.DisableAfter = d
			return err
		},
		format: func(c *Config) string { return c.Events.DisableAfter.String() },
	},
	{
		name: "backups.recipients", list: true, emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			var keys []string
			for k := range strings.SplitSeq(v, ",") {
				if k = strings.TrimSpace(k); k == "" {
					continue
				}
				if _, err := age.ParseX25519Recipient(k); err != nil {
					return fmt.Errorf("%s is not an age public key (age1…)", quote(k))
				}
				keys = append(keys, k)
			}
			c.Backups.Recipients = keys
			return nil
		},
		format: func(c *Config) string { return strings.Join(c.Backups.Recipients, ",") },
	},
	{
		name: "backups.bundle_interval",
		parse: func(c *Config, v string, _ Origin) error {
			if v == "0" {
				c.Backups.BundleInterval = 0
				return nil
			}
			d, err := parseDuration(v)
			if err == nil && (d < MinBundleInterval || d > MaxBundleInterval) {
				err = fmt.Errorf("%s is not 0 (bundles only when asked) nor from %s to %s", quote(v), MinBundleInterval, MaxBundleInterval)
			}
			c.Backups.BundleInterval = d
			return err
		},
		format: func(c *Config) string {
			if c.Backups.BundleInterval == 0 {
				return "0"
			}
			return c.Backups.BundleInterval.String()
		},
	},
	{
		name: "backups.bundle_keep",
		parse: func(c *Config, v string, _ Origin) error {
			n, err := parseCount(v, 1, 1000)
			c.Backups.BundleKeep = int(n)
			return err
		},
		format: func(c *Config) string { return strconv.Itoa(c.Backups.BundleKeep) },
	},
	{
		name: "disk.check_interval",
		parse: func(c *Config, v string, _ Origin) error {
			d, err := parseDuration(v)
			if err == nil && (d < MinDiskCheckInterval || d > MaxDiskCheckInterval) {
				err = fmt.Errorf("%s is not from %s to %s", quote(v), MinDiskCheckInterval, MaxDiskCheckInterval)
			}
			c.Disk.CheckInterval = d
			return err
		},
		format: func(c *Config) string { return c.Disk.CheckInterval.String() },
	},
	{
		name: "reconciler.backoff", list: true,
		parse: func(c *Config, v string, _ Origin) error {
			b, err := parseBackoff(v)
			if err != nil {
				return err
			}
			c.Reconciler.Backoff = b
			return nil
		},
		format: func(c *Config) string { return formatBackoff(c.Reconciler.Backoff) },
	},
	{
		name: "reconciler.workers",
		parse: func(c *Config, v string, _ Origin) error {
			n, err := parseCount(v, 1, 1024)
			c.Reconciler.Workers = int(n)
			return err
		},
		format: func(c *Config) string { return strconv.Itoa(c.Reconciler.Workers) },
	},
	{
		name: "upgrade.signing_public_key", emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil || len(b) != ed25519.PublicKeySize {
				return fmt.Errorf("%s is not an Ed25519 public key: give the base64 of its 32 bytes, as svc upgrade keygen prints it", quote(v))
			}
			c.Upgrade.SigningPublicKey = ed25519.PublicKey(b)
			return nil
		},
		format: func(c *Config) string {
			if c.Upgrade.SigningPublicKey == nil {
				return ""
			}
			return base64.StdEncoding.EncodeToString(c.Upgrade.SigningPublicKey)
		},
	},
	{
		name: "upgrade.ready_timeout",
		parse: func(c *Config, v string, _ Origin) error {
			d, err := parseDuration(v)
			if err != nil {
				return err
			}
			c.Upgrade.ReadyTimeout = d
			return nil
		},
		format: func(c *Config) string { return c.Upgrade.ReadyTimeout.String() },
	},
	{
		name: "cluster.node_id", emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			if err := checkNodeID(v); err != nil {
				return err
			}
			c.Cluster.NodeID = v
			return nil
		},
		format: func(c *Config) string { return c.Cluster.NodeID },
	},
	{
		name: "cluster.raft_addr", emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			if err := checkRaftAddr(v); err != nil {
				return err
			}
			c.Cluster.RaftAddr = v
			return nil
		},
		format: func(c *Config) string { return c.Cluster.RaftAddr },
	},
	{
		name: "cluster.peers", list: true, emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			p, err := parsePeers(v)
			if err != nil {
				return err
			}
			c.Cluster.Peers = p
			return nil
		},
		format: func(c *Config) string { return formatPeers(c.Cluster.Peers) },
	},
	{
		name: "cluster.secret", secret: true, emptyUnset: true,
		parse: func(c *Config, v string, _ Origin) error {
			c.Cluster.Secret = v
			return nil
		},
	},
	{
		name: "cluster.snapshot_threshold",
		parse: func(c *Config, v string, _ Origin) (err error) {
			c.Cluster.SnapshotThreshold, err = parseCount(v, 16, 1<<30)
			return err
		},
		format: func(c *Config) string { return strconv.FormatUint(c.Cluster.SnapshotThreshold, 10) },
	},
	{
		name: "cluster.snapshot_interval",
		parse: func(c *Config, v string, _ Origin) error {
			d, err := parseDuration(v)
			if err != nil {
				return err
			}
			c.Cluster.SnapshotInterval = d
			return nil
		},
		format: func(c *Config) string { return c.Cluster.SnapshotInterval.String() },
	},
	{
		name: "cluster.trailing_logs",
		parse: func(c *Config, v string, _ Origin) (err error) {
			c.Cluster.TrailingLogs, err = parseCount(v, 1, 1<<30)
			return err
		},
		format: func(c *Config) string { return strconv.FormatUint(c.Cluster.TrailingLogs, 10) },
	},
}

// parseCount reads a decimal count from lo to hi.
func parseCount(v string, lo, hi uint64) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s is not a whole number from %d to %d", quote(v), lo, hi)
	}
	return n, nil
}

func defByName(name string) *def {
	for i := range defs {
		if defs[i].name == name {
			return &defs[i]
		}
	}
	return nil
}

func defByEnv(env string) *def {
	for i := range defs {
		if defs[i].env() == env {
			return &defs[i]
		}
	}
	return nil
}

// parseDuration reads a Go duration greater than zero.
func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s is not a duration (accepted: a Go duration such as 30s or 1m30s)", quote(v))
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s is not greater than zero", quote(v))
	}
	return d, nil
}

// portDef is a setting holding a port number from lo to 65535, in the
// field field returns.
func portDef(name string, lo int, field func(*Config) *int) def {
	return def{
		name: name,
		parse: func(c *Config, v string, _ Origin) (err error) {
			*field(c), err = parsePort(v, lo)
			return err
		},
		format: func(c *Config) string { return strconv.Itoa(*field(c)) },
	}
}

// parsePort reads a decimal port number from lo to 65535.
func parsePort(v string, lo int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > 65535 || v[0] == '+' || v[0] == '-' {
		return 0, fmt.Errorf("%s is not a port number (%d-65535)", quote(v), lo)
	}
	return n, nil
}
