package jobtemplates

import (
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// FuzzRenderService renders the sample job with an environment value, a
// command argument and a health path from the fuzzer: the job is always
// one valid JSON object, and every value comes back as it went in (the
// argument after Nomad's HCL evaluation).
func FuzzRenderService(f *testing.F) {
	for _, h := range hostile {
		f.Add(h, h, "/"+h)
	}
	f.Add("plain", "--port=8080", "/healthz")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, value, arg, healthPath string) {
		if !utf8.ValidString(value) || !utf8.ValidString(arg) || !utf8.ValidString(healthPath) {
			t.Skip("JSON carries UTF-8 text only (Nomad's API too); the spec refuses other bytes")
		}
		in := SampleServiceInput()
		setTaskValues(&in, value, arg, healthPath)
		b, err := Default().RenderService(in)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Fatalf("not JSON:\n%s", b)
		}
		job := decodeJob(t, b)
		for _, g := range job.TaskGroups {
			if g.Name != "web" {
				continue
			}
			task := g.Tasks[0]
			if task.Env["GREETING"] != value || task.Env["VALUE_"+value] != value {
				t.Errorf("env %q; want GREETING=%q", task.Env, value)
			}
			args := mapSlice(task.Config.Args, hclUnescape)
			if want := []string{"-listen", arg, "--" + arg}; !slices.Equal(args, want) {
				t.Errorf("args %q; want %q", args, want)
			}
			if p := g.Services[0].Checks[0].Path; p != healthPath {
				t.Errorf("check path %q; want %q", p, healthPath)
			}
			return
		}
		t.Fatal("no web group")
	})
}

func setTaskValues(in *ServiceInput, value, arg, healthPath string) {
	setTask(in, "web", func(t *scheduler.Task) {
		t.Env = map[string]string{"GREETING": value, "VALUE_" + value: value, "TOKEN": "secret"}
		t.Command = []string{"./app", "-listen", arg, "--" + arg}
		t.Health = &spec.Health{Path: healthPath}
	})
}
