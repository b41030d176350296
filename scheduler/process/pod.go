package process

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svchost/svc/internal/egress"
)

// A pod is the network a sandbox lives in, shared by every workload of a
// job (they reach each other on 127.0.0.1, and by name: each workload's
// name resolves to 127.0.0.1) and made afresh for each build:
//
//   - a holder process, `unshare --user --map-root-user --net sleep`, run as
//     the sandbox's owner, keeps a user and a network namespace alive;
//   - pasta (Debian's passt package; what rootless Podman uses) is attached
//     to that namespace: it forwards each workload's host port, bound on
//     the advertise host only (127.0.0.1 by default), to the workload's
//     port inside, and carries outbound traffic from inside to the world;
//     connections from inside to the host's own loopback are not carried
//     (--no-map-gw, no -T forwards but Config.HostPorts), so a workload
//     reaches neither svc's ports nor another app's but through the edge;
//   - with egress open, the link-local block (169.254.0.0/16, where clouds
//     answer with the instance's credentials) and AWS's IPv6 metadata
//     address are blackholed inside: an app reaches the host's neighbours
//     and the world, never the cloud's metadata service;
//   - when host policy's egress_allowlist names destinations, the namespace
//     gets no route at all: only loopback, where one port is forwarded to
//     an egress proxy (package egress) of this pod in the server, which
//     checks each destination; the workloads are told of it in HTTP_PROXY
//     and HTTPS_PROXY;
//   - the sandboxed processes join the namespaces with nsenter, then
//     bubblewrap gives each its own mount, PID, IPC and UTS namespaces
//     (sandbox.go).
//
// The holder and pasta each lead a process group of their own; the job's
// record names them, so a server that died leaves nothing a new one does
// not reap.

// podTools are the host programs a pod needs, found on PATH.
type podTools struct {
	unshare, nsenter, pasta, sleep, ip string
}

func findPodTools(pasta string) (podTools, error) {
	var t podTools
	if pasta == "" {
		pasta = "pasta"
	}
	for _, x := range []struct {
		dst  *string
		name string
		pkg  string
	}{{&t.pasta, pasta, "passt"}, {&t.unshare, "unshare", "util-linux"}, {&t.nsenter, "nsenter", "util-linux"}, {&t.sleep, "sleep", "coreutils"}, {&t.ip, "ip", "iproute2"}} {
		p, err := exec.LookPath(x.name)
		if err != nil {
			return podTools{}, fmt.Errorf("no %s (Debian package %s): %w", x.name, x.pkg, err)
		}
		*x.dst = p
	}
	return t, nil
}

// forward is a host port forwarded to a port inside a pod.
type forward struct {
	host   int // bound on the advertise host
	inside int
}

// podSpec is what a pod is made of.
type podSpec struct {
	owner owner
	// forwards are the workloads' ports.
	forwards []forward
	// allow restricts egress to the list (through the pod's proxy); nil
	// lets everything out.
	allow *egress.Allowlist
	// refused is told of each destination the proxy could not reach.
	refused func(dest string, err error)
	// names resolve to 127.0.0.1 inside (the job's workloads).
	names []string
}

// pod is a running pod.
type pod struct {
	id     string
	dir    string // the pod's generated files (passwd, group, hosts, resolv.conf)
	holder *exec.Cmd
	pasta  *exec.Cmd
	// proxyPort is the egress proxy's port, on loopback outside and inside
	// alike; 0 when egress is open.
	proxyPort int
	proxy     *egress.Proxy
	enter     []string // the nsenter command line that joins the namespaces
	pastaOut  *lockedWriter

	stopOnce sync.Once
}

// podStartTimeout bounds how long a pod may take to come up.
const podStartTimeout = 15 * time.Second

// startPod makes a pod. Its generated files live in WorkDir/pods/<id>.
func (r *Runtime) startPod(ctx context.Context, id string, sp podSpec) (*pod, error) {
	tools, err := r.podTools()
	if err != nil {
		return nil, err
	}
	return r.startPodWith(ctx, id, sp, tools)
}

