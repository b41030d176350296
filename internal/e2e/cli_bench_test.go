package e2e

import (
	"bytes"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkCLIStartup measures how long the built svc takes, as a person
// types it, from exec to exit: `svc apps list` against a real server on
// loopback (flags and config read, one GET /api/v1/apps, a table of two
// apps printed), and `svc --help` with no server at all. ms/op is the wall
// time of one run of the binary.
func BenchmarkCLIStartup(b *testing.B) {
	srv := startAppServer(b, "cli-bench")
	c := srv.p.Client()
	if c == nil {
		b.Fatal("the server is not serving")
	}
	srv.createApp(b, "bench one")
	srv.createApp(b, "bench two")
	env := append(childEnv(nil), "SVC_ADDR="+srv.p.Base(), "SVC_TOKEN="+srv.token(), "HOME="+b.TempDir(), "XDG_CONFIG_HOME="+b.TempDir(), "NO_COLOR=1")
	for _, bc := range []struct {
		name string
		args []string
		want string
	}{
		{"apps list", []string{"apps", "list"}, "bench-one"},
		{"help", []string{"--help"}, "Getting started:"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				cmd := exec.Command(svcBin, bc.args...)
				cmd.Env = env
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				start := time.Now()
				err := cmd.Run()
				total += time.Since(start)
				if err != nil || !bytes.Contains(out.Bytes(), []byte(bc.want)) {
					b.Fatalf("svc %v: %v\n%s", bc.args, err, out.Bytes())
				}
			}
			b.ReportMetric(float64(total)/float64(time.Millisecond)/float64(b.N), "ms/op")
		})
	}
}
