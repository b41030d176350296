package process

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Readings of /proc: process stats by process group, memory, sockets. Linux
// only; elsewhere they fail and the callers report that they cannot read.

// clockTicks is USER_HZ, the unit of the CPU times and start times in
// /proc/<pid>/stat. It is 100 on every Linux architecture Go supports (the
// kernel's ABI fixes it, whatever CONFIG_HZ is).
const clockTicks = 100

// procStat is what the runtime reads of /proc/<pid>/stat.
type procStat struct {
	pid     int
	state   byte
	pgrp    int
	session int
	// utime and stime are CPU times in clock ticks.
	utime, stime uint64
	// startTime is when the process started, in clock ticks since boot
	// (field 22): with the pid, it names one process for good.
	startTime uint64
	rssPages  int64
}

// parseProcStat parses the contents of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may hold spaces and parentheses itself,
// so the fields after it are found from its last ')'.
func parseProcStat(b []byte) (procStat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open || end+2 > len(b) {
		return procStat{}, errors.New("malformed stat")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return procStat{}, fmt.Errorf("malformed stat: pid: %w", err)
	}
	if pid <= 0 {
		return procStat{}, fmt.Errorf("malformed stat: pid %d", pid)
	}
	f := strings.Fields(string(b[end+2:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return procStat{}, errors.New("malformed stat: too few fields")
	}
	st := procStat{pid: pid, state: f[0][0]}
	ints := []struct {
		field int
		dst   *int
	}{{5, &st.pgrp}, {6, &st.session}}
	for _, x := range ints {
		if *x.dst, err = strconv.Atoi(f[x.field-3]); err != nil {
			return procStat{}, fmt.Errorf("malformed stat: field %d: %w", x.field, err)
		}
	}
	uints := []struct {
		field int
		dst   *uint64
	}{{14, &st.utime}, {15, &st.stime}, {22, &st.startTime}}
	for _, x := range uints {
		if *x.dst, err = strconv.ParseUint(f[x.field-3], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("malformed stat: field %d: %w", x.field, err)
		}
	}
	if st.rssPages, err = strconv.ParseInt(f[24-3], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("malformed stat: field 24: %w", err)
	}
	return st, nil
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

// processStartTime returns the start time of a live (not zombie) process,
// or false.
func processStartTime(pid int) (uint64, bool) {
	st, err := readProcStat(pid)
	if err != nil || st.state == 'Z' || st.state == 'X' {
		return 0, false
	}
	return st.startTime, true
}

// groupMembers walks /proc once and returns the live processes of each of
// the given process groups.
func groupMembers(pgids map[int]bool) (map[int][]procStat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int][]procStat{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.state == 'Z' || st.state == 'X' || !pgids[st.pgrp] {
			continue // gone meanwhile, a zombie, or another group
		}
		out[st.pgrp] = append(out[st.pgrp], st)
	}
	return out, nil
}

// groupAlive reports whether any live process is in the process group.
func groupAlive(pgid int) bool {
	m, err := groupMembers(map[int]bool{pgid: true})
	return err == nil && len(m[pgid]) > 0
}

// bootID names this boot of the machine: start times count from boot, so
// a record made before a reboot names no process now.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("meminfo: %w", err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("meminfo: no MemTotal")
}

// listenSocket is a TCP socket in state LISTEN, from /proc/net/tcp{,6}.
type listenSocket struct {
	ip    net.IP
	port  int
	inode uint64
}

// listenSockets returns the listening TCP sockets on a port in the network
// namespace whose /proc net directory is netDir: /proc/net for the
// server's own, /proc/<pid>/net for a process's.
func listenSockets(netDir string, port int) ([]listenSocket, error) {
	var out []listenSocket
	found := false
	for _, name := range []string{filepath.Join(netDir, "tcp"), filepath.Join(netDir, "tcp6")} {
		b, err := os.ReadFile(name)
		if err != nil {
			continue // no IPv6, say
		}
		found = true
		socks, err := parseNetTCP(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, s := range socks {
			if s.port == port {
				out = append(out, s)
			}
		}
	}
	if !found {
		return nil, errors.New("no /proc/net/tcp")
	}
	return out, nil
}

// parseNetTCP parses /proc/net/tcp or tcp6 and keeps the LISTEN sockets.
// A line is "sl local_address rem_address st tx:rx tr:when retrnsmt uid
// timeout inode ...", the address as hex words in host byte order (little
// endian here) and the port in hex.
func parseNetTCP(b []byte) ([]listenSocket, error) {
	var out []listenSocket
	lines := strings.Split(string(b), "\n")
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		host, port, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("malformed address %q", f[1])
		}
		raw, err := hex.DecodeString(host)
		if err != nil || (len(raw) != 4 && len(raw) != 16) {
			return nil, fmt.Errorf("malformed address %q", f[1])
		}
		// Each 32-bit word is in the kernel's byte order: reverse it.
		for i := 0; i < len(raw); i += 4 {
			raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
		}
		p, err := strconv.ParseUint(port, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("malformed port %q", port)
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed inode %q", f[9])
		}
		out = append(out, listenSocket{ip: net.IP(raw), port: int(p), inode: inode})
	}
	return out, nil
}

// socketInodes returns the inodes of the sockets the processes hold open.
// Processes whose descriptors cannot be read are skipped; ok is false if
// none could be read.
func socketInodes(procs []procStat) (inodes map[uint64]bool, ok bool) {
	inodes = map[uint64]bool{}
	for _, p := range procs {
		dir := filepath.Join("/proc", strconv.Itoa(p.pid), "fd")
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		ok = true
		for _, e := range ents {
			link, err := os.Readlink(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			if s, found := strings.CutPrefix(link, "socket:["); found {
				if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
					inodes[n] = true
				}
			}
		}
	}
	return inodes, ok
}

// loopbackOnly reports whether the process group listens on the port only
// at loopback addresses, and one of them. It is false when it does not
// listen there at all or listens at another address too. The sockets are
// those of the group leader's network namespace.
func loopbackOnly(pgid, port int) (string, bool) {
	socks, err := listenSockets(filepath.Join("/proc", strconv.Itoa(pgid), "net"), port)
	if err != nil || len(socks) == 0 {
		return "", false
	}
	members, err := groupMembers(map[int]bool{pgid: true})
	if err != nil || len(members[pgid]) == 0 {
		return "", false
	}
	if inodes, ok := socketInodes(members[pgid]); ok {
		own := socks[:0:0]
		for _, s := range socks {
			if inodes[s.inode] {
				own = append(own, s)
			}
		}
		socks = own
	}
	// Without access to its descriptors, every listener on the port is
	// taken for the workload's: the port was free when it was given out.
	if len(socks) == 0 {
		return "", false
	}
	for _, s := range socks {
		if !s.ip.IsLoopback() {
			return "", false
		}
	}
	return net.JoinHostPort(socks[0].ip.String(), strconv.Itoa(port)), true
}

// killGroup sends SIGKILL to a process group and waits, up to wait, until
// none of its processes lives.
// It never signals group 1 or below (kill(-1) reaches every process, and
// kill(0) this process's own group) nor this process's own group, whatever
// a record on disk says.
func killGroup(pgid int, wait time.Duration) {
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	end := time.Now().Add(wait)
	for groupAlive(pgid) && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
	}
}