func (r *Runtime) startPodWith(ctx context.Context, id string, sp podSpec, tools podTools) (_ *pod, err error) {
	p := &pod{id: id, dir: filepath.Join(r.cfg.WorkDir, "pods", id), pastaOut: &lockedWriter{}}
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	if err := r.writePodFiles(p.dir, sp); err != nil {
		return nil, fmt.Errorf("pod %s: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, podStartTimeout)
	defer cancel()

	// With egress open, the holder blackholes the metadata routes in its
	// new namespace before it becomes sleep: no process of the pod ever
	// runs without them.
	holder := []string{tools.unshare, "--user", "--map-root-user", "--net", "--"}
	if sp.allow == nil {
		holder = append(holder, "/bin/sh", "-c", metadataScript(tools.ip)+"exec "+tools.sleep+" infinity")
	} else {
		holder = append(holder, tools.sleep, "infinity")
	}
	p.holder = exec.Command(holder[0], holder[1:]...)
	p.holder.Env = []string{"PATH=/usr/bin:/bin"}
	p.holder.Dir = p.dir // where to look for what a job left behind
	holderOut := &lockedWriter{}
	p.holder.Stdout, p.holder.Stderr = holderOut, holderOut
	p.holder.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: sp.owner.credential()}
	if err := p.holder.Start(); err != nil {
		return nil, fmt.Errorf("pod %s: start the namespace holder: %w", id, err)
	}
	hpid := p.holder.Process.Pid
	holderDone := make(chan struct{})
	go func() { _ = p.holder.Wait(); close(holderDone) }()
	// The holder is ready once unshare has written its maps (and the
	// routes are in) and it has become sleep.
	if err := waitFor(ctx, func() bool {
		select {
		case <-holderDone:
			return true
		default:
		}
		exe, err := os.Readlink("/proc/" + strconv.Itoa(hpid) + "/exe")
		return err == nil && exe == tools.sleep
	}); err != nil {
		return nil, fmt.Errorf("pod %s: the namespace holder did not start (user namespaces may be off on this host): %w", id, err)
	}
	select {
	case <-holderDone:
		return nil, fmt.Errorf("pod %s: the namespace holder failed (user namespaces may be off on this host): %s", id, strings.TrimSpace(holderOut.String()))
	default:
	}
	p.enter = []string{tools.nsenter, "--target", strconv.Itoa(hpid), "--user", "--net", "--preserve-credentials", "--"}

	args := []string{"-f", "-q", "--no-map-gw", "-u", "none", "-U", "none"}
	if len(sp.forwards) == 0 {
		args = append(args, "-t", "none")
	}
	for _, f := range sp.forwards {
		args = append(args, "-t", fmt.Sprintf("%s/%d:%d", r.cfg.AdvertiseHost, f.host, f.inside))
	}
	var insidePorts []int
	if sp.allow != nil {
		// No route out: loopback only, and the proxy.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pod %s: egress proxy: %w", id, err)
		}
		p.proxyPort = ln.Addr().(*net.TCPAddr).Port
		d := &egress.Dialer{Allow: sp.allow}
		p.proxy = &egress.Proxy{Dial: d.Dial, Failed: sp.refused}
		go func() { _ = p.proxy.Serve(ln) }()
		args = append(args, "-T", strconv.Itoa(p.proxyPort))
		insidePorts = append(insidePorts, p.proxyPort)
	} else {
		args = append(args, "--config-net")
		if r.view.resolv.loopbackOnly() {
			args = append(args, "--dns-forward", dnsStub)
		}
	}
	for _, hp := range r.cfg.HostPorts {
		args = append(args, "-T", strconv.Itoa(hp))
		insidePorts = append(insidePorts, hp)
	}
	if len(r.cfg.HostPorts) == 0 && sp.allow == nil {
		args = append(args, "-T", "none")
	}
	args = append(args, strconv.Itoa(hpid))
	p.pasta = exec.Command(tools.pasta, args...)
	p.pasta.Env = []string{"PATH=/usr/bin:/bin"}
	p.pasta.Dir = p.dir
	p.pasta.Stdout, p.pasta.Stderr = p.pastaOut, p.pastaOut
	p.pasta.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: sp.owner.credential()}
	if err := p.pasta.Start(); err != nil {
		return nil, fmt.Errorf("pod %s: start pasta: %w", id, err)
	}
	exited := make(chan struct{})
	go func() { _ = p.pasta.Wait(); close(exited) }()
	ready := func() bool {
		select {
		case <-exited:
			return true // reported below
		default:
		}
		for _, f := range sp.forwards {
			if !listening("/proc/net", r.cfg.AdvertiseHost, f.host) {
				return false
			}
		}
		nsNet := p.netDir()
		for _, port := range insidePorts {
			if !listening(nsNet, "127.0.0.1", port) {
				return false
			}
		}
		return sp.allow != nil || hasDefaultRoute(nsNet)
	}
	if err := waitFor(ctx, ready); err != nil {
		return nil, fmt.Errorf("pod %s: pasta did not come up: %w: %s", id, err, p.pastaOutput())
	}
	select {
	case <-exited:
		return nil, fmt.Errorf("pod %s: pasta exited: %s", id, p.pastaOutput())
	default:
	}
	return p, nil
}

// metadataScript adds the blackhole routes of a pod with open egress, as
// the start of a shell script: the link-local block, and AWS's IPv6
// metadata address (which may fail where the host has no IPv6).
func metadataScript(ip string) string {
	return ip + " route add blackhole 169.254.0.0/16 && { " + ip + " -6 route add blackhole fd00:ec2::254/128 2>/dev/null || true; } && "
}

func (p *pod) pastaOutput() string {
	s := strings.TrimSpace(p.pastaOut.String())
	if s == "" {
		return "no output"
	}
	return s
}

// netDir is the pod's network namespace as /proc shows it.
func (p *pod) netDir() string {
	return "/proc/" + strconv.Itoa(p.holder.Process.Pid) + "/net"
}

