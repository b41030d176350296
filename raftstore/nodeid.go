package raftstore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const nodeIDFile = "node-id"

// resolveNodeID returns the node id of the store in dir. The id is written
// to dir the first time a node starts there, and every later start must use
// the same one, because Raft knows a node by its id: a node that came back
// under another id would not find itself in the cluster. A configured id of
// "" means whatever id dir holds, or a new one.
func resolveNodeID(dir, configured string) (string, error) {
	path := filepath.Join(dir, nodeIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		stored := strings.TrimSpace(string(b))
		if !nodeIDRE.MatchString(stored) {
			return "", fmt.Errorf("%s holds %q, which is not a node id", path, stored)
		}
		if configured != "" && configured != stored {
			return "", fmt.Errorf("the store in %s belongs to node %q, but this node is configured as %q; a node must keep its id", dir, stored, configured)
		}
		return stored, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read node id: %w", err)
	}
	id := configured
	if id == "" {
		r := make([]byte, 4)
		if _, err := rand.Read(r); err != nil {
			return "", err
		}
		id = "node-" + hex.EncodeToString(r)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write node id: %w", err)
	}
	return id, nil
}
