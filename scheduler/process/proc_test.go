package process

import (
	"net"
	"os"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// The command name holds a space and a parenthesis.
	line := "4242 (we ird) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 12 0 0 20 0 1 0 987654 1000000 321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{pid: 4242, state: 'S', pgrp: 4242, session: 4242, utime: 37, stime: 12, startTime: 987654, rssPages: 321}
	if st != want {
		t.Errorf("parsed %+v, want %+v", st, want)
	}
	for _, bad := range []string{"", "12 (x", "x (a) S 1", "1 (a) S 1 2 3"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

func TestReadOwnProcStat(t *testing.T) {
	st, err := readProcStat(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if st.pid != os.Getpid() || st.startTime == 0 || st.rssPages <= 0 {
		t.Errorf("own stat = %+v", st)
	}
}

func TestParseNetTCP(t *testing.T) {
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 20 4 30 10 -1
`
	tcp6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0000000000000000 100 0 0 10 0
`
	got, err := parseNetTCP([]byte(tcp))
	if err != nil {
		t.Fatal(err)
	}
	want := []listenSocket{
		{ip: net.IPv4(127, 0, 0, 1).To4(), port: 8080, inode: 111},
		{ip: net.IPv4zero.To4(), port: 80, inode: 222},
	}
	if len(got) != len(want) {
		t.Fatalf("sockets = %+v, want %+v (the established one left out)", got, want)
	}
	for i := range want {
		if !got[i].ip.Equal(want[i].ip) || got[i].port != want[i].port || got[i].inode != want[i].inode {
			t.Errorf("socket %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	got6, err := parseNetTCP([]byte(tcp6))
	if err != nil {
		t.Fatal(err)
	}
	if len(got6) != 1 || !got6[0].ip.Equal(net.IPv6loopback) || got6[0].port != 8081 {
		t.Errorf("tcp6 sockets = %+v, want [::1]:8081", got6)
	}
}

func TestListenSocketsSeesOwnListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	socks, err := listenSockets("/proc/net", port)
	if err != nil {
		t.Skipf("no /proc/net/tcp here: %v", err)
	}
	if len(socks) != 1 || !socks[0].ip.IsLoopback() {
		t.Errorf("listeners on %d = %+v, want one on loopback", port, socks)
	}
}

func TestMemTotal(t *testing.T) {
	m, err := memTotal()
	if err != nil {
		t.Skipf("no /proc/meminfo: %v", err)
	}
	if m < 1<<20 {
		t.Errorf("MemTotal = %d bytes", m)
	}
}
