package detect

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// FuzzDetect feeds arbitrary contents to the files detectors parse. It
// checks that Detect never panics, that every bid it offers passes the
// sanity check and spec.Validate (none is dropped), that it is
// deterministic, and that answering the winner's questions with their
// defaults leaves none.
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
		r, dropped := detect(fsys, nil)
		if len(dropped) > 0 {
			t.Fatalf("bids dropped: %v", dropped)
		}
		again, _ := detect(fsys, nil)
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
		answered, dropped := detect(fsys, answers)
		if len(dropped) > 0 {
			t.Fatalf("bids dropped with answers %v: %v", answers, dropped)
		}
		if answered.Winner == nil || answered.Winner.Detector != r.Winner.Detector {
			t.Fatalf("winner changed with answers: %+v", answered.Winner)
		}
		if len(answered.Questions) > 0 {
			t.Fatalf("questions left after answering with defaults %v: %+v", answers, answered.Questions)
		}
	})
}
