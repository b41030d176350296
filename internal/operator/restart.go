package operator

import (
	"context"
	"fmt"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/raftstore"
)

// RecordRestart writes the audit entry of a restart of this node's server
// asked for by the actor in ctx. The restart itself is the composition
// root's: this only records, through the replicated store, that it was
// asked for.
func (s *Service) RecordRestart(ctx context.Context) error {
	entry := audit.New(ctx, s.now().UTC(), "server.restart", "", audit.Target{Kind: "node", ID: s.node}, nil)
	_, err := s.store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) { return []raftstore.Op{audit.Insert(entry)}, nil })
	if err != nil {
		return fmt.Errorf("record restart: %w", err)
	}
	return nil
}
