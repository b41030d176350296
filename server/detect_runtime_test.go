package server

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/detect"
	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/plan"
)

// sampleArchive is the tar.gz of samples/<name> at the module root.
func sampleArchive(t testing.TB, name string) []byte {
	t.Helper()
	dir := filepath.Join("..", "samples", name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []tarFile
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, tarFile{name: e.Name(), body: string(b)})
	}
	return tarGz(t, files...)
}

// TestGoWithDockerfileDeploysOnProcessRuntime: a Go program that also
// ships a Dockerfile (samples/go-whoami, modelled on traefik/whoami) and
// takes its port from a -port flag is proposed, on the process runtime
// (which cannot build Dockerfiles), as a Go build whose run command passes
// $PORT to the flag; the Dockerfile stays a runner-up that says why.
// Accepted as proposed, it plans as deployable, deploys, and answers over
// HTTP at the address its status names.
func TestGoWithDockerfileDeploysOnProcessRuntime(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "whoami")
	base := api + "/apps/" + app
	wantStatus(t, "upload", h.upload(base+"/source", "application/gzip", sampleArchive(t, "go-whoami")), http.StatusAccepted)

	rec := decodeAs[detection.Record](t, h.send("GET", base+"/detection", ""))
	if rec.Status != detection.StatusDone || rec.Winner == nil || rec.Winner.Detector != "go" || len(rec.Questions) != 0 {
		t.Fatalf("detection = %+v; want the go bid, with nothing to ask", rec)
	}
	web := rec.Winner.Proposal.Workloads["web"]
	if want := []string{"sh", "-c", `exec ./app --port="$PORT"`}; !slices.Equal(web.Run.Command, want) {
		t.Errorf("run command %q; want %q (the program reads no PORT)", web.Run.Command, want)
	}
	if len(rec.RunnersUp) != 1 || rec.RunnersUp[0].Detector != "dockerfile" {
		t.Fatalf("runners-up = %+v; want the Dockerfile", rec.RunnersUp)
	}
	why := detect.Evidence{Path: "Dockerfile", Reason: "the process runtime cannot build Dockerfiles; it builds go, node, python, static, command"}
	if !slices.Contains(rec.RunnersUp[0].Evidence, why) {
		t.Errorf("the Dockerfile's evidence %+v; want it to say why it lost", rec.RunnersUp[0].Evidence)
	}

	wantStatus(t, "accept", h.send("POST", base+"/detection/accept", `{}`), http.StatusCreated)
	if p := decodeAs[plan.Result](t, h.send("POST", base+"/plan", `{}`)); !p.Deployable || len(p.Refusals) != 0 {
		t.Fatalf("plan of the accepted proposal = %+v; want deployable", p)
	}
	h.deployed(t, app)
	addr := h.status(t, app).Workloads["web"].Address
	if addr == "" {
		t.Fatalf("status names no address: %+v", h.status(t, app))
	}
	res, err := http.Get("http://" + addr + "/whoami?probe=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "GET /whoami?probe=1 HTTP/1.1") || !strings.Contains(string(body), "Hostname: ") {
		t.Fatalf("GET http://%s/whoami = %d %q; want whoami's answer", addr, res.StatusCode, body)
	}
}
