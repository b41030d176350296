package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

// nomadArtifactDir is where the nomad runtime packs builds for Nomad
// clients to download.
func nomadArtifactDir(workDir string) string {
	return filepath.Join(workDir, "runtime", "nomad-artifacts")
}

// nomadArtifactKeyFile keeps a single node's artifact signing key.
func nomadArtifactKeyFile(workDir string) string {
	return filepath.Join(workDir, "keyring", "nomad-artifacts.key")
}

// nomadArtifactKey is the key artifact URLs are signed with. In a cluster
// every server must verify what any other signed: the key is derived from
// the cluster secret (HMAC-SHA256 under a label, so the secret itself
// never signs anything). A single node keeps a random key in its work dir.
func nomadArtifactKey(cfg *config.Config) ([]byte, error) {
	if cfg.Cluster.Secret != "" {
		m := hmac.New(sha256.New, []byte(cfg.Cluster.Secret))
		m.Write([]byte("svc nomad artifact URLs v1"))
		return m.Sum(nil), nil
	}
	p := nomadArtifactKeyFile(cfg.Server.WorkDir)
	key, err := os.ReadFile(p)
	if err == nil && len(key) >= 32 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("nomad artifact key: %w", err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("nomad artifact key: %w", err)
	}
	if err := os.WriteFile(p, key, 0o600); err != nil {
		return nil, fmt.Errorf("nomad artifact key: %w", err)
	}
	return key, nil
}

// nomadArtifacts opens the artifact store of the work dir, which fetches
// what it lacks from the cluster's other servers through store (nil: it
// asks none).
func nomadArtifacts(cfg *config.Config, store *raftstore.Store) (*nomad.Artifacts, error) {
	key, err := nomadArtifactKey(cfg)
	if err != nil {
		return nil, err
	}
	var peers nomad.Peers
	if store != nil {
		peers = clusterPeers{store}
	}
	return nomad.NewArtifacts(nomad.ArtifactsConfig{Dir: nomadArtifactDir(cfg.Server.WorkDir), Key: key, Peers: peers})
}

// nomadKind declares the nomad runtime: builds as Nomad batch jobs (or on
// this server with the process runtime's builder), artifacts served from
// the work dir, and the app's slug (which names the Nomad job and its
// services) and the deployment's spec revision (the job's meta) read from
// the store.
func nomadKind(gen *generation, store *raftstore.Store, now func() time.Time, loaded func() *adapters.Set) adapters.Kind {
	appSvc := apps.NewService(store, now)
	return nomad.KindFor(nomad.KindDeps{
		Builder:         gen.procs,
		Artifacts:       func() (*nomad.Artifacts, error) { return gen.artifacts, gen.artifactsErr },
		ArtifactBaseURL: strings.TrimRight(gen.cfg.Server.ExternalURL, "/"),
		Describe: func(_ context.Context, job scheduler.Job) (nomad.AppInfo, error) {
			if job.AppID == "" {
				return nomad.AppInfo{}, nil
			}
			a, err := appSvc.Get(job.AppID)
			if err != nil {
				return nomad.AppInfo{}, err
			}
			info := nomad.AppInfo{Slug: a.Slug, Name: a.Name, Primary: job.Primary}
			// A scheduler job is named after its deployment: the spec
			// revision it runs goes into the Nomad job's meta.
			if d, _, ok := scheduler.Deployments.Get(store.Read(), job.ID); ok {
				info.SpecID, info.SpecRevision = d.SpecID, d.Revision
			}
			return info, nil
		},
		// Slot credentials reach Nomad workloads from Vault: through the
		// vault secrets adapter when it is the primary one (the one the
		// workloads' secrets are in too).
		JobSecrets: func() nomad.JobSecrets {
			l, ok := loaded().Primary(adapters.CategorySecrets)
			if !ok || l.Instance == nil {
				return nil
			}
			w, _ := l.Instance.(nomad.JobSecrets)
			return w
		},
		Logger: gen.log,
	})
}

// withNomadArtifacts serves the nomad runtime's artifacts on the main
// listener ahead of front (the edge's): GET and HEAD nomad.ArtifactPath…
// download sources and builds, PUT stores a build job's upload, signed
// URLs only. For serve.go's server.Deps.Front, as
// Front: withNomadArtifacts(gen.artifacts, proxy.Front); a nil store
// serves none.
func withNomadArtifacts(arts *nomad.Artifacts, front func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(api http.Handler) http.Handler {
		next := api
		if front != nil {
			next = front(api)
		}
		if arts == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, nomad.ArtifactPath) && (r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodPut) {
				arts.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
