// Package backuprepo owns the backup repository: what a backup is on a
// backup storage adapter's objects (encrypted, content-addressed chunks
// and a manifest per backup), writing one from directory trees and
// streams, verifying it without touching live state, restoring it into
// staging and committing the staged data all or nothing (a journal that a
// restart completes), and removing backups and the chunks no backup uses.
//
// It knows nothing of apps, the store or HTTP: it is given trees, streams,
// keys and a Storage. It must not import the store, the server or an
// adapter package.
package backuprepo

import (
	"context"
	"io"
)

// Storage is where a repository keeps its objects: a backup storage
// adapter (category backup). Keys are slash-separated paths of
// [a-z0-9._-] segments. Put is atomic: a reader sees the whole object or
// none. Get of an absent key is errcode.NotFound; Delete of one is not an
// error. Failures to reach the storage are ADAPTER_UNAVAILABLE, refusals
// ADAPTER_FAILED; neither carries a credential.
type Storage interface {
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	List(ctx context.Context, prefix string) ([]Object, error)
	Delete(ctx context.Context, key string) error
}

// Object is one stored object: its key and size in bytes.
type Object struct {
	Key  string
	Size int64
}
