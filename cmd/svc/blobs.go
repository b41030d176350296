package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"

	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler/nomad"
)

// What the servers of a cluster fetch from each other over the cluster
// port (raftstore's blobs): the nomad runtime's packed artifacts and apps'
// source checkouts, files too big for the Raft log that every node keeps a
// copy of.

// clusterPeers fetches blobs from the other servers, saying "not found"
// as the artifact store and the sources expect (an error wrapping
// fs.ErrNotExist).
type clusterPeers struct{ store *raftstore.Store }

var (
	_ nomad.Peers  = clusterPeers{}
	_ source.Peers = clusterPeers{}
)

func (p clusterPeers) FetchBlob(ctx context.Context, name string, w io.Writer) (int64, error) {
	n, err := p.store.FetchBlob(ctx, name, w)
	if errors.Is(err, raftstore.ErrBlobNotFound) {
		return n, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return n, err
}

// blobRouter serves this server's blobs to the others: checkouts (names
// with source.BlobPrefix) from the sources, once they are built (the
// store, which serves blobs, opens first), and artifacts from the work
// dir's artifact store.
type blobRouter struct {
	cfg     *config.Config
	sources atomic.Pointer[source.Service]
}

var _ raftstore.BlobSource = (*blobRouter)(nil)

func (b *blobRouter) OpenBlob(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	if strings.HasPrefix(name, source.BlobPrefix) {
		src := b.sources.Load()
		if src == nil {
			return nil, 0, fmt.Errorf("blob %s: this server is starting: %w", name, fs.ErrNotExist)
		}
		return src.OpenBlob(ctx, name)
	}
	// A server that never used the nomad runtime has no artifact
	// directory, and this creates none.
	if _, err := os.Stat(nomadArtifactDir(b.cfg.Server.WorkDir)); err != nil {
		return nil, 0, fmt.Errorf("blob %s: %w", name, fs.ErrNotExist)
	}
	arts, err := nomadArtifacts(b.cfg, nil)
	if err != nil {
		return nil, 0, err
	}
	return arts.OpenBlob(ctx, name)
}
