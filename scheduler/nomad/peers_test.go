package nomad_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

// storePeers are other servers' artifact stores, asked as raftstore asks
// the cluster's servers: every one, "not found" only when none has it.
type storePeers struct {
	stores []*nomad.Artifacts
	down   bool // a server that cannot answer
}

var _ nomad.Peers = (*storePeers)(nil)

func (p *storePeers) FetchBlob(ctx context.Context, name string, w io.Writer) (int64, error) {
	for _, s := range p.stores {
		rc, _, err := s.OpenBlob(ctx, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		return io.Copy(w, rc)
	}
	if p.down {
		return 0, errors.New("server n3 did not answer")
	}
	return 0, fmt.Errorf("blob %s: %w", name, fs.ErrNotExist)
}

func newStore(t *testing.T, peers nomad.Peers) *nomad.Artifacts {
	t.Helper()
	a, err := nomad.NewArtifacts(nomad.ArtifactsConfig{Dir: t.TempDir(), Key: bytes.Repeat([]byte("k"), 32), Peers: peers})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestArtifactsFromPeers: an artifact packed or uploaded on one server is
// served and run from another, which fetches it once and keeps it; one
// that no server has is NOT_FOUND (404), and one that may be on a server
// that does not answer is ADAPTER_UNAVAILABLE (503), never a 404.
func TestArtifactsFromPeers(t *testing.T) {
	ctx := context.Background()
	holder := newStore(t, nil)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "index.html"), []byte("<h1>peer</h1>"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := holder.PublishForTest(scheduler.Artifact{ID: "b1", Dir: src})
	if err != nil {
		t.Fatal(err)
	}
	peers := &storePeers{stores: []*nomad.Artifacts{holder}}
	other := newStore(t, peers)
	srv := httptest.NewServer(other)
	t.Cleanup(srv.Close)

	resp, err := http.Get(other.SignedURL(srv.URL, "b1"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET an artifact another server holds: %s", resp.Status)
	}
	if got, ok := other.LookupForTest("b1"); !ok || got != sum {
		t.Errorf("after the download the store has %q %v, want the holder's checksum %q", got, ok, sum)
	}
	if len(body) == 0 {
		t.Errorf("served nothing")
	}
	// Kept: the holder going away does not matter any more.
	peers.stores = nil
	if _, err := other.Ensure(ctx, scheduler.Artifact{ID: "b1"}); err != nil {
		t.Errorf("ensure a fetched artifact with no peer left: %v", err)
	}

	if _, err := other.Ensure(ctx, scheduler.Artifact{ID: "nowhere"}); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("ensure an artifact no server has = %v, want NOT_FOUND", err)
	}
	resp, err = http.Get(other.SignedURL(srv.URL, "nowhere"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET an artifact no server has: %s, want 404", resp.Status)
	}
	peers.down = true
	if _, err := other.Ensure(ctx, scheduler.Artifact{ID: "maybe"}); errcode.CodeOf(err) != errcode.AdapterUnavailable {
		t.Errorf("ensure with a server down = %v, want ADAPTER_UNAVAILABLE", err)
	}
	resp, err = http.Get(other.SignedURL(srv.URL, "maybe"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET with a server down: %s, want 503", resp.Status)
	}
	if _, ok := other.LookupForTest("maybe"); ok {
		t.Errorf("a failed fetch left an artifact behind")
	}
	// A directory still packs when no server has the artifact.
	peers.down = false
	if _, err := other.Ensure(ctx, scheduler.Artifact{ID: "b2", Dir: src}); err != nil {
		t.Errorf("ensure with a directory: %v", err)
	}
	for _, name := range []string{"../b1.tar.gz", "b1", "b1.tar.gz/../x", ".tar.gz", strings.Repeat("x", 300) + ".tar.gz"} {
		if _, _, err := holder.OpenBlob(ctx, name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("OpenBlob(%q) = %v, want not found", name, err)
		}
	}
}
