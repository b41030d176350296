package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync/atomic"

	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/upgrade"
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

// blobRouter serves this server's blobs to the others: a rollout's binary
// (upgrade.BlobPrefix) from the work directory, checkouts (names
// with source.BlobPrefix) from the sources, and artifacts from the
// generation's artifact store, each once it is built (the store, which
// serves blobs, opens first).
type blobRouter struct {
	workDir   string // where a rollout's binary is kept (internal/upgrade)
	sources   atomic.Pointer[source.Service]
	artifacts atomic.Pointer[nomad.Artifacts]
}

var _ raftstore.BlobSource = (*blobRouter)(nil)

func (b *blobRouter) OpenBlob(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	if strings.HasPrefix(name, upgrade.BlobPrefix) {
		return upgrade.OpenBlob(b.workDir, name)
	}
	if strings.HasPrefix(name, source.BlobPrefix) {
		if src := b.sources.Load(); src != nil {
			return src.OpenBlob(ctx, name)
		}
	} else if arts := b.artifacts.Load(); arts != nil {
		return arts.OpenBlob(ctx, name)
	}
	return nil, 0, fmt.Errorf("blob %s: this server is starting: %w", name, fs.ErrNotExist)
}
