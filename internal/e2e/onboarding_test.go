package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOnboardAnAppFromAnArchive drives the real binary through what a
// newcomer does first: create an app, upload its source, read what
// detection proposes, accept it with a secret, and ask what a deploy would
// do. After a restart everything is still there and the secret still
// reads back.
func TestOnboardAnAppFromAnArchive(t *testing.T) {
	dir := passableDir(t)
	p := newProc(t, "onboard", []string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + filepath.Join(dir, "work"),
	})
	base := p.startServing() + "/api/v1"
	p.waitReady(scaled(15 * time.Second))
	signIn(t, scaled(30*time.Second), p)

	do := func(method, path string, body []byte, contentType string, want int) []byte {
		t.Helper()
		var r reply
		for range 50 {
			req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
			p.mu.Lock()
			req.Header.Set("Authorization", "Bearer "+p.token)
			p.mu.Unlock()
			req.Header.Set("Content-Type", contentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				r = reply{err: err}
			} else {
				b := new(bytes.Buffer)
				_, _ = b.ReadFrom(resp.Body)
				resp.Body.Close()
				r = reply{status: resp.StatusCode, body: b.Bytes()}
			}
			if r.err == nil && !strings.Contains(string(r.body), "not loaded yet") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if r.err != nil || r.status != want {
			t.Fatalf("%s %s: %d %s (%v)", method, path, r.status, r.body, r.err)
		}
		return r.body
	}
	js := "application/json"
	var created struct {
		App struct{ ID string } `json:"app"`
	}
	mustJSON(t, do("POST", "/apps", []byte(`{"name":"Onboarded"}`), js, http.StatusCreated), &created)
	app := "/apps/" + created.App.ID

	do("POST", app+"/source", goApp(t), "application/gzip", http.StatusAccepted)
	var rec struct {
		Status string `json:"status"`
		Winner *struct {
			Detector string `json:"detector"`
		} `json:"winner"`
	}
	for deadline := time.Now().Add(scaled(30 * time.Second)); rec.Status != "done" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		mustJSON(t, do("GET", app+"/detection", nil, js, http.StatusOK), &rec)
	}
	if rec.Winner == nil || rec.Winner.Detector != "go" {
		t.Fatalf("detection = %+v", rec)
	}
	do("POST", app+"/detection/accept", []byte(`{"values":[{"key":"API_KEY","value":"onboard-secret-4e1d","secret":true}]}`), js, http.StatusCreated)
	var plan struct {
		Deployable bool `json:"deployable"`
		Actions    []struct {
			Step, Workload string
		} `json:"actions"`
	}
	mustJSON(t, do("POST", app+"/plan", []byte(`{}`), js, http.StatusOK), &plan)
	if !plan.Deployable || len(plan.Actions) != 2 || plan.Actions[0].Step != "build" {
		t.Fatalf("plan = %+v", plan)
	}

	if code, _ := p.stop(scaled(30 * time.Second)); code != 0 {
		t.Fatalf("svc serve exited with %d", code)
	}
	base = p.restart() + "/api/v1"
	p.waitReady(scaled(15 * time.Second))
	var val struct{ Value string }
	mustJSON(t, do("GET", app+"/secrets/API_KEY/value", nil, js, http.StatusOK), &val)
	if val.Value != "onboard-secret-4e1d" {
		t.Fatalf("after a restart the secret is %q", val.Value)
	}
	var specs struct {
		Items []struct {
			Revision int  `json:"revision"`
			Pinned   bool `json:"pinned"`
		} `json:"items"`
	}
	mustJSON(t, do("GET", app+"/specs", nil, js, http.StatusOK), &specs)
	if len(specs.Items) != 1 || !specs.Items[0].Pinned {
		t.Fatalf("specs after a restart = %+v", specs)
	}
	if strings.Contains(p.logText(), "onboard-secret-4e1d") {
		t.Fatal("the log holds the secret value")
	}
}

func mustJSON(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// goApp is the tar.gz of a Go web app that listens on 8080.
func goApp(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport (\n\t\"net/http\"\n\t\"os\"\n)\n\nfunc main() {\n\t_ = os.Getenv(\"API_KEY\")\n\thttp.ListenAndServe(\":8080\", nil)\n}\n",
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
