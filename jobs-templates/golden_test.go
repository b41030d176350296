package jobtemplates

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden renders every template for every fixture (the samples as
// detection proposes them, and the rich spec) and compares the job with
// testdata/<fixture>.<template>.golden.json: the service job of the
// deployment, and the build job of each workload. go test -update
// rewrites them.
func TestGolden(t *testing.T) {
	set := Default()
	for _, fx := range fixtures(t) {
		t.Run(fx.name+"/service", func(t *testing.T) {
			got, err := set.RenderService(serviceInput(fx))
			if err != nil {
				t.Fatal(err)
			}
			decodeJob(t, got)
			golden(t, fx.name+".service", got)
		})
		for _, w := range sortedWorkloads(fx.doc) {
			t.Run(fx.name+"/build-"+w, func(t *testing.T) {
				got, err := set.RenderBuild(buildInput(fx, w))
				if err != nil {
					t.Fatal(err)
				}
				decodeJob(t, got)
				golden(t, fx.name+".build-"+w, got)
			})
		}
	}
}

// golden compares a rendered job, indented, with its golden file.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	p := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test ./jobs-templates -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("%s differs from the rendered job (-want +got; go test ./jobs-templates -update rewrites it):\n%s", p, diff)
	}
}

// TestGoldenFilesAllUsed fails on a golden file no fixture renders any
// more, so that testdata does not keep stale jobs.
func TestGoldenFilesAllUsed(t *testing.T) {
	want := map[string]bool{}
	for _, fx := range fixtures(t) {
		want[fx.name+".service.golden.json"] = true
		for _, w := range sortedWorkloads(fx.doc) {
			want[fx.name+".build-"+w+".golden.json"] = true
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !want[filepath.Base(f)] {
			if *update {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("%s is rendered by no fixture (go test ./jobs-templates -update removes it)", f)
		}
	}
}
