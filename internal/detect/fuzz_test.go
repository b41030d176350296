package detect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// FuzzDetect feeds arbitrary contents to the files detectors parse (Go
// sources are parsed for port flags). On a runtime detection knows nothing
// of and on the process runtime, it checks that Detect never panics, that
// every bid it offers passes the sanity check and spec.Validate (none is
// dropped), that it is deterministic, and that answering the winner's
// questions with their defaults leaves none.
func FuzzDetect(f *testing.F) {
	read := func(p string) []byte {
		b, _ := os.ReadFile(filepath.Join("testdata", "samples", p))
		return b
	}
	f.Add(read("node-express/package.json"), []byte("module x\n"), []byte(nil), []byte(nil), []byte(nil), read("node-express/src/server.js"))
	f.Add([]byte(nil), read("go-cmd/go.mod"), []byte(nil), []byte(nil), []byte(nil), read("go-http/main.go"))
	f.Add([]byte(nil), []byte(nil), read("compose-web-postgres-redis/compose.yaml"), []byte(nil), []byte(nil), read("compose-web-postgres-redis/web/Dockerfile"))
	f.Add([]byte(nil), []byte(nil), read("compose-rejected/docker-compose.yml"), []byte(nil), []byte(nil), []byte(nil))
	f.Add([]byte(nil), []byte(nil), []byte(nil), read("procfile/Procfile"), []byte(nil), []byte("SECRET_KEY=\n"))
	f.Add([]byte(nil), []byte(nil), []byte(nil), []byte(nil), read("python-fastapi/pyproject.toml"), read("python-fastapi/main.py"))
	whoami, _ := os.ReadFile(filepath.Join(whoami(), "main.go"))
	f.Add([]byte(nil), []byte("module github.com/traefik/whoami\n"), []byte(nil), []byte(nil), []byte(nil), whoami)
	f.Add([]byte(nil), []byte("module x\n"), []byte(nil), []byte(nil), []byte(nil),
		[]byte("package main\nfunc main() { cmd.Flags().StringVarP(&a, \"web.listen-address\", \"l\", \"[::1]:99999\", \"\"); flag.Int(\"port\", 0x1F90, \"\"); flag.String(\"port\", \"\\x38\", \"\") }\n"))
	f.Add(read("node-next/package.json"), []byte(nil), []byte("services:\n  web:\n    build: .\n    extends: {file: x.yml, service: y}\n"), []byte("web: $PORT\n"), []byte("[tool.poetry.dependencies]\nflask = '*'\n"), []byte("EXPOSE ${P:-80}\n"))
	f.Fuzz(func(t *testing.T, pkg, gomod, compose, procfile, pyproject, extra []byte) {
		fsys := fstest.MapFS{}
		for p, b := range map[string][]byte{
			"package.json": pkg, "go.mod": gomod, "compose.yaml": compose, "Procfile": procfile, "pyproject.toml": pyproject,
			"main.go": extra, "server.js": extra, "app.py": extra, "Dockerfile": extra, ".env.example": extra, "index.html": extra,
		} {
			if b != nil {
				fsys[p] = &fstest.MapFile{Data: b}
			}
		}
		for _, rt := range []Runtime{{}, processRuntime} {
			checkFuzzed(t, fsys, rt)
		}
	})
}

func checkFuzzed(t *testing.T, fsys fstest.MapFS, rt Runtime) {
	r, dropped := detect(fsys, nil, rt)
	if len(dropped) > 0 {
		t.Fatalf("bids dropped: %v", dropped)
	}
	again, _ := detect(fsys, nil, rt)
	if diff := cmp.Diff(r, again, cmp.AllowUnexported(Bid{})); diff != "" {
		t.Fatalf("not deterministic (-first +second):\n%s", diff)
	}
	if len(r.Questions) == 0 {
		return
	}
	answers := map[string]string{}
	for _, q := range r.Questions {
		answers[q.Key] = q.Default
		if q.Kind == KindSecret {
			answers[q.Key] = "x"
		}
	}
	answered, dropped := detect(fsys, answers, rt)
	if len(dropped) > 0 {
		t.Fatalf("bids dropped with answers %v: %v", answers, dropped)
	}
	if answered.Winner == nil || answered.Winner.Detector != r.Winner.Detector {
		t.Fatalf("winner changed with answers: %+v", answered.Winner)
	}
	if len(answered.Questions) > 0 {
		t.Fatalf("questions left after answering with defaults %v: %+v", answers, answered.Questions)
	}
}

// FuzzGoPortFlag feeds arbitrary Go source to the port flag scanner: it
// never panics, and a flag it finds has a name of the shape a run command
// may carry, a port in range (or none) and a command that passes $PORT.
func FuzzGoPortFlag(f *testing.F) {
	whoami, _ := os.ReadFile(filepath.Join(whoami(), "main.go"))
	f.Add(whoami)
	f.Add([]byte("package main\nvar p = flag.Int(\"port\", 8080, \"\")\n"))
	f.Add([]byte("package main\nfunc f() { c.Flags().StringVarP(&a, \"http-addr\", \"a\", \"0.0.0.0:65536\", \"\"); flag.Uint(\"listen\", 1e3, \"\") }\n"))
	f.Add([]byte("package main\nfunc f() { flag.String(\"port\", `:80`, \"\"); flag.String(\"addr\", \"\\x3a\\x39\", \"\") \n"))
	f.Add([]byte("package main\nfunc f() { flag.String(\"port;rm -rf /\", \"1\", \"\"); flag.String(\"$(id)-port\", \"1\", \"\") }\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		fl, ok := scanGoPortFlag("main.go", src)
		if !ok {
			return
		}
		if _, _, named := portFlagName(fl.name); !named || !goFlagNameRE.MatchString(fl.name) {
			t.Fatalf("flag %q is not a port flag's name", fl.name)
		}
		if fl.port < 0 || fl.port > 65535 || fl.where != "main.go" {
			t.Fatalf("flag %+v", fl)
		}
		cmd := fl.command("./app")
		if len(cmd) != 3 || cmd[0] != "sh" || !strings.HasPrefix(cmd[2], "exec ./app --"+fl.name+"=") || !strings.HasSuffix(cmd[2], `$PORT"`) {
			t.Fatalf("command %q", cmd)
		}
	})
}
