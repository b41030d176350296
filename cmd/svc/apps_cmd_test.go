package main

import (
	"testing"

	"github.com/svchost/svc/api"
)

// svc apps get says why svc itself stopped an app, and nothing more for
// an app a person stopped or one meant to run.
func TestDesiredOf(t *testing.T) {
	idle := "idle"
	for _, c := range []struct {
		app  api.App
		want string
	}{
		{api.App{DesiredState: "running"}, "running"},
		{api.App{DesiredState: "stopped"}, "stopped"},
		{api.App{DesiredState: "stopped", StoppedBecause: &idle}, "stopped (idle)"},
	} {
		if got := desiredOf(c.app); got != c.want {
			t.Errorf("desiredOf(%+v) = %q, want %q", c.app, got, c.want)
		}
	}
}
