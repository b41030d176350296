package pgtest

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartListensAndStopStops(t *testing.T) {
	s := Start(t)
	if s.Version == "" || s.Password == "" || s.User == "" {
		t.Errorf("server = %+v", s)
	}
	if !strings.HasPrefix(s.URL(), "postgres://postgres:"+s.Password+"@127.0.0.1:") {
		t.Errorf("URL = %s", s.URL())
	}
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", s.Addr(), err)
	}
	c.Close()
	if !strings.Contains(s.Log(), "ready to accept connections") {
		t.Errorf("log:\n%s", s.Log())
	}
	s.Stop()
	s.Stop() // again: nothing
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("the port still answers after Stop")
	}
}

func TestBinariesRefusesABadSetting(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvBinDir, dir)
	if _, err := Binaries(); err == nil {
		t.Fatal("an empty directory was taken for the binaries")
	}
	for _, name := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := Binaries(); err != nil || got != dir {
		t.Fatalf("Binaries() = %q, %v", got, err)
	}
}
