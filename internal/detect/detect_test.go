package detect

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/spec"
)

// sampleWant is what a sample repository must detect as.
type sampleWant struct {
	winner    string
	score     int
	build     spec.Build // of the primary workload
	run       []string   // the primary's run command
	port      int
	workloads []string          // every workload, when more than one
	slots     map[string]string // slot name -> type
	runnersUp []string          // detectors, in order
	questions []string          // keys, in order
	// answers answer every question; then want holds of the proposal.
	answers map[string]string
	want    func(t *testing.T, d spec.Document)
}

var samples = map[string]sampleWant{
	"go-http": {
		winner: "go", score: 75,
		build: spec.Build{Kind: spec.BuildGo, Context: ".", Command: "go build -o app ."},
		run:   []string{"./app"}, port: 8080,
	},
	"go-cmd": {
		winner: "go", score: 75,
		build: spec.Build{Kind: spec.BuildGo, Context: ".", Command: "go build -o app ./cmd/server"},
		run:   []string{"./app"}, port: 9000,
		slots: map[string]string{"db": "postgres"},
	},
	"node-express": {
		winner: "node", score: 75,
		build: spec.Build{Kind: spec.BuildNode, Context: ".", Command: "npm ci"},
		run:   []string{"npm", "start"}, port: 3000,
		slots:     map[string]string{"db": "postgres"},
		questions: []string{"secret.SESSION_SECRET"},
		answers:   map[string]string{"secret.SESSION_SECRET": "s3cret"},
		want: func(t *testing.T, d spec.Document) {
			if got := d.Workloads["web"].Env["SESSION_SECRET"]; got != (spec.EnvValue{Secret: "SESSION_SECRET"}) {
				t.Errorf("SESSION_SECRET = %+v; want a secret reference (an answer never enters the proposal)", got)
			}
		},
	},
	"node-next": {
		winner: "node", score: 78,
		build: spec.Build{Kind: spec.BuildNode, Context: ".", Command: "pnpm install --frozen-lockfile && pnpm run build"},
		run:   []string{"pnpm", "start"}, port: 3000,
	},
	"node-vite-static": {
		winner: "node", score: 70,
		build:     spec.Build{Kind: spec.BuildStatic, Context: "dist", Command: "yarn install --frozen-lockfile && yarn build"},
		runnersUp: []string{"static"},
	},
	"python-stdlib": {
		winner: "python", score: 55,
		build: spec.Build{Kind: spec.BuildPython, Context: "."},
		run:   []string{"python", "server.py"}, port: 8000,
	},
	"python-flask": {
		winner: "python", score: 75,
		build: spec.Build{Kind: spec.BuildPython, Context: ".", Command: "pip install -r requirements.txt"},
		run:   []string{"gunicorn", "app:app", "--bind", "0.0.0.0:5000"}, port: 5000,
		slots:     map[string]string{"redis": "redis"},
		questions: []string{"secret.FLASK_SECRET_KEY"},
		answers:   map[string]string{"secret.FLASK_SECRET_KEY": "x"},
	},
	"python-fastapi": {
		winner: "python", score: 75,
		build: spec.Build{Kind: spec.BuildPython, Context: ".", Command: "pip install ."},
		run:   []string{"uvicorn", "main:app", "--host", "0.0.0.0", "--port", "8000"}, port: 8000,
		slots: map[string]string{"db": "postgres"},
	},
	"python-django": {
		winner: "python", score: 78,
		build: spec.Build{Kind: spec.BuildPython, Context: ".", Command: "pip install -r requirements.txt"},
		run:   []string{"gunicorn", "mysite.wsgi", "--bind", "0.0.0.0:8000"}, port: 8000,
		slots:     map[string]string{"db": "postgres"},
		questions: []string{"secret.DJANGO_SECRET_KEY"},
		answers:   map[string]string{"secret.DJANGO_SECRET_KEY": "x"},
	},
	"static-site": {
		winner: "static", score: 60,
		build: spec.Build{Kind: spec.BuildStatic, Context: "."},
	},
	"dockerfile-only": {
		winner: "dockerfile", score: 80,
		build: spec.Build{Kind: spec.BuildDockerfile, Context: "."},
		port:  7070,
	},
	"compose-web-postgres-redis": {
		winner: "compose", score: 90,
		build:     spec.Build{Kind: spec.BuildDockerfile, Context: "web"},
		port:      5000,
		workloads: []string{"web", "worker"},
		slots:     map[string]string{"db": "postgres", "redis": "redis"},
		runnersUp: []string{"dockerfile"},
		questions: []string{"secret.SECRET_KEY"},
		answers:   map[string]string{"secret.SECRET_KEY": "x"},
		want: func(t *testing.T, d spec.Document) {
			web := d.Workloads["web"]
			wantEnv := map[string]spec.EnvValue{
				"DATABASE_URL": {Slot: "db", Field: "url"},
				"REDIS_HOST":   {Slot: "redis", Field: "host"},
				"LOG_LEVEL":    spec.Literal("info"),
				"SECRET_KEY":   {Secret: "SECRET_KEY"},
			}
			if diff := cmp.Diff(wantEnv, web.Env); diff != "" {
				t.Errorf("web env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]spec.Mount{{Volume: "uploads", Path: "/app/uploads"}}, web.Mounts); diff != "" {
				t.Errorf("web mounts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]spec.Volume{"uploads": {SizeBytes: defaultVolumeBytes}}, d.Volumes); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"worker"}, web.DependsOn); diff != "" {
				t.Errorf("web depends_on (-want +got):\n%s", diff)
			}
			if h := web.Run.Health; h == nil || h.Path != "/healthz" {
				t.Errorf("web health = %+v; want /healthz", h)
			}
			worker := d.Workloads["worker"]
			if diff := cmp.Diff([]string{"python", "-m", "blog.worker"}, worker.Run.Command); diff != "" {
				t.Errorf("worker command (-want +got):\n%s", diff)
			}
			if worker.Env["REDIS_URL"] != (spec.EnvValue{Slot: "redis", Field: "url"}) {
				t.Errorf("worker REDIS_URL = %+v; want the redis slot's url", worker.Env["REDIS_URL"])
			}
		},
	},
	"compose-rejected": {
		winner: "compose", score: 90,
		build: spec.Build{Kind: spec.BuildImage, Image: "ghcr.io/example/ci-runner:2.1"},
		port:  8080,
	},
	"procfile": {
		winner: "procfile", score: 85,
		build:     spec.Build{Kind: spec.BuildPython, Context: ".", Command: "pip install -r requirements.txt"},
		run:       []string{"gunicorn", "shop.wsgi", "--bind", "0.0.0.0:8080", "--workers", "3"},
		port:      8080,
		workloads: []string{"web", "worker"},
		runnersUp: []string{"python"},
		questions: []string{"port"},
		answers:   map[string]string{"port": "5000"},
		want: func(t *testing.T, d spec.Document) {
			web := d.Workloads["web"]
			if diff := cmp.Diff([]string{"gunicorn", "shop.wsgi", "--bind", "0.0.0.0:5000", "--workers", "3"}, web.Run.Command); diff != "" {
				t.Errorf("answered web command (-want +got):\n%s", diff)
			}
			if web.Run.Port != 5000 || web.Env["PORT"] != spec.Literal("5000") {
				t.Errorf("answered port = %d, PORT = %+v; want 5000", web.Run.Port, web.Env["PORT"])
			}
			if got := d.Workloads["worker"].Run; got.Port != 0 || got.Command[0] != "celery" {
				t.Errorf("worker run = %+v; want celery on no port", got)
			}
		},
	},
	"ambiguous": {
		winner: "node", score: 30,
		build:     spec.Build{Kind: spec.BuildNode, Context: ".", Command: "npm install"},
		run:       []string{"node", "main.js"},
		port:      3000,
		runnersUp: []string{"static"},
		questions: []string{KeyRunCommand, KeyPort},
		answers:   map[string]string{KeyRunCommand: "npx http-server -p 8081 .", KeyPort: "8081"},
		want: func(t *testing.T, d spec.Document) {
			web := d.Workloads["web"]
			if diff := cmp.Diff([]string{"npx", "http-server", "-p", "8081", "."}, web.Run.Command); diff != "" {
				t.Errorf("answered command (-want +got):\n%s", diff)
			}
			if web.Run.Port != 8081 || web.Env["PORT"] != spec.Literal("8081") {
				t.Errorf("answered port = %d, PORT = %+v; want 8081", web.Run.Port, web.Env["PORT"])
			}
		},
	},
}

func TestSamples(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join("testdata", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != len(samples) {
		t.Errorf("%d sample directories, %d table rows; every sample needs a row", len(dirs), len(samples))
	}
	for _, name := range sortedKeys(samples) {
		want := samples[name]
		t.Run(name, func(t *testing.T) {
			fsys := os.DirFS(filepath.Join("testdata", "samples", name))
			r, dropped := detect(fsys, nil, Runtime{})
			if len(dropped) > 0 {
				t.Errorf("bids dropped by the sanity check: %v", dropped)
			}
			if r.Winner == nil {
				t.Fatalf("no winner; want %s", want.winner)
			}
			checkBids(t, r)
			if r.Winner.Detector != want.winner || r.Winner.Score != want.score {
				t.Errorf("winner = %s (%d); want %s (%d)", r.Winner.Detector, r.Winner.Score, want.winner, want.score)
			}
			d := r.Winner.Proposal
			primary := d.Primary()
			w := d.Workloads[primary]
			if diff := cmp.Diff(&want.build, w.Build); diff != "" {
				t.Errorf("primary %s build (-want +got):\n%s", primary, diff)
			}
			if diff := cmp.Diff(want.run, w.Run.Command); diff != "" {
				t.Errorf("primary %s run command (-want +got):\n%s", primary, diff)
			}
			if w.Run.Port != want.port {
				t.Errorf("primary %s port = %d; want %d", primary, w.Run.Port, want.port)
			}
			if want.workloads != nil {
				if diff := cmp.Diff(want.workloads, sortedKeys(d.Workloads)); diff != "" {
					t.Errorf("workloads (-want +got):\n%s", diff)
				}
			} else if len(d.Workloads) != 1 {
				t.Errorf("workloads = %v; want one", sortedKeys(d.Workloads))
			}
			slots := map[string]string{}
			for n, s := range d.Slots {
				slots[n] = s.Type
			}
			if diff := cmp.Diff(want.slots, slots, cmpEmpty); diff != "" {
				t.Errorf("slots (-want +got):\n%s", diff)
			}
			var runners []string
			for _, b := range r.RunnersUp {
				runners = append(runners, b.Detector)
			}
			if diff := cmp.Diff(want.runnersUp, runners, cmpEmpty); diff != "" {
				t.Errorf("runners-up (-want +got):\n%s", diff)
			}
			var keys []string
			for _, q := range r.Questions {
				keys = append(keys, q.Key)
			}
			if diff := cmp.Diff(want.questions, keys, cmpEmpty); diff != "" {
				t.Errorf("questions (-want +got):\n%s", diff)
			}
			if len(want.questions) == 0 {
				return
			}
			answered, dropped := detect(fsys, want.answers, Runtime{})
			if len(dropped) > 0 {
				t.Errorf("bids dropped with answers: %v", dropped)
			}
			if answered.Winner == nil || answered.Winner.Detector != want.winner {
				t.Fatalf("winner with answers = %+v; want %s", answered.Winner, want.winner)
			}
			checkBids(t, answered)
			if len(answered.Questions) != 0 {
				t.Errorf("questions after answering = %+v; want none", answered.Questions)
			}
			if want.want != nil {
				want.want(t, answered.Winner.Proposal)
			}
		})
	}
}

var cmpEmpty = cmp.FilterValues(func(x, y any) bool {
	return cmpLen(x) == 0 && cmpLen(y) == 0
}, cmp.Comparer(func(_, _ any) bool { return true }))

func cmpLen(v any) int {
	switch v := v.(type) {
	case []string:
		return len(v)
	case map[string]string:
		return len(v)
	}
	return -1
}

// checkBids checks what holds of every result: each proposal passes
// spec.Validate and survives a JSON round trip through spec.Parse,
// runners-up are in order (what the runtime runs first, then by score and
// name), the winner is not among them.
func checkBids(t *testing.T, r Result) {
	t.Helper()
	bids := append([]Bid{*r.Winner}, r.RunnersUp...)
	for i, b := range bids {
		if err := spec.Validate(b.Proposal); err != nil {
			t.Errorf("%s proposal does not validate: %v", b.Detector, err)
		}
		js, err := json.Marshal(b.Proposal)
		if err != nil {
			t.Fatalf("%s proposal: %v", b.Detector, err)
		}
		back, err := spec.Parse(js)
		if err != nil {
			t.Errorf("%s proposal does not parse back: %v\n%s", b.Detector, err, js)
		} else if diff := cmp.Diff(b.Proposal, back); diff != "" {
			t.Errorf("%s proposal changed in a JSON round trip (-before +after):\n%s", b.Detector, diff)
		}
		if b.Score < 0 || b.Score > 100 || len(b.Evidence) == 0 {
			t.Errorf("%s: score %d, %d evidence", b.Detector, b.Score, len(b.Evidence))
		}
		if i > 0 {
			prev := bids[i-1]
			switch {
			case prev.unrunnable && !b.unrunnable:
				t.Errorf("bids out of order: %s, which the runtime cannot run, before %s", prev.Detector, b.Detector)
			case prev.unrunnable != b.unrunnable:
			case prev.Score < b.Score || (prev.Score == b.Score && prev.Detector >= b.Detector):
				t.Errorf("bids out of order: %s (%d) before %s (%d)", prev.Detector, prev.Score, b.Detector, b.Score)
			}
		}
	}
}
