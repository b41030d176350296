package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/svchost/svc/internal/policy"
)

// canary is a secret that must never appear in an error, warning or listing.
const canary = "CANARY-s3cr3t-Zq8"

// writeFile writes a config file into a temporary directory and returns its
// path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "svc.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("write config file: %v", err)
	}
	return path
}

// envList turns a map into KEY=VALUE entries.
func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func mustLoad(t *testing.T, args LoadArgs) *Config {
	t.Helper()
	c, err := Load(args)
	if err != nil {
		t.Fatalf("Load() error:\n%v", err)
	}
	return c
}

func settingsByName(c *Config) map[string]Setting {
	m := map[string]Setting{}
	for _, s := range c.Settings {
		m[s.Name] = s
	}
	return m
}

func TestDefaults(t *testing.T) {
	c := mustLoad(t, LoadArgs{Env: []string{"PATH=/bin", "HOME=/root"}})

	checks := []struct {
		name      string
		got, want any
	}{
		{"database.url", c.Database.URL, ""},
		{"server.addr", c.Server.Addr, ":8080"},
		{"server.base_domain", c.Server.BaseDomain, "svc.localhost"},
		{"server.routing_mode", c.Server.RoutingMode, "port"},
		{"server.issuer", c.Server.Issuer, "http://localhost:8080"},
		{"server.external_url", c.Server.ExternalURL, ""},
		{"server.proxy_upstream", c.Server.ProxyUpstream, ""},
		{"server.work_dir", c.Server.WorkDir, "/var/lib/svc"},
		{"server.shutdown_timeout", c.Server.ShutdownTimeout, 30 * time.Second},
		{"app.port_start", c.App.PortStart, 9000},
		{"app.port_end", c.App.PortEnd, 9019},
		{"admin.password", c.Admin.Password, ""},
		{"log.level", c.Log.Level, slog.LevelInfo},
		{"log.format", c.Log.Format, "text"},
		{"reconciler.backoff", c.Reconciler.Backoff, ShippedBackoff},
		{"disk.check_interval", c.Disk.CheckInterval, time.Minute},
		{"cluster.node_id", c.Cluster.NodeID, ""},
		{"cluster.raft_addr", c.Cluster.RaftAddr, ""},
		{"cluster.peers", len(c.Cluster.Peers), 0},
		{"cluster.secret", c.Cluster.Secret, ""},
		{"policy fixed", c.Policy.Len(), 0},
		{"warnings", len(c.Warnings), 0},
		{"file", c.File, ""},
		{"raft dir", c.RaftDir(), "/var/lib/svc/raft"},
	}
	for _, tt := range checks {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}

	want := []Setting{
		{Name: "admin.password", Env: "SVC_ADMIN_PASSWORD", Origin: "default", Secret: true},
		{Name: "app.port_end", Env: "SVC_APP_PORT_END", Value: "9019", Origin: "default"},
		{Name: "app.port_start", Env: "SVC_APP_PORT_START", Value: "9000", Origin: "default"},
		{Name: "backups.bundle_interval", Env: "SVC_BACKUPS_BUNDLE_INTERVAL", Value: "0", Origin: "default"},
		{Name: "backups.bundle_keep", Env: "SVC_BACKUPS_BUNDLE_KEEP", Value: "7", Origin: "default"},
		{Name: "backups.recipients", Env: "SVC_BACKUPS_RECIPIENTS", Origin: "default"},
		{Name: "cluster.node_id", Env: "SVC_CLUSTER_NODE_ID", Origin: "default"},
		{Name: "cluster.peers", Env: "SVC_CLUSTER_PEERS", Origin: "default"},
		{Name: "cluster.raft_addr", Env: "SVC_CLUSTER_RAFT_ADDR", Origin: "default"},
		{Name: "cluster.secret", Env: "SVC_CLUSTER_SECRET", Origin: "default", Secret: true},
		{Name: "cluster.snapshot_interval", Env: "SVC_CLUSTER_SNAPSHOT_INTERVAL", Value: "10s", Origin: "default"},
		{Name: "cluster.snapshot_threshold", Env: "SVC_CLUSTER_SNAPSHOT_THRESHOLD", Value: "8192", Origin: "default"},
		{Name: "cluster.trailing_logs", Env: "SVC_CLUSTER_TRAILING_LOGS", Value: "10240", Origin: "default"},
		{Name: "database.url", Env: "SVC_DATABASE_URL", Origin: "default"},
		{Name: "disk.check_interval", Env: "SVC_DISK_CHECK_INTERVAL", Value: "1m0s", Origin: "default"},
		{Name: "events.attempt_timeout", Env: "SVC_EVENTS_ATTEMPT_TIMEOUT", Value: "15s", Origin: "default"},
		{Name: "events.disable_after", Env: "SVC_EVENTS_DISABLE_AFTER", Value: "24h0m0s", Origin: "default"},
		{Name: "events.retry_schedule", Env: "SVC_EVENTS_RETRY_SCHEDULE", Value: "1m0s,5m0s,30m0s,2h0m0s,6h0m0s,12h0m0s", Origin: "default"},
		{Name: "log.format", Env: "SVC_LOG_FORMAT", Value: "text", Origin: "default"},
		{Name: "log.level", Env: "SVC_LOG_LEVEL", Value: "info", Origin: "default"},
		{Name: "reconciler.backoff", Env: "SVC_RECONCILER_BACKOFF", Value: "5s,15s,30s,1m0s,2m0s,5m0s", Origin: "default"},
		{Name: "reconciler.workers", Env: "SVC_RECONCILER_WORKERS", Value: "16", Origin: "default"},
		{Name: "runtime.advertise_host", Env: "SVC_RUNTIME_ADVERTISE_HOST", Origin: "default"},
		{Name: "runtime.build_timeout", Env: "SVC_RUNTIME_BUILD_TIMEOUT", Value: "15m0s", Origin: "default"},
		{Name: "runtime.go_cache_seed", Env: "SVC_RUNTIME_GO_CACHE_SEED", Origin: "default"},
		{Name: "runtime.isolation", Env: "SVC_RUNTIME_ISOLATION", Value: "sandbox", Origin: "default"},
		{Name: "runtime.sandbox_host_ports", Env: "SVC_RUNTIME_SANDBOX_HOST_PORTS", Origin: "default"},
		{Name: "runtime.start_timeout", Env: "SVC_RUNTIME_START_TIMEOUT", Value: "1m0s", Origin: "default"},
		{Name: "runtime.workload_port_end", Env: "SVC_RUNTIME_WORKLOAD_PORT_END", Value: "19999", Origin: "default"},
		{Name: "runtime.workload_port_start", Env: "SVC_RUNTIME_WORKLOAD_PORT_START", Value: "10000", Origin: "default"},
		{Name: "server.addr", Env: "SVC_SERVER_ADDR", Value: ":8080", Origin: "default"},
		{Name: "server.apps_domain", Env: "SVC_SERVER_APPS_DOMAIN", Origin: "default"},
		{Name: "server.base_domain", Env: "SVC_SERVER_BASE_DOMAIN", Value: "svc.localhost", Origin: "default"},
		{Name: "server.external_url", Env: "SVC_SERVER_EXTERNAL_URL", Origin: "default"},
		{Name: "server.issuer", Env: "SVC_SERVER_ISSUER", Value: "http://localhost:8080", Origin: "default"},
		{Name: "server.proxy_upstream", Env: "SVC_SERVER_PROXY_UPSTREAM", Origin: "default"},
		{Name: "server.routing_mode", Env: "SVC_SERVER_ROUTING_MODE", Value: "port", Origin: "default"},
		{Name: "server.shutdown_timeout", Env: "SVC_SERVER_SHUTDOWN_TIMEOUT", Value: "30s", Origin: "default"},
		{Name: "server.trusted_proxies", Env: "SVC_SERVER_TRUSTED_PROXIES", Origin: "default"},
		{Name: "server.work_dir", Env: "SVC_SERVER_WORK_DIR", Value: "/var/lib/svc", Origin: "default"},
		{Name: "upgrade.ready_timeout", Env: "SVC_UPGRADE_READY_TIMEOUT", Value: "1m0s", Origin: "default"},
		{Name: "upgrade.signing_public_key", Env: "SVC_UPGRADE_SIGNING_PUBLIC_KEY", Origin: "default"},
	}
	if diff := cmp.Diff(want, c.Settings); diff != "" {
		t.Errorf("Settings mismatch (-want +got):\n%s", diff)
	}
	b, err := json.Marshal(c.Settings[:2])
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	wantJSON := `[{"name":"admin.password","env":"SVC_ADMIN_PASSWORD","origin":"default","secret":true},` +
		`{"name":"app.port_end","env":"SVC_APP_PORT_END","value":"9019","origin":"default"}]`
	if string(b) != wantJSON {
		t.Errorf("Settings JSON = %s, want %s", b, wantJSON)
	}

	// The default schedule is a copy: changing it does not change the shipped one.
	c.Reconciler.Backoff[0] = time.Hour
	if ShippedBackoff[0] != 5*time.Second {
		t.Errorf("ShippedBackoff[0] = %v after changing a loaded config, want 5s", ShippedBackoff[0])
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, `
server:
  addr: "127.0.0.1:9090"
  routing_mode: subdomain
  shutdown_timeout: 10s
app:
  port_start: 10000
  port_end: 10099
log:
  level: debug
reconciler:
  backoff: [10s, 30s, 1m, 5m, 10m, 15m]
cluster:
  node_id: file-node
backups:
  bundle_interval: 24h
policy:
  public_sharing: none
  min_security_score: 70
  egress_allowlist: [a.example.com]
`)
	env := map[string]string{
		"SVC_SERVER_ADDR":                          ":7070",
		"SVC_APP_PORT_END":                         "10010",
		"SVC_LOG_FORMAT":                           "json",
		"SVC_DISK_CHECK_INTERVAL":                  "15s",
		"SVC_POLICY_MIN_SECURITY_SCORE":            "80",
		"SVC_POLICY_REQUIRE_BACKUP_BEFORE_DESTROY": "yes",
	}
	c := mustLoad(t, LoadArgs{Env: envList(env), File: file})

	if c.File != file {
		t.Errorf("File = %q, want %q", c.File, file)
	}
	want := map[string]struct {
		value  string
		origin Origin
	}{
		"server.addr":             {":7070", OriginEnvironment},
		"server.routing_mode":     {"subdomain", OriginConfigFile},
		"server.shutdown_timeout": {"10s", OriginConfigFile},
		"server.base_domain":      {"svc.localhost", OriginDefault},
		"server.issuer":           {"http://localhost:7070", OriginDefault},
		"app.port_start":          {"10000", OriginConfigFile},
		"app.port_end":            {"10010", OriginEnvironment},
		"log.level":               {"debug", OriginConfigFile},
		"log.format":              {"json", OriginEnvironment},
		"reconciler.backoff":      {"10s,30s,1m0s,5m0s,10m0s,15m0s", OriginConfigFile},
		"cluster.node_id":         {"file-node", OriginConfigFile},
		"disk.check_interval":     {"15s", OriginEnvironment},
		"backups.bundle_interval": {"24h0m0s", OriginConfigFile},
	}
	got := settingsByName(c)
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			s := got[name]
			if s.Value != w.value || s.Origin != w.origin {
				t.Errorf("got %q (%s), want %q (%s)", s.Value, s.Origin, w.value, w.origin)
			}
		})
	}
	if c.Server.Addr != ":7070" || c.App.PortStart != 10000 || c.App.PortEnd != 10010 || c.Log.Level != slog.LevelDebug ||
		c.Log.Format != "json" || c.Server.ShutdownTimeout != 10*time.Second || c.Cluster.NodeID != "file-node" ||
		c.Disk.CheckInterval != 15*time.Second {
		t.Errorf("typed fields do not match the settings: %+v", c)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("Warnings = %q, want none (the file's schedule is slower than the shipped one)", c.Warnings)
	}

	wantFixed := []policy.FixedEntry{
		{Name: "public_sharing", Value: "none", Origin: "config_file"},
		{Name: "egress_allowlist", Value: []string{"a.example.com"}, Origin: "config_file"},
		{Name: "require_backup_before_destroy", Value: true, Origin: "environment"},
		{Name: "min_security_score", Value: 80, Origin: "environment"},
	}
	if diff := cmp.Diff(wantFixed, c.Policy.Entries()); diff != "" {
		t.Errorf("policy entries mismatch (-want +got):\n%s", diff)
	}
	eff := c.Policy.Apply(policy.Default())
	if eff.PublicSharing != "none" || eff.MinSecurityScore != 80 || !eff.RequireBackupBeforeDestroy {
		t.Errorf("Apply() = %+v, want the fixed values", eff)
	}
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // the whole error
	}{
		{"addr no port", map[string]string{"SVC_SERVER_ADDR": "localhost"}, `SVC_SERVER_ADDR: "localhost" is not a listen address (accepted: host:port or :port with port 0-65535, e.g. ":8080")`},
		{"addr port range", map[string]string{"SVC_SERVER_ADDR": ":70000"}, `SVC_SERVER_ADDR: ":70000" is not a listen address (accepted: host:port or :port with port 0-65535, e.g. ":8080")`},
		{"addr port name", map[string]string{"SVC_SERVER_ADDR": ":http"}, `SVC_SERVER_ADDR: ":http" is not a listen address (accepted: host:port or :port with port 0-65535, e.g. ":8080")`},
		{"addr bad host", map[string]string{"SVC_SERVER_ADDR": "a b:80"}, `SVC_SERVER_ADDR: "a b:80" is not a listen address (accepted: host:port or :port with port 0-65535, e.g. ":8080")`},
		{"addr empty", map[string]string{"SVC_SERVER_ADDR": ""}, `SVC_SERVER_ADDR: "" is not a listen address (accepted: host:port or :port with port 0-65535, e.g. ":8080")`},
		{"base domain", map[string]string{"SVC_SERVER_BASE_DOMAIN": "not a domain"}, `SVC_SERVER_BASE_DOMAIN: "not a domain" is not a domain name (e.g. svc.example.com)`},
		{"routing mode", map[string]string{"SVC_SERVER_ROUTING_MODE": "host"}, `SVC_SERVER_ROUTING_MODE: "host" is not a routing mode (accepted: port, subdomain, path)`},
		{"issuer space", map[string]string{"SVC_SERVER_ISSUER": "my issuer"}, `SVC_SERVER_ISSUER: "my issuer" contains whitespace or a control character`},
		{"external url relative", map[string]string{"SVC_SERVER_EXTERNAL_URL": "svc.example.com"}, `SVC_SERVER_EXTERNAL_URL: "svc.example.com" is not an absolute http or https URL (e.g. https://svc.example.com)`},
		{"external url scheme", map[string]string{"SVC_SERVER_EXTERNAL_URL": "ftp://svc.example.com"}, `SVC_SERVER_EXTERNAL_URL: "ftp://svc.example.com" is not an absolute http or https URL (e.g. https://svc.example.com)`},
		{"proxy upstream", map[string]string{"SVC_SERVER_PROXY_UPSTREAM": "http://"}, `SVC_SERVER_PROXY_UPSTREAM: "http://" is not an absolute http or https URL (e.g. http://127.0.0.1:8081)`},
		{"work dir empty", map[string]string{"SVC_SERVER_WORK_DIR": ""}, `SVC_SERVER_WORK_DIR: "" is not a directory path (e.g. /var/lib/svc)`},
		{"shutdown timeout unit", map[string]string{"SVC_SERVER_SHUTDOWN_TIMEOUT": "30"}, `SVC_SERVER_SHUTDOWN_TIMEOUT: "30" is not a duration (accepted: a Go duration such as 30s or 1m30s)`},
		{"shutdown timeout zero", map[string]string{"SVC_SERVER_SHUTDOWN_TIMEOUT": "0s"}, `SVC_SERVER_SHUTDOWN_TIMEOUT: "0s" is not greater than zero`},
		{"shutdown timeout negative", map[string]string{"SVC_SERVER_SHUTDOWN_TIMEOUT": "-5s"}, `SVC_SERVER_SHUTDOWN_TIMEOUT: "-5s" is not greater than zero`},
		{"port start words", map[string]string{"SVC_APP_PORT_START": "abc"}, `SVC_APP_PORT_START: "abc" is not a port number (1-65535)`},
		{"port start zero", map[string]string{"SVC_APP_PORT_START": "0"}, `SVC_APP_PORT_START: "0" is not a port number (1-65535)`},
		{"port end high", map[string]string{"SVC_APP_PORT_END": "65536"}, `SVC_APP_PORT_END: "65536" is not a port number (1-65535)`},
		{"port plus", map[string]string{"SVC_APP_PORT_END": "+9100"}, `SVC_APP_PORT_END: "+9100" is not a port number (1-65535)`},
		{"port range", map[string]string{"SVC_APP_PORT_START": "9100", "SVC_APP_PORT_END": "9000"}, `SVC_APP_PORT_START (9100) is greater than SVC_APP_PORT_END (9000); the app port range must not be empty`},
		{"port range default end", map[string]string{"SVC_APP_PORT_START": "9500"}, `SVC_APP_PORT_START (9500) is greater than SVC_APP_PORT_END (default) (9019); the app port range must not be empty`},
		{"workload port low", map[string]string{"SVC_RUNTIME_WORKLOAD_PORT_START": "80"}, `SVC_RUNTIME_WORKLOAD_PORT_START: "80" is not a port number (1024-65535)`},
		{"workload port range", map[string]string{"SVC_RUNTIME_WORKLOAD_PORT_START": "30000"}, `SVC_RUNTIME_WORKLOAD_PORT_START (30000) is greater than SVC_RUNTIME_WORKLOAD_PORT_END (default) (19999); the workload port range must not be empty`},
		{"log level", map[string]string{"SVC_LOG_LEVEL": "verbose"}, `SVC_LOG_LEVEL: "verbose" is not a log level (accepted: debug, info, warn, error)`},
		{"log format", map[string]string{"SVC_LOG_FORMAT": "xml"}, `SVC_LOG_FORMAT: "xml" is not a log format (accepted: text, json)`},
		{"webhook schedule bad step", map[string]string{"SVC_EVENTS_RETRY_SCHEDULE": "1m,later"}, `SVC_EVENTS_RETRY_SCHEDULE: step 2: "later" is not a duration (accepted: a Go duration such as 30s or 1m30s)`},
		{"attempt timeout zero", map[string]string{"SVC_EVENTS_ATTEMPT_TIMEOUT": "0s"}, `SVC_EVENTS_ATTEMPT_TIMEOUT: "0s" is not greater than zero`},
		{"backoff empty", map[string]string{"SVC_RECONCILER_BACKOFF": ""}, `SVC_RECONCILER_BACKOFF: an empty schedule is not accepted (accepted: comma-separated Go durations such as 5s,15s,1m)`},
		{"backoff bad step", map[string]string{"SVC_RECONCILER_BACKOFF": "5s,soon"}, `SVC_RECONCILER_BACKOFF: step 2: "soon" is not a duration (accepted: a Go duration such as 30s or 1m30s)`},
		{"backoff zero step", map[string]string{"SVC_RECONCILER_BACKOFF": "0s"}, `SVC_RECONCILER_BACKOFF: step 1: "0s" is not greater than zero`},
		{"backoff empty step", map[string]string{"SVC_RECONCILER_BACKOFF": "5s,,10s"}, `SVC_RECONCILER_BACKOFF: step 2 is empty (accepted: comma-separated Go durations such as 5s,15s,1m)`},
		{"backoff too long", map[string]string{"SVC_RECONCILER_BACKOFF": strings.Repeat("5m,", 20) + "5m"}, `SVC_RECONCILER_BACKOFF: the schedule has 21 steps; at most 20 are accepted`},
		{"node id", map[string]string{"SVC_CLUSTER_NODE_ID": "node a"}, `SVC_CLUSTER_NODE_ID: "node a" is not a node id (accepted: 1 to 64 of A-Z a-z 0-9 . _ -)`},
		{"node id long", map[string]string{"SVC_CLUSTER_NODE_ID": strings.Repeat("n", 65)}, `SVC_CLUSTER_NODE_ID: "` + strings.Repeat("n", 65) + `" is not a node id (accepted: 1 to 64 of A-Z a-z 0-9 . _ -)`},
		{"raft addr unspecified", map[string]string{"SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": "0.0.0.0:7000", "SVC_CLUSTER_SECRET": canary}, `SVC_CLUSTER_RAFT_ADDR: "0.0.0.0:7000" is not a concrete address: other nodes must be able to reach it (e.g. 10.0.0.5:7000)`},
		{"raft addr unspecified v6", map[string]string{"SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": "[::]:7000", "SVC_CLUSTER_SECRET": canary}, `SVC_CLUSTER_RAFT_ADDR: "[::]:7000" is not a concrete address: other nodes must be able to reach it (e.g. 10.0.0.5:7000)`},
		{"raft addr no host", map[string]string{"SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": ":7000", "SVC_CLUSTER_SECRET": canary}, `SVC_CLUSTER_RAFT_ADDR: ":7000" is not a raft address (accepted: host:port with a host other nodes can reach and port 1-65535, e.g. 10.0.0.5:7000)`},
		{"raft addr port zero", map[string]string{"SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": "10.0.0.5:0", "SVC_CLUSTER_SECRET": canary}, `SVC_CLUSTER_RAFT_ADDR: "10.0.0.5:0" is not a raft address (accepted: host:port with a host other nodes can reach and port 1-65535, e.g. 10.0.0.5:7000)`},
		{"raft without secret", map[string]string{"SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": "10.0.0.5:7000"}, `SVC_CLUSTER_SECRET (default) is not set; it must have at least 16 characters when SVC_CLUSTER_RAFT_ADDR is set`},
		{"snapshot threshold too small", map[string]string{"SVC_CLUSTER_SNAPSHOT_THRESHOLD": "8"}, `SVC_CLUSTER_SNAPSHOT_THRESHOLD: "8" is not a whole number from 16 to 1073741824`},
		{"trailing logs not a number", map[string]string{"SVC_CLUSTER_TRAILING_LOGS": "many"}, `SVC_CLUSTER_TRAILING_LOGS: "many" is not a whole number from 1 to 1073741824`},
		{"raft short secret", map[string]string{"SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": "10.0.0.5:7000", "SVC_CLUSTER_SECRET": "short"}, `SVC_CLUSTER_SECRET has 5 characters; it must have at least 16 characters when SVC_CLUSTER_RAFT_ADDR is set`},
		{"peers without raft", map[string]string{"SVC_CLUSTER_PEERS": "node-a=10.0.0.5:7000"}, `SVC_CLUSTER_PEERS is set but SVC_CLUSTER_RAFT_ADDR (default) is not; a cluster needs this node's raft address`},
		{"peers without self", map[string]string{"SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": "10.0.0.5:7000", "SVC_CLUSTER_SECRET": canary, "SVC_CLUSTER_PEERS": "b=10.0.0.6:7000,c=10.0.0.7:7000"},
			`SVC_CLUSTER_PEERS does not list this node "node-a" (from SVC_CLUSTER_NODE_ID); the peers must include it as node-a=10.0.0.5:7000`},
		{"peers self other addr", map[string]string{"SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": "10.0.0.5:7000", "SVC_CLUSTER_SECRET": canary, "SVC_CLUSTER_PEERS": "node-a=10.0.0.9:7000,b=10.0.0.6:7000"},
			`SVC_CLUSTER_PEERS lists this node "node-a" at "10.0.0.9:7000", but SVC_CLUSTER_RAFT_ADDR is "10.0.0.5:7000"; they must be the same`},
		{"peers syntax", map[string]string{"SVC_CLUSTER_PEERS": "node-a@10.0.0.5:7000"}, `SVC_CLUSTER_PEERS: peer 1: "node-a@10.0.0.5:7000" is not id=host:port (e.g. node1=10.0.0.5:7000)`},
		{"peers duplicate id", map[string]string{"SVC_CLUSTER_PEERS": "a=h1:7000,a=h2:7000"}, `SVC_CLUSTER_PEERS: peer id "a" is listed twice`},
		{"peers duplicate addr", map[string]string{"SVC_CLUSTER_PEERS": "a=h1:7000,b=H1:07000"}, `SVC_CLUSTER_PEERS: address "H1:07000" is listed for both a and b`},
		{"database postgres", map[string]string{"SVC_DATABASE_URL": "postgres://svc@db.example.com/svc"},
			`SVC_DATABASE_URL: "postgres://xxxxx@db.example.com/svc" cannot be used: svc keeps its state in its embedded replicated Raft store and cannot use an external database; unset SVC_DATABASE_URL, or point it at a store directory with file:///path`},
		{"database relative", map[string]string{"SVC_DATABASE_URL": "data/raft"},
			`SVC_DATABASE_URL: "data/raft" is not a store directory (accepted: empty for the bundled store under <work_dir>/raft, file:///absolute/path or an absolute path)`},
		{"database file host", map[string]string{"SVC_DATABASE_URL": "file://data/raft"},
			`SVC_DATABASE_URL: "file://data/raft" is not a file URL of a directory (accepted: empty for the bundled store under <work_dir>/raft, file:///absolute/path or an absolute path)`},
		{"database file relative", map[string]string{"SVC_DATABASE_URL": "file:data"},
			`SVC_DATABASE_URL: "file:data" is not a file URL of a directory (accepted: empty for the bundled store under <work_dir>/raft, file:///absolute/path or an absolute path)`},
		{"policy unknown", map[string]string{"SVC_POLICY_MAX_WIDGETS": "3"},
			`SVC_POLICY_MAX_WIDGETS: unknown policy setting "max_widgets" (known settings: ` + strings.Join(policy.Names(), ", ") + `)`},
		{"policy empty name", map[string]string{"SVC_POLICY_": "3"},
			`SVC_POLICY_: unknown policy setting "" (known settings: ` + strings.Join(policy.Names(), ", ") + `)`},
		{"policy bad value", map[string]string{"SVC_POLICY_PUBLIC_SHARING": "everyone"},
			`SVC_POLICY_PUBLIC_SHARING: "everyone" is not accepted (accepted: allowed, passcode_only, none, or empty for unset)`},
		{"policy bad int", map[string]string{"SVC_POLICY_MAX_TOKEN_LIFETIME_DAYS": "ninety"},
			`SVC_POLICY_MAX_TOKEN_LIFETIME_DAYS: "ninety" is not a whole number`},
		{"policy bad verb", map[string]string{"SVC_POLICY_DISABLED_VERBS": "app.exec,app.fly"},
			`SVC_POLICY_DISABLED_VERBS: item 2: "app.fly" is not a known verb (known verbs: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(LoadArgs{Env: envList(tt.env)})
			if err == nil {
				t.Fatalf("Load() = %+v, want error %q", c, tt.want)
			}
			if c != nil {
				t.Errorf("Load() returned a config with its error")
			}
			got := err.Error()
			if strings.HasSuffix(tt.want, "(known verbs: ") {
				if !strings.HasPrefix(got, tt.want) {
					t.Errorf("got error\n%s\nwant it to start with\n%s", got, tt.want)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got error\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestNodeID(t *testing.T) {
	c := mustLoad(t, LoadArgs{})
	if c.Cluster.NodeID != "" {
		t.Errorf("default NodeID = %q, want empty (resolved from the store directory)", c.Cluster.NodeID)
	}
	c.SetNodeID("generated-1")
	if got := settingValue(t, c, "cluster.node_id"); got != "generated-1" || c.Cluster.NodeID != "generated-1" {
		t.Errorf("after SetNodeID: setting %q, NodeID %q", got, c.Cluster.NodeID)
	}
	c = mustLoad(t, LoadArgs{Env: []string{"SVC_CLUSTER_NODE_ID=n1"}})
	c.SetNodeID("ignored")
	if c.Cluster.NodeID != "n1" {
		t.Errorf("NodeID = %q, want n1", c.Cluster.NodeID)
	}
	_, err := Load(LoadArgs{Env: []string{"SVC_CLUSTER_RAFT_ADDR=10.0.0.1:8301", "SVC_CLUSTER_SECRET=0123456789abcdef"}})
	want := "SVC_CLUSTER_RAFT_ADDR is set but SVC_CLUSTER_NODE_ID is not; every node of a cluster needs an id, the one SVC_CLUSTER_PEERS names it by"
	if err == nil || err.Error() != want {
		t.Errorf("cluster without node id: got %v, want %q", err, want)
	}
}

func settingValue(t *testing.T, c *Config, name string) string {
	t.Helper()
	for _, s := range c.Settings {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("no setting %s", name)
	return ""
}

func TestSeveralErrorsReportedTogether(t *testing.T) {
	file := writeFile(t, "server:\n  routing_mode: host\n  bogus: 1\n")
	_, err := Load(LoadArgs{
		Env:  []string{"SVC_APP_PORT_START=abc", "SVC_LOG_LEVEL=loud", "SVC_POLICY_NOPE=1"},
		File: file,
	})
	if err == nil {
		t.Fatal("Load() succeeded, want errors")
	}
	want := []string{
		"config file " + file + ": server.bogus: unknown key (known keys under server: addr, base_domain, apps_domain, routing_mode, issuer, external_url, proxy_upstream, work_dir, shutdown_timeout, trusted_proxies)",
		"config file " + file + `: server.routing_mode: "host" is not a routing mode (accepted: port, subdomain, path)`,
		`SVC_APP_PORT_START: "abc" is not a port number (1-65535)`,
		`SVC_LOG_LEVEL: "loud" is not a log level (accepted: debug, info, warn, error)`,
		`SVC_POLICY_NOPE: unknown policy setting "nope" (known settings: ` + strings.Join(policy.Names(), ", ") + ")",
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("error lines mismatch (-want +got):\n%s", diff)
	}
}

func TestFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // after "config file <path>: "
	}{
		{"unknown section", "servr:\n  addr: :80\n", "servr: unknown key (known keys: admin, app, backups, cluster, database, disk, events, log, reconciler, runtime, server, upgrade, policy, adapters)"},
		{"unknown key", "app:\n  port_begin: 9000\n", "app.port_begin: unknown key (known keys under app: port_start, port_end)"},
		{"odd key", "app:\n  \"port start\": 9000\n", `app."port start": unknown key (known keys under app: port_start, port_end)`},
		{"nested too deep", "server:\n  addr:\n    host: x\n", "server.addr: expected a single value, not a mapping"},
		{"list for scalar", "server:\n  addr: [a, b]\n", "server.addr: expected a single value, not a list"},
		{"section scalar", "server: 8080\n", "server: expected a mapping of settings (e.g. server: {addr: …})"},
		{"top level list", "- a\n- b\n", `line 1: the top level must be a mapping of sections (e.g. server: {addr: ":8080"})`},
		{"duplicate key", "app:\n  port_start: 9000\n  port_start: 9001\n", "app.port_start: set twice (lines 2 and 3)"},
		{"null value", "server:\n  addr:\n", "server.addr: a value is required"},
		{"bad value", "app:\n  port_start: abc\n", `app.port_start: "abc" is not a port number (1-65535)`},
		{"float port", "app:\n  port_start: 9000.5\n", `app.port_start: "9000.5" is not a port number (1-65535)`},
		{"backoff item list", "reconciler:\n  backoff: [5s, [1s]]\n", "reconciler.backoff: item 2 is not a single value"},
		{"backoff bad item", "reconciler:\n  backoff: [5s, 5]\n", `reconciler.backoff: step 2: "5" is not a duration (accepted: a Go duration such as 30s or 1m30s)`},
		{"no workers", "reconciler:\n  workers: 0\n", `reconciler.workers: "0" is not a whole number from 1 to 1024`},
		{"disk check not a duration", "disk:\n  check_interval: often\n", `disk.check_interval: "often" is not a duration (accepted: a Go duration such as 30s or 1m30s)`},
		{"disk check too often", "disk:\n  check_interval: 500ms\n", `disk.check_interval: "500ms" is not from 1s to 24h0m0s`},
		{"disk check too rare", "disk:\n  check_interval: 25h\n", `disk.check_interval: "25h" is not from 1s to 24h0m0s`},
		{"disk check zero", "disk:\n  check_interval: 0s\n", `disk.check_interval: "0s" is not greater than zero`},
		{"bundles too often", "backups:\n  bundle_interval: 10m\n", `backups.bundle_interval: "10m" is not 0 (bundles only when asked) nor from 1h0m0s to 744h0m0s`},
		{"bundles not a duration", "backups:\n  bundle_interval: daily\n", `backups.bundle_interval: "daily" is not a duration (accepted: a Go duration such as 30s or 1m30s)`},
		{"no bundles kept", "backups:\n  bundle_keep: 0\n", `backups.bundle_keep: "0" is not a whole number from 1 to 1000`},
		{"database external", "database:\n  url: mysql://root:" + canary + "@db/svc\n",
			`database.url: "mysql://root:xxxxx@db/svc" cannot be used: svc keeps its state in its embedded replicated Raft store and cannot use an external database; remove database.url from the config file, or point it at a store directory with file:///path`},
		{"policy unknown", "policy:\n  max_widgets: 3\n", `policy.max_widgets: unknown policy setting "max_widgets" (known settings: ` + strings.Join(policy.Names(), ", ") + ")"},
		{"policy bad value", "policy:\n  min_security_score: 101\n", "policy.min_security_score: 101 is out of range (0 to 100)"},
		{"policy bad list", "policy:\n  egress_allowlist: [ok.example.com, \"not ok\"]\n", `policy.egress_allowlist: item 2: "not ok" is not a hostname, *.domain wildcard, IP address or CIDR`},
		{"policy not mapping", "policy: [a]\n", "policy: expected a mapping of policy settings (e.g. policy: {public_sharing: none})"},
		{"isolation", "runtime:\n  isolation: maybe\n", `runtime.isolation: "maybe" is not sandbox or none`},
		{"host port", "runtime:\n  sandbox_host_ports: [5432, x]\n", `runtime.sandbox_host_ports: "x" is not a TCP port`},
		{"host port range", "runtime:\n  sandbox_host_ports: [70000]\n", `runtime.sandbox_host_ports: "70000" is not a TCP port`},
		{"go cache seed", "runtime:\n  go_cache_seed: rel/dir\n", `runtime.go_cache_seed: "rel/dir" is not an absolute path`},
		{"port range from file", "app:\n  port_start: 9100\n  port_end: 9000\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, tt.content)
			_, err := Load(LoadArgs{File: file})
			if err == nil {
				t.Fatal("Load() succeeded, want an error")
			}
			want := "config file " + file + ": " + tt.want
			if tt.want == "" {
				want = "app.port_start (config file " + file + ") (9100) is greater than app.port_end (config file " + file + ") (9000); the app port range must not be empty"
			}
			if got := err.Error(); got != want {
				t.Errorf("got error\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestSandboxHostPorts: a sandbox may be given ports of the host's
// loopback, never svc's own or the apps' (that would open a way around
// the edge).
func TestSandboxHostPorts(t *testing.T) {
	c := mustLoad(t, LoadArgs{Env: []string{"SVC_RUNTIME_SANDBOX_HOST_PORTS=5432, 6379"}})
	if diff := cmp.Diff([]int{5432, 6379}, c.Runtime.SandboxHostPorts); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	if s := settingsByName(c)["runtime.sandbox_host_ports"]; s.Value != "5432,6379" {
		t.Errorf("listed as %q", s.Value)
	}
	for _, port := range []string{"8080", "9005"} {
		_, err := Load(LoadArgs{Env: []string{"SVC_RUNTIME_SANDBOX_HOST_PORTS=5432," + port}})
		if err == nil || !strings.Contains(err.Error(), "port "+port+", which is svc's own") {
			t.Errorf("port %s: %v, want a refusal", port, err)
		}
	}
}

func TestFileUnreadable(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	_, err := Load(LoadArgs{File: missing})
	if want := "config file " + missing + ": cannot read: no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("missing file: got %v, want %q", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: errors.Is(err, fs.ErrNotExist) = false for %v", err)
	}
	_, err = Load(LoadArgs{File: dir})
	if want := "config file " + dir + ": cannot read: is a directory"; err == nil || err.Error() != want {
		t.Errorf("directory: got %v, want %q", err, want)
	}
	bad := writeFile(t, "server:\n  addr: \":80\n")
	_, err = Load(LoadArgs{File: bad})
	if err == nil || !strings.HasPrefix(err.Error(), "config file "+bad+": invalid YAML: yaml: ") {
		t.Errorf("invalid YAML: got %v, want an error naming the file", err)
	}
}

func TestFileProblemsWithEnvironment(t *testing.T) {
	// A bad value in the file is reported even when the environment overrides it.
	file := writeFile(t, "app:\n  port_start: abc\n")
	_, err := Load(LoadArgs{File: file, Env: []string{"SVC_APP_PORT_START=9000"}})
	if want := "config file " + file + `: app.port_start: "abc" is not a port number (1-65535)`; err == nil || err.Error() != want {
		t.Errorf("got error %v, want %q", err, want)
	}
	// An unreadable file does not hide the environment's problems.
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	_, err = Load(LoadArgs{File: missing, Env: []string{"SVC_LOG_FORMAT=xml"}})
	want := "config file " + missing + ": cannot read: no such file or directory\n" + `SVC_LOG_FORMAT: "xml" is not a log format (accepted: text, json)`
	if err == nil || err.Error() != want {
		t.Errorf("got error\n%v\nwant\n%s", err, want)
	}
	// An oversized file is refused.
	big := writeFile(t, "# "+strings.Repeat("x", maxFileSize)+"\n")
	_, err = Load(LoadArgs{File: big})
	if want := "config file " + big + ": cannot read: larger than 1048576 bytes"; err == nil || err.Error() != want {
		t.Errorf("got error %v, want %q", err, want)
	}
}

func TestFileForms(t *testing.T) {
	tests := []struct {
		name    string
		content string
		check   func(t *testing.T, c *Config)
	}{
		{"empty file", "", func(t *testing.T, c *Config) {
			if c.Server.Addr != ":8080" {
				t.Errorf("Addr = %q, want the default", c.Server.Addr)
			}
		}},
		{"comments only", "# nothing\n", func(t *testing.T, c *Config) {}},
		{"null sections", "server:\npolicy:\n", func(t *testing.T, c *Config) {}},
		{"flow mapping", "server: {addr: \":9999\"}\n", func(t *testing.T, c *Config) {
			if c.Server.Addr != ":9999" {
				t.Errorf("Addr = %q, want :9999", c.Server.Addr)
			}
		}},
		{"unquoted colon", "server:\n  addr: :9999\n", func(t *testing.T, c *Config) {
			if c.Server.Addr != ":9999" {
				t.Errorf("Addr = %q, want :9999", c.Server.Addr)
			}
		}},
		{"comma string backoff", "reconciler:\n  backoff: \"10s, 1m\"\n", func(t *testing.T, c *Config) {
			if diff := cmp.Diff([]time.Duration{10 * time.Second, time.Minute}, c.Reconciler.Backoff); diff != "" {
				t.Errorf("Backoff mismatch (-want +got):\n%s", diff)
			}
		}},
		{"peers list", "cluster:\n  node_id: n1\n  raft_addr: 10.0.0.1:7000\n  secret: " + canary + "\n  peers:\n    - n1=10.0.0.1:7000\n    - n2=10.0.0.2:7000\n", func(t *testing.T, c *Config) {
			want := []Peer{{"n1", "10.0.0.1:7000"}, {"n2", "10.0.0.2:7000"}}
			if diff := cmp.Diff(want, c.Cluster.Peers); diff != "" {
				t.Errorf("Peers mismatch (-want +got):\n%s", diff)
			}
			if c.Cluster.Secret != canary {
				t.Errorf("Secret not read from the file")
			}
		}},
		{"secret kept as written", "admin:\n  password: 0123456789012345678901234567890\n", func(t *testing.T, c *Config) {
			if c.Admin.Password != "0123456789012345678901234567890" {
				t.Errorf("Password = %q, want the text as written", c.Admin.Password)
			}
		}},
		{"anchors and aliases", "x-base: &p 9100\napp:\n  port_start: *p\n  port_end: 9200\n", nil},
		{"alias", "app:\n  port_start: &p 9100\n  port_end: *p\n", func(t *testing.T, c *Config) {
			if c.App.PortStart != 9100 || c.App.PortEnd != 9100 {
				t.Errorf("ports = %d-%d, want 9100-9100", c.App.PortStart, c.App.PortEnd)
			}
		}},
		{"empty means unset", "server:\n  external_url: \"\"\n  issuer: ~\n", func(t *testing.T, c *Config) {
			s := settingsByName(c)
			if got := s["server.external_url"]; got.Origin != OriginConfigFile || got.Value != "" {
				t.Errorf("external_url = %+v, want empty from the file", got)
			}
			if c.Server.Issuer != "http://localhost:8080" {
				t.Errorf("Issuer = %q, want it derived", c.Server.Issuer)
			}
		}},
		{"policy values", "policy:\n  allow_anonymous_grants: no\n  max_log_disk_bytes: 512MiB\n  disabled_verbs: app.exec, app.deploy\n", func(t *testing.T, c *Config) {
			want := []policy.FixedEntry{
				{Name: "disabled_verbs", Value: []string{"app.exec", "app.deploy"}, Origin: "config_file"},
				{Name: "allow_anonymous_grants", Value: false, Origin: "config_file"},
				{Name: "max_log_disk_bytes", Value: int64(512 << 20), Origin: "config_file"},
			}
			if diff := cmp.Diff(want, c.Policy.Entries()); diff != "" {
				t.Errorf("policy mismatch (-want +got):\n%s", diff)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, tt.content)
			c, err := Load(LoadArgs{File: file})
			if tt.check == nil {
				if err == nil {
					t.Fatal("Load() succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error:\n%v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestPolicyEnvOverFile(t *testing.T) {
	file := writeFile(t, "policy:\n  public_sharing: none\n  insecure_action: stop\n")
	c := mustLoad(t, LoadArgs{File: file, Env: []string{"SVC_POLICY_PUBLIC_SHARING=passcode_only", "SVC_POLICY_source_allowlist=github.com/acme/*"}})
	want := []policy.FixedEntry{
		{Name: "source_allowlist", Value: []string{"github.com/acme/*"}, Origin: "environment"},
		{Name: "public_sharing", Value: "passcode_only", Origin: "environment"},
		{Name: "insecure_action", Value: "stop", Origin: "config_file"},
	}
	if diff := cmp.Diff(want, c.Policy.Entries()); diff != "" {
		t.Errorf("policy mismatch (-want +got):\n%s", diff)
	}
	// A bad value in the environment is reported even when the file's is good.
	_, err := Load(LoadArgs{File: file, Env: []string{"SVC_POLICY_INSECURE_ACTION=halt"}})
	if want := `SVC_POLICY_INSECURE_ACTION: "halt" is not accepted (accepted: warn, stop)`; err == nil || err.Error() != want {
		t.Errorf("got error %v, want %q", err, want)
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		file string
		want []string
	}{
		{"SVC_PORT ignored silently", []string{"SVC_PORT=8081"}, "", nil},
		{"unknown variables", []string{"SVC_ZETA=1", "SVC_ALPHA=" + canary, "SVC_POLICY=1", "OTHER=1", "svc_server_addr=x"}, "", []string{
			"unknown environment variable SVC_ALPHA ignored",
			"unknown environment variable SVC_POLICY ignored",
			"unknown environment variable SVC_ZETA ignored",
		}},
		{"shipped schedule", []string{"SVC_RECONCILER_BACKOFF=5s,15s,30s,1m,2m,5m"}, "", nil},
		{"slower schedule", []string{"SVC_RECONCILER_BACKOFF=10s,1m,10m"}, "", nil},
		{"longer schedule holding the last step", []string{"SVC_RECONCILER_BACKOFF=5s,15s,30s,1m,2m,5m,5m,10m"}, "", nil},
		{"faster first step", []string{"SVC_RECONCILER_BACKOFF=1s,15s,30s"}, "", []string{
			"SVC_RECONCILER_BACKOFF (environment) is faster than the shipped schedule 5s,15s,30s,1m0s,2m0s,5m0s; a failing app will be retried more aggressively",
		}},
		{"faster beyond the shipped length", []string{"SVC_RECONCILER_BACKOFF=5s,15s,30s,1m,2m,5m,1m"}, "", []string{
			"SVC_RECONCILER_BACKOFF (environment) is faster than the shipped schedule 5s,15s,30s,1m0s,2m0s,5m0s; a failing app will be retried more aggressively",
		}},
		{"shipped webhook schedule", []string{"SVC_EVENTS_RETRY_SCHEDULE=1m,5m,30m,2h,6h,12h"}, "", nil},
		{"faster webhook schedule", []string{"SVC_EVENTS_RETRY_SCHEDULE=100ms,200ms"}, "", []string{
			"SVC_EVENTS_RETRY_SCHEDULE (environment) is faster than the shipped schedule 1m0s,5m0s,30m0s,2h0m0s,6h0m0s,12h0m0s; failing webhooks will be retried more aggressively",
		}},
		{"an http external URL", []string{"SVC_SERVER_EXTERNAL_URL=http://svc.example.com"}, "", []string{
			"SVC_SERVER_EXTERNAL_URL is http: an external URL says TLS ends in front of svc, so the session cookie is Secure, and browsers keep it only over https; serve svc at an https address",
		}},
		{"an http external URL on localhost", []string{"SVC_SERVER_EXTERNAL_URL=http://localhost:8080"}, "", nil},
		{"faster from the file", nil, "reconciler:\n  backoff: [1s]\n", []string{
			"SVC_RECONCILER_BACKOFF (config_file) is faster than the shipped schedule 5s,15s,30s,1m0s,2m0s,5m0s; a failing app will be retried more aggressively",
		}},
		{"both kinds", []string{"SVC_RECONCILER_BACKOFF=1s", "SVC_X=1"}, "", []string{
			"SVC_RECONCILER_BACKOFF (environment) is faster than the shipped schedule 5s,15s,30s,1m0s,2m0s,5m0s; a failing app will be retried more aggressively",
			"unknown environment variable SVC_X ignored",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := LoadArgs{Env: tt.env}
			if tt.file != "" {
				args.File = writeFile(t, tt.file)
			}
			c := mustLoad(t, args)
			if diff := cmp.Diff(tt.want, c.Warnings); diff != "" {
				t.Errorf("Warnings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEmptyValues(t *testing.T) {
	emptyOK := []string{
		"SVC_DATABASE_URL", "SVC_SERVER_ISSUER", "SVC_SERVER_EXTERNAL_URL", "SVC_SERVER_PROXY_UPSTREAM",
		"SVC_ADMIN_PASSWORD", "SVC_CLUSTER_NODE_ID", "SVC_CLUSTER_RAFT_ADDR", "SVC_CLUSTER_PEERS", "SVC_CLUSTER_SECRET",
		"SVC_RUNTIME_ADVERTISE_HOST", "SVC_RUNTIME_SANDBOX_HOST_PORTS", "SVC_RUNTIME_GO_CACHE_SEED",
		"SVC_SERVER_TRUSTED_PROXIES", "SVC_SERVER_APPS_DOMAIN", "SVC_BACKUPS_RECIPIENTS", "SVC_UPGRADE_SIGNING_PUBLIC_KEY",
	}
	for _, d := range defs {
		t.Run(d.env(), func(t *testing.T) {
			c, err := Load(LoadArgs{Env: []string{d.env() + "="}})
			wantOK := false
			for _, e := range emptyOK {
				wantOK = wantOK || e == d.env()
			}
			if !wantOK {
				if err == nil || !strings.HasPrefix(err.Error(), d.env()+": ") {
					t.Errorf("got error %v, want one naming %s", err, d.env())
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error: %v", err)
			}
			if s := settingsByName(c)[d.name]; s.Origin != OriginEnvironment {
				t.Errorf("origin = %s, want environment", s.Origin)
			}
		})
	}
}

func TestEnvEntries(t *testing.T) {
	c := mustLoad(t, LoadArgs{Env: []string{"SVC_LOG_LEVEL=debug", "garbage", "=x", "SVC_LOG_LEVEL=WARN", "SVC_SERVER_ISSUER=urn:a=b"}})
	if c.Server.Issuer != "urn:a=b" {
		t.Errorf("Issuer = %q, want the whole value after the first =", c.Server.Issuer)
	}
	if c.Log.Level != slog.LevelWarn {
		t.Errorf("Level = %v, want the last entry's WARN", c.Log.Level)
	}
	if got := settingsByName(c)["log.level"].Value; got != "warn" {
		t.Errorf("log.level value = %q, want warn", got)
	}
	_, err := Load(LoadArgs{Env: []string{"SVC_SERVER_BASE_DOMAIN=a=b"}})
	if want := `SVC_SERVER_BASE_DOMAIN: "a=b" is not a domain name (e.g. svc.example.com)`; err == nil || err.Error() != want {
		t.Errorf("got error %v, want %q", err, want)
	}
}

func TestSecretsNeverLeak(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		file string
	}{
		{"admin and cluster secrets", map[string]string{"SVC_ADMIN_PASSWORD": canary, "SVC_CLUSTER_SECRET": canary, "SVC_APP_PORT_START": "x"}, ""},
		{"short cluster secret", map[string]string{"SVC_CLUSTER_SECRET": "CANARY", "SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": "10.0.0.1:7000"}, ""},
		{"database url password", map[string]string{"SVC_DATABASE_URL": "postgres://svc:" + canary + "@db:5432/svc?sslmode=disable"}, ""},
		{"database url password with slash and at", map[string]string{"SVC_DATABASE_URL": "postgres://svc:a/" + canary + "@x@db/svc"}, ""},
		{"database url password with hash", map[string]string{"SVC_DATABASE_URL": "postgres://svc:#" + canary + "@db/svc"}, ""},
		{"database url unparsable", map[string]string{"SVC_DATABASE_URL": "postgres://svc:" + canary + " x@db host/svc"}, ""},
		{"database url user token", map[string]string{"SVC_DATABASE_URL": "https://" + canary + "@db/svc"}, ""},
		{"database scheme-relative", map[string]string{"SVC_DATABASE_URL": "//svc:" + canary + "@db/svc"}, ""},
		{"database query password", map[string]string{"SVC_DATABASE_URL": "postgres://db/svc?user=svc&password=" + canary}, ""},
		{"database keyword string", map[string]string{"SVC_DATABASE_URL": "host=db user=svc password=" + canary + " dbname=svc"}, ""},
		{"database file url with userinfo", map[string]string{"SVC_DATABASE_URL": "file://svc:" + canary + "@/data"}, ""},
		{"database in file", nil, "database:\n  url: postgres://svc:" + canary + "@db/svc\n"},
		{"external url userinfo bad", map[string]string{"SVC_SERVER_EXTERNAL_URL": "ftp://u:" + canary + "@svc.example.com"}, ""},
		{"proxy upstream userinfo bad", map[string]string{"SVC_SERVER_PROXY_UPSTREAM": "tcp://u:" + canary + "@up"}, ""},
		{"issuer userinfo bad", map[string]string{"SVC_SERVER_ISSUER": "https://u:" + canary + "@x y"}, ""},
		{"secrets in file", nil, "admin:\n  password: " + canary + "\ncluster:\n  secret: " + canary + "\napp:\n  port_start: x\n"},
		{"secret as a list", nil, "admin:\n  password: [" + canary + "]\n"},
		{"unknown variable", map[string]string{"SVC_OOPS": canary}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := LoadArgs{Env: envList(tt.env)}
			if tt.file != "" {
				args.File = writeFile(t, tt.file)
			}
			c, err := Load(args)
			if err == nil {
				assertNoCanary(t, c)
				return
			}
			if strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "CANARY") {
				t.Errorf("error leaks the secret:\n%v", err)
			}
		})
	}
	// Valid settings that carry credentials are listed redacted.
	c := mustLoad(t, LoadArgs{Env: envList(map[string]string{
		"SVC_ADMIN_PASSWORD":  canary,
		"SVC_CLUSTER_SECRET":  canary,
		"SVC_CLUSTER_NODE_ID": "node-a", "SVC_CLUSTER_RAFT_ADDR": "10.0.0.1:7000",
		"SVC_SERVER_PROXY_UPSTREAM": "http://u:" + canary + "@127.0.0.1:8081",
		"SVC_SERVER_EXTERNAL_URL":   "https://u:" + canary + "@svc.example.com/",
	})})
	if c.Admin.Password != canary || c.Cluster.Secret != canary {
		t.Errorf("secrets were not loaded")
	}
	assertNoCanary(t, c)
	s := settingsByName(c)
	if got, want := s["server.proxy_upstream"].Value, "http://u:xxxxx@127.0.0.1:8081"; got != want {
		t.Errorf("proxy_upstream listed as %q, want %q", got, want)
	}
	for _, name := range []string{"admin.password", "cluster.secret"} {
		if got := s[name]; !got.Secret || got.Value != "" || got.Origin != OriginEnvironment {
			t.Errorf("%s listed as %+v, want secret, no value, origin environment", name, got)
		}
	}
}

func assertNoCanary(t *testing.T, c *Config) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"settings": c.Settings, "warnings": c.Warnings, "policy_fixed": c.Policy.Entries()})
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if strings.Contains(string(b), canary) {
		t.Errorf("listing leaks the secret: %s", b)
	}
}

func TestDatabaseURL(t *testing.T) {
	tests := []struct {
		url, workDir string
		wantDir      string
	}{
		{"", "", "/var/lib/svc/raft"},
		{"", "/srv/svc", "/srv/svc/raft"},
		{"file:///data/svc", "", "/data/svc"},
		{"file:///data/svc/", "", "/data/svc"},
		{"file://localhost/data/svc", "", "/data/svc"},
		{"FILE:///data/svc", "", "/data/svc"},
		{"file:/data/svc", "", "/data/svc"},
		{"file:///data/my%20store", "", "/data/my store"},
		{"/data/svc", "", "/data/svc"},
		{"/data/../data/svc/", "", "/data/svc"},
	}
	for _, tt := range tests {
		t.Run(tt.url+"|"+tt.workDir, func(t *testing.T) {
			env := map[string]string{"SVC_DATABASE_URL": tt.url}
			if tt.workDir != "" {
				env["SVC_SERVER_WORK_DIR"] = tt.workDir
			}
			c := mustLoad(t, LoadArgs{Env: envList(env)})
			if got := c.RaftDir(); got != tt.wantDir {
				t.Errorf("RaftDir() = %q, want %q", got, tt.wantDir)
			}
			if got := settingsByName(c)["database.url"]; got.Value != tt.url || got.Origin != OriginEnvironment {
				t.Errorf("database.url listed as %+v, want %q from the environment", got, tt.url)
			}
		})
	}
	for _, bad := range []string{"postgres://db/svc", "sqlite:///x.db", "file:///data?x=1", "file:///data#x", "relative/dir", "//db/svc", "file://svc@/data"} {
		t.Run("bad/"+bad, func(t *testing.T) {
			if _, err := Load(LoadArgs{Env: []string{"SVC_DATABASE_URL=" + bad}}); err == nil || !strings.HasPrefix(err.Error(), "SVC_DATABASE_URL: ") {
				t.Errorf("got error %v, want one naming SVC_DATABASE_URL", err)
			}
		})
	}
}

func TestIssuer(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		want       string
		wantOrigin Origin
	}{
		{"default addr", nil, "http://localhost:8080", OriginDefault},
		{"port only", map[string]string{"SVC_SERVER_ADDR": ":9000"}, "http://localhost:9000", OriginDefault},
		{"unspecified v4", map[string]string{"SVC_SERVER_ADDR": "0.0.0.0:8080"}, "http://localhost:8080", OriginDefault},
		{"unspecified v6", map[string]string{"SVC_SERVER_ADDR": "[::]:8080"}, "http://localhost:8080", OriginDefault},
		{"loopback", map[string]string{"SVC_SERVER_ADDR": "127.0.0.1:8080"}, "http://localhost:8080", OriginDefault},
		{"concrete ip", map[string]string{"SVC_SERVER_ADDR": "10.1.2.3:8443"}, "http://10.1.2.3:8443", OriginDefault},
		{"concrete v6", map[string]string{"SVC_SERVER_ADDR": "[2001:db8::1]:8080"}, "http://[2001:db8::1]:8080", OriginDefault},
		{"hostname", map[string]string{"SVC_SERVER_ADDR": "svc.internal:8080"}, "http://svc.internal:8080", OriginDefault},
		{"external url", map[string]string{"SVC_SERVER_EXTERNAL_URL": "https://svc.example.com/"}, "https://svc.example.com", OriginDefault},
		{"external url path", map[string]string{"SVC_SERVER_EXTERNAL_URL": "https://example.com/svc//"}, "https://example.com/svc", OriginDefault},
		{"explicit", map[string]string{"SVC_SERVER_ISSUER": "https://id.example.com", "SVC_SERVER_EXTERNAL_URL": "https://svc.example.com"}, "https://id.example.com", OriginEnvironment},
		{"explicit empty", map[string]string{"SVC_SERVER_ISSUER": ""}, "http://localhost:8080", OriginEnvironment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, LoadArgs{Env: envList(tt.env)})
			if c.Server.Issuer != tt.want {
				t.Errorf("Issuer = %q, want %q", c.Server.Issuer, tt.want)
			}
			if got := settingsByName(c)["server.issuer"]; got.Value != tt.want || got.Origin != tt.wantOrigin {
				t.Errorf("server.issuer listed as %+v, want %q (%s)", got, tt.want, tt.wantOrigin)
			}
		})
	}
}

func TestCluster(t *testing.T) {
	c := mustLoad(t, LoadArgs{Env: envList(map[string]string{
		"SVC_CLUSTER_NODE_ID":   "n2",
		"SVC_CLUSTER_RAFT_ADDR": "10.0.0.2:7000",
		"SVC_CLUSTER_SECRET":    canary,
		"SVC_CLUSTER_PEERS":     "n1=10.0.0.1:7000, n2=10.0.0.2:7000 ,n3=node3.internal:7000",
	})})
	want := []Peer{{"n1", "10.0.0.1:7000"}, {"n2", "10.0.0.2:7000"}, {"n3", "node3.internal:7000"}}
	if diff := cmp.Diff(want, c.Cluster.Peers); diff != "" {
		t.Errorf("Peers mismatch (-want +got):\n%s", diff)
	}
	if got := settingsByName(c)["cluster.peers"].Value; got != "n1=10.0.0.1:7000,n2=10.0.0.2:7000,n3=node3.internal:7000" {
		t.Errorf("cluster.peers listed as %q", got)
	}
	// A single node with a raft address and no peers is accepted.
	mustLoad(t, LoadArgs{Env: []string{"SVC_CLUSTER_NODE_ID=node-a", "SVC_CLUSTER_RAFT_ADDR=node-a.internal:7000", "SVC_CLUSTER_SECRET=" + canary}})
	// A secret without a raft address is harmless.
	mustLoad(t, LoadArgs{Env: []string{"SVC_CLUSTER_SECRET=x"}})
}

func TestParsePeers(t *testing.T) {
	tests := []struct {
		in      string
		want    []Peer
		wantErr string
	}{
		{"", nil, ""},
		{"  ", nil, ""},
		{"a=h:1", []Peer{{"a", "h:1"}}, ""},
		{"a = h:1 , b=10.0.0.2:7000", []Peer{{"a", "h:1"}, {"b", "10.0.0.2:7000"}}, ""},
		{"n.1_x-Y=[2001:db8::1]:7000", []Peer{{"n.1_x-Y", "[2001:db8::1]:7000"}}, ""},
		{"a=h:1,", nil, `peer 2: "" is not id=host:port`},
		{"=h:1", nil, `peer 1: "" is not a node id`},
		{"a/b=h:1", nil, `peer 1: "a/b" is not a node id`},
		{"a=h", nil, `peer 1 (a): "h" is not a raft address`},
		{"a=0.0.0.0:1", nil, `peer 1 (a): "0.0.0.0:1" is not a concrete address`},
		{"a=h:1,a=g:1", nil, `peer id "a" is listed twice`},
		{"a=h:1,b=h:1", nil, `address "h:1" is listed for both a and b`},
		{"a=[::1]:1,b=[0:0::1]:1", nil, `address "[0:0::1]:1" is listed for both a and b`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePeers(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parsePeers(%q) = %v, %v, want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePeers(%q) error: %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parsePeers(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseBackoff(t *testing.T) {
	tests := []struct {
		in      string
		want    []time.Duration
		wantErr string
	}{
		{"5s", []time.Duration{5 * time.Second}, ""},
		{" 1m30s , 2h,500ms", []time.Duration{90 * time.Second, 2 * time.Hour, 500 * time.Millisecond}, ""},
		{"10s,5s", []time.Duration{10 * time.Second, 5 * time.Second}, ""},
		{strings.TrimSuffix(strings.Repeat("1m,", 20), ","), func() []time.Duration {
			out := make([]time.Duration, 20)
			for i := range out {
				out[i] = time.Minute
			}
			return out
		}(), ""},
		{"", nil, "an empty schedule is not accepted"},
		{" , ", nil, "step 1 is empty"},
		{"5", nil, `step 1: "5" is not a duration`},
		{"5s,-1s", nil, `step 2: "-1s" is not greater than zero`},
		{"5s,5d", nil, `step 2: "5d" is not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseBackoff(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseBackoff(%q) = %v, %v, want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseBackoff(%q) error: %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseBackoff(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://user:pw@host/db", "postgres://user:xxxxx@host/db"},
		{"postgres://user@host/db", "postgres://xxxxx@host/db"},
		{"postgres://user:p/w@x@host/db", "postgres://user:xxxxx@host/db"},
		{"postgres://host/db?password=pw&x=1", "postgres://host/db?password=xxxxx&x=1"},
		{"host=db password=pw user=u", "host=db password=xxxxx user=u"},
		{"//user:pw@host", "//user:xxxxx@host"},
		{"file:///data/@x", "file:///data/@x"},
		{"https://svc.example.com", "https://svc.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := redact(tt.in); got != tt.want {
				t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestAppsDomain(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want string // "" for no error, else a part of it
	}{
		{"unset", nil, ""},
		{"a separate domain", []string{"SVC_SERVER_APPS_DOMAIN=apps.example.net", "SVC_SERVER_ROUTING_MODE=subdomain", "SVC_SERVER_EXTERNAL_URL=https://svc.example.com"}, ""},
		{"a sibling subdomain", []string{"SVC_SERVER_APPS_DOMAIN=apps.example.com", "SVC_SERVER_ROUTING_MODE=subdomain", "SVC_SERVER_EXTERNAL_URL=https://svc.example.com"}, ""},
		{"port mode", []string{"SVC_SERVER_APPS_DOMAIN=apps.example.net"}, ""},
		{"not a domain", []string{"SVC_SERVER_APPS_DOMAIN=https://apps.example.net"}, `SVC_SERVER_APPS_DOMAIN: "https://apps.example.net" is not a domain name`},
		{"the console among the apps", []string{"SVC_SERVER_APPS_DOMAIN=Example.com", "SVC_SERVER_ROUTING_MODE=subdomain", "SVC_SERVER_EXTERNAL_URL=https://svc.example.com."},
			"SVC_SERVER_EXTERNAL_URL puts the console at svc.example.com, under SVC_SERVER_APPS_DOMAIN example.com"},
		{"the console among the apps, port mode", []string{"SVC_SERVER_APPS_DOMAIN=example.com", "SVC_SERVER_EXTERNAL_URL=https://svc.example.com"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(LoadArgs{Env: tc.env})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Load: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Load: %v, want an error with %q", err, tc.want)
			case tc.want == "" && len(tc.env) > 0 && c.Server.AppsDomain == "":
				t.Errorf("AppsDomain not set")
			}
		})
	}
}