// proxyEnv is what a pod's processes are told of its egress proxy.
func (p *pod) proxyEnv() map[string]string {
	if p.proxyPort == 0 {
		return nil
	}
	u := "http://127.0.0.1:" + strconv.Itoa(p.proxyPort)
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
	}
}

// pids are the pod's process groups, for the job's record.
func (p *pod) pids() map[string]int {
	out := map[string]int{}
	if p.holder != nil && p.holder.Process != nil {
		out["_pod-holder"] = p.holder.Process.Pid
	}
	if p.pasta != nil && p.pasta.Process != nil {
		out["_pod-pasta"] = p.pasta.Process.Pid
	}
	return out
}

// stop ends the pod: pasta, the holder (and with it the namespaces, once
// the last process in them is gone) and the proxy; its files go.
func (p *pod) stop() {
	p.stopOnce.Do(func() {
		for _, c := range []*exec.Cmd{p.pasta, p.holder} {
			if c != nil && c.Process != nil {
				killGroup(c.Process.Pid, 2*time.Second)
			}
		}
		if p.proxy != nil {
			p.proxy.Close()
		}
		if p.dir != "" {
			_ = os.RemoveAll(p.dir)
		}
	})
}

// writePodFiles writes the files a pod's sandboxes see in /etc: an account
// for the sandbox's user (uid 1000 inside), its group, the hosts (the
// job's workloads on 127.0.0.1) and the resolver.
func (r *Runtime) writePodFiles(dir string, sp podSpec) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	names := strings.Join(append([]string{"localhost"}, sp.names...), " ")
	files := map[string]string{
		"passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
			"app:x:1000:1000:app:/tmp:/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":       "root:x:0:\napp:x:1000:\nnogroup:x:65534:\n",
		"hosts":       "127.0.0.1\t" + names + "\n::1\t" + names + " ip6-localhost ip6-loopback\n",
		"resolv.conf": r.view.resolv.conf(sp.allow != nil),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// dnsStub is the address a pod's resolver is told when the host's own
// resolver is on its loopback (systemd-resolved's 127.0.0.53, say), which
// the pod cannot reach: pasta forwards DNS sent there to the host's.
// (An address of the benchmarking block 198.18.0.0/15: routed to pasta,
// used by no real resolver, and outside the blackholed link-local block.)
const dnsStub = "198.18.0.53"

// hostResolv is what a pod's resolv.conf is made from: the host's
// nameservers, and its search, domain and options lines.
type hostResolv struct {
	servers, rest []string
}

// parseResolv reads a resolv.conf.
func parseResolv(b []byte) hostResolv {
	var h hostResolv
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "nameserver":
			h.servers = append(h.servers, f[1])
		case len(f) > 0 && (f[0] == "search" || f[0] == "domain" || f[0] == "options"):
			h.rest = append(h.rest, strings.Join(f, " "))
		}
	}
	return h
}

// loopbackOnly says whether every nameserver is on the host's loopback
// (and there is one): then pasta must forward DNS to it (dnsStub).
func (h hostResolv) loopbackOnly() bool {
	for _, s := range h.servers {
		if a, err := netip.ParseAddr(s); err != nil || !a.IsLoopback() {
			return false
		}
	}
	return len(h.servers) > 0
}

// conf is a pod's resolv.conf: the host's servers but those on loopback,
// or the stub when those are all it has; a note and nothing else when
// egress goes through the proxy (which resolves names itself).
func (h hostResolv) conf(proxied bool) string {
	if proxied {
		return "# egress goes through the proxy in HTTP_PROXY; it resolves names\n"
	}
	var b strings.Builder
	if h.loopbackOnly() {
		b.WriteString("nameserver " + dnsStub + "\n")
	}
	for _, s := range h.servers {
		if a, err := netip.ParseAddr(s); err == nil && a.IsLoopback() {
			continue
		}
		b.WriteString("nameserver " + s + "\n")
	}
	for _, l := range h.rest {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// waitFor polls cond every 5 ms until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// listening reports whether a TCP socket listens on host:port in the
// network namespace whose /proc net directory is netDir (any address when
// host is unspecified).
func listening(netDir, host string, port int) bool {
	socks, err := listenSockets(netDir, port)
	if err != nil {
		return false
	}
	want := net.ParseIP(host)
	for _, s := range socks {
		if want == nil || want.IsUnspecified() || s.ip.Equal(want) || s.ip.IsUnspecified() {
			return true
		}
	}
	return false
}

// hasDefaultRoute reports whether the namespace whose /proc net directory
// is netDir has an IPv4 default route (pasta has configured it).
func hasDefaultRoute(netDir string) bool {
	b, err := os.ReadFile(filepath.Join(netDir, "route"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "00000000" && f[2] != "00000000" {
			return true
		}
	}
	return false
}

// lockedWriter keeps the first 4 KiB written to it, from any goroutine.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 4096 - l.b.Len(); room > 0 {
		l.b.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
