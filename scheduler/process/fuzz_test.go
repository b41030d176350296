package process

import (
	"strings"
	"testing"
)

// The runtime parses what the kernel writes in /proc; a line it does not
// expect must be an error or be skipped, never a crash.

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("4242 (we ird) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 12 0 0 20 0 1 0 987654 1000000 321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"))
	f.Add([]byte("1 (a) S 1 2 3"))
	f.Add([]byte("12 (x"))
	f.Add([]byte(")) ) ( ("))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseProcStat(b)
		if err == nil && st.pid <= 0 {
			t.Fatalf("parsed a pid of %d from %q without an error", st.pid, b)
		}
	})
}

func FuzzParseNetTCP(f *testing.F) {
	f.Add([]byte("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n"))
	f.Add([]byte("header\n   1: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 0 0 0 0 0 99\n"))
	f.Add([]byte("header\n 0: zz:zz 0 0A 0 0 0 0 0 x\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		socks, err := parseNetTCP(b)
		if err != nil {
			return
		}
		if n := strings.Count(string(b), "\n") + 1; len(socks) > n {
			t.Fatalf("%d sockets from %d lines", len(socks), n)
		}
	})
}
