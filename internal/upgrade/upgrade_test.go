package upgrade

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func marker(state, from, to string, attempts int, reported bool) *Marker {
	return &Marker{Record: Record{ID: "upg_1", State: state, From: from, To: to}, Attempts: attempts, Reported: reported}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		m       *Marker
		running string
		want    Action
		reason  string // a substring of the reason, "" for none
	}{
		{"no marker", nil, "1.0", Nothing, ""},
		{"the new binary's first start", marker(StateRestarting, "1.0", "1.1", 0, false), "1.1", Confirm, ""},
		{"the new binary started before and never finished", marker(StateRestarting, "1.0", "1.1", 1, false), "1.1", RollBack, "stopped after it was started"},
		{"the old binary after an interrupted swap", marker(StateRestarting, "1.0", "1.1", 0, false), "1.0", ReportFailed, "interrupted"},
		{"a third version", marker(StateRestarting, "1.0", "1.1", 0, false), "2.0", ReportFailed, "2.0 runs"},
		{"failed, not reported, old binary", marker(StateFailed, "1.0", "1.1", 0, false), "1.0", ReportFailed, ""},
		{"failed, reported", marker(StateFailed, "1.0", "1.1", 0, true), "1.0", Nothing, ""},
		{"failed, not reported, another binary", marker(StateFailed, "1.0", "1.1", 0, false), "1.1", Nothing, ""},
		{"done, not reported", marker(StateDone, "1.0", "1.1", 1, false), "1.1", ReportDone, ""},
		{"done, reported", marker(StateDone, "1.0", "1.1", 1, true), "1.1", Nothing, ""},
		{"done, then the old binary put back by hand", marker(StateDone, "1.0", "1.1", 1, false), "1.0", Nothing, ""},
		{"checking is never saved", marker(StateChecking, "1.0", "", 0, false), "1.0", Nothing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := Decide(tc.m, tc.running)
			if got != tc.want || (tc.reason == "") != (reason == "") || !strings.Contains(reason, tc.reason) {
				t.Errorf("Decide = %v %q; want %v with a reason containing %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

// TestMarkerLifecycle walks the marker through a rollback after the exec:
// the new binary counts its first start; a second start rolls back; the
// old binary reports the failure once.
func TestMarkerLifecycle(t *testing.T) {
	dir := t.TempDir()
	if m, err := Load(dir); m != nil || err != nil {
		t.Fatalf("Load of nothing: %v, %v", m, err)
	}
	m := marker(StateRestarting, "1.0", "1.1", 0, false)
	if err := Save(dir, m); err != nil {
		t.Fatal(err)
	}
	step := func(running string, want Action) *Marker {
		t.Helper()
		m, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		a, reason := Decide(m, running)
		if a != want {
			t.Fatalf("%s starting: %v, want %v", running, a, want)
		}
		switch a {
		case Confirm:
			m.Attempts++
		case RollBack, ReportFailed:
			if reason != "" {
				m.Fail(reason, time.Now())
			}
			if a == ReportFailed {
				m.Reported = true
			}
		}
		if err := Save(dir, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	step("1.1", Confirm)
	step("1.1", RollBack)
	m = step("1.0", ReportFailed)
	if m.State != StateFailed || m.Reason == nil || !strings.Contains(*m.Reason, "1.1 stopped") || m.FinishedAt == nil {
		t.Errorf("after the rollback: %+v", m)
	}
	step("1.0", Nothing)
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1.0.0", "1.0.0", 0},
		{"1.0.0", "1.0.1", -1},
		{"1.10.0", "1.9.0", 1},
		{"v1.2.0", "1.2.1", -1},
		{"1.2.0-rc1", "1.2.0", -1},
		{"1.2.0-rc2", "1.2.0-rc10", -1},
		{"1.2", "1.2.0", -1},
		{"dev", "1.0.0", 1},
		{"1.0.0-e2e", "1.1.0-e2e", -1},
	} {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := CompareVersions(tc.b, tc.a); got != -tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

func TestParseVersionOutput(t *testing.T) {
	for in, want := range map[string]string{
		"1.2.3\n":                "1.2.3",
		"  v1.2.3  \nmore\n":     "v1.2.3",
		"":                       "",
		"\n1.2.3\n":              "",
		"two words\n":            "",
		strings.Repeat("9", 129): "",
		"1.2.3\x00":              "",
	} {
		if got := ParseVersionOutput([]byte(in)); got != want {
			t.Errorf("ParseVersionOutput(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSignatures(t *testing.T) {
	pub, priv, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("a binary"))
	other := sha256.Sum256([]byte("another binary"))
	sig := Sign(sk, digest)
	for _, tc := range []struct {
		name   string
		digest [32]byte
		sig    string
		want   error
	}{
		{"good", digest, sig, nil},
		{"missing", digest, "", ErrNoSignature},
		{"another binary's", other, sig, ErrBadSignature},
		{"not base64", digest, "%%%", ErrBadSignature},
		{"too short", digest, "c2ln", ErrBadSignature},
	} {
		if err := Verify(pk, tc.digest, tc.sig); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := ParsePublicKey(priv + "AAAA"); err == nil {
		t.Error("ParsePublicKey took a key of the wrong length")
	}
}

func TestDue(t *testing.T) {
	ms := []Migration{{Version: "1.1.0", Name: "a"}, {Version: "1.2.0", Name: "b"}, {Version: "2.0.0", Name: "c"}}
	for _, tc := range []struct {
		from, to string
		want     string
	}{
		{"1.0.0", "1.2.0", "ab"},
		{"1.1.0", "2.0.0", "bc"},
		{"1.2.0", "1.2.5", ""},
		{"2.0.0", "1.0.0", ""}, // a downgrade runs none
	} {
		var got string
		for _, m := range Due(ms, tc.from, tc.to) {
			got += m.Name
		}
		if got != tc.want {
			t.Errorf("Due(%s → %s) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
}

// TestSwapAndCheck swaps a real executable in and back, and checks
// candidates by running them.
func TestSwapAndCheck(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "svc")
	write := func(path, v string) {
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho "+v+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(exe, "1.0")
	next, _, size, err := Receive(exe, strings.NewReader("#!/bin/sh\necho 1.1\n"))
	if err != nil || size == 0 || filepath.Dir(next) != dir {
		t.Fatalf("Receive: %s, %d, %v", next, size, err)
	}
	ctx := context.Background()
	if v, err := Check(ctx, next); err != nil || v != "1.1" {
		t.Fatalf("Check: %q, %v", v, err)
	}
	if err := Swap(exe, next); err != nil {
		t.Fatal(err)
	}
	if v, _ := Check(ctx, exe); v != "1.1" {
		t.Errorf("after Swap the executable is %q", v)
	}
	if v, _ := Check(ctx, PrevPath(exe)); v != "1.0" {
		t.Errorf("after Swap the previous binary is %q", v)
	}
	if err := SwapBack(exe); err != nil {
		t.Fatal(err)
	}
	if v, _ := Check(ctx, exe); v != "1.0" {
		t.Errorf("after SwapBack the executable is %q", v)
	}
	failing := filepath.Join(dir, "failing")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho cannot >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(ctx, failing); err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "cannot") {
		t.Errorf("Check of a failing binary: %v", err)
	}
}
