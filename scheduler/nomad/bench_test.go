package nomad_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

// BenchmarkRunToReady measures a whole Run against the fake Nomad until
// the workload is healthy, and its Stop: render, plan, register, the
// client's artifact download and start, and the blocking queries that
// see it (min_healthy_time 100ms is part of every run).
func BenchmarkRunToReady(b *testing.B) {
	e := newEnv(b, options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src := b.TempDir()
	art, err := e.rt.Build(ctx, scheduler.BuildRequest{Source: src, Build: buildCommandTrue})
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("job-bench-%d", i)
		if _, err := e.rt.Run(ctx, scheduler.Job{ID: id, Workloads: map[string]scheduler.Task{"web": {
			Artifact: art, Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
		}}}); err != nil {
			b.Fatal(err)
		}
		if err := e.rt.Stop(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildOnNomad measures a whole build as a batch job against the
// fake Nomad: pack the source, render, plan and register the job, the
// client's download, the build, the upload to the artifact store and the
// blocking queries that see it end, then the purge.
func BenchmarkBuildOnNomad(b *testing.B) {
	e := newEnv(b, options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		if _, err := e.rt.Build(ctx, scheduler.BuildRequest{ID: fmt.Sprintf("bench-%d", i), Source: src, Build: buildCommandTrue}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkArtifactUpload measures the artifact store taking a 4 MiB
// build upload over HTTP: signature, the tar check as it streams, the
// checksum and the rename into place.
func BenchmarkArtifactUpload(b *testing.B) {
	arts, err := nomad.NewArtifacts(nomad.ArtifactsConfig{Dir: b.TempDir(), Key: bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(arts)
	b.Cleanup(srv.Close)
	blob := make([]byte, 4<<20)
	_, _ = rand.Read(blob)
	body := tarGz(b, [2]string{"app", string(blob)})
	b.SetBytes(int64(len(body)))
	i := 0
	for b.Loop() {
		i++
		req, _ := http.NewRequest(http.MethodPut, arts.SignedUploadURL(srv.URL, fmt.Sprintf("u%d", i), time.Hour), bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("upload: %s", resp.Status)
		}
	}
}
