package main

import (
	"net"
	"testing"
)

func TestCommandRefsListTheCLI(t *testing.T) {
	refs := commandRefs(newRoot())
	got := map[string]bool{}
	for _, r := range refs {
		got[r.Command] = true
		if r.Summary == "" || r.Usage == "" {
			t.Errorf("%s has no summary or usage", r.Command)
		}
	}
	for _, want := range []string{"svc serve", "svc version", "svc adapters list", "svc adapters delete", "svc login", "svc logout",
		"svc apps list", "svc apps get", "svc apps create", "svc apps delete", "svc status", "svc deploy", "svc launch", "svc logs", "svc open"} {
		if !got[want] {
			t.Errorf("the reference lacks %q (has %v)", want, got)
		}
	}
}

func TestDisplayAddr(t *testing.T) {
	tests := map[string]string{
		"[::]:8080":      "localhost:8080",
		"0.0.0.0:8080":   "localhost:8080",
		"127.0.0.1:9000": "localhost:9000",
		"10.1.2.3:8080":  "10.1.2.3:8080",
	}
	for in, want := range tests {
		a, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := displayAddr(a); got != want {
			t.Errorf("displayAddr(%s) = %s, want %s", in, got, want)
		}
	}
}
