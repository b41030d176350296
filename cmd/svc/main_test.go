package main

import (
	"net"
	"slices"
	"strings"
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

// TestEveryOperationHasACommand fails when an API route has no CLI
// command: every operation of the route table is called by a command
// (generated or written by hand), or says why it has none; and every
// command's endpoints are routes of the table.
func TestEveryOperationHasACommand(t *testing.T) {
	refs := commandRefs(newRoot())
	byEndpoint := map[string][]string{}
	for _, r := range refs {
		for _, e := range r.Endpoints {
			byEndpoint[e] = append(byEndpoint[e], r.Command)
		}
	}
	known := map[string]bool{}
	for _, op := range operations() {
		e := endpoint(op)
		known[e] = true
		if len(byEndpoint[e]) == 0 && op.NoCommand == "" {
			t.Errorf("%s (%s) has no command and says no reason", e, op.Name)
		}
	}
	for e, cmds := range byEndpoint {
		if !known[e] {
			t.Errorf("%v call %s, which is not a route", cmds, e)
		}
	}
	if len(operations()) < 100 {
		t.Errorf("only %d operations: the route table is not read", len(operations()))
	}
}

// TestOperationCommandsAreResourceVerb: each operation's own command is
// svc <resource> <verb> with the operation's name.
func TestOperationCommandsAreResourceVerb(t *testing.T) {
	root := newRoot()
	for _, op := range operations() {
		if op.NoCommand != "" || op.Produces == "websocket" {
			continue
		}
		want := "svc " + cliName(op.Resource()) + " " + cliName(op.VerbName())
		c, _, err := root.Find(strings.Fields(want)[1:])
		if err != nil || c.CommandPath() != want {
			t.Errorf("%s: no command %q", op.Name, want)
			continue
		}
		if !slices.Contains(opsOf(c), op.Name) {
			t.Errorf("%s does not call %s (calls %v)", want, op.Name, opsOf(c))
		}
	}
}
