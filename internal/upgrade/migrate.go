package upgrade

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/svchost/svc/raftstore"
)

// Migration is a change of the stored state a version needs, written
// through the store once, by the first start of a binary of Version or
// later upgraded from an earlier one. Build follows store.Update's rules
// (pure; only a table's owning package builds its operations).
type Migration struct {
	Version string
	Name    string
	Build   raftstore.Build
}

// Migrations is the list, oldest first. None yet: the hook is here so that
// the first change of a stored shape has a place.
var Migrations []Migration

// Due returns the migrations an upgrade from from to to runs: those whose
// Version is after from and at most to.
func Due(ms []Migration, from, to string) []Migration {
	var out []Migration
	for _, m := range ms {
		if CompareVersions(m.Version, from) > 0 && CompareVersions(m.Version, to) <= 0 {
			out = append(out, m)
		}
	}
	return out
}

// Migrate runs the due migrations in order.
func Migrate(ctx context.Context, store Store, ms []Migration, from, to string, log *slog.Logger) error {
	for _, m := range Due(ms, from, to) {
		if _, err := store.Update(ctx, m.Build); err != nil {
			return fmt.Errorf("migration %s (%s): %w", m.Name, m.Version, err)
		}
		log.Info("upgrade: migrated the store", "migration", m.Name, "version", m.Version)
	}
	return nil
}
