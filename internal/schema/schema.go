// Package schema lists every table of the replicated store, in one place, so
// that every node of a cluster declares the same tables. Adding a table here
// is how a capability gets storage.
//
// It must not hold logic: each table's rules belong to the package that
// declares it.
package schema

import (
	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/backups"
	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/icon"
	"github.com/svchost/svc/internal/idempotency"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/idle"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/launcher"
	"github.com/svchost/svc/internal/operator"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/security"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/internal/upgrade"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

// Tables returns every table of the store.
func Tables() []raftstore.Def {
	tables := []raftstore.Def{
		audit.Entries,
		events.Events,
		events.Cursors,
		idempotency.Records,
		operator.Probes,
		policy.Table,
		spec.Revisions,
		spec.Heads,
		keyring.Keys,
	}
	for _, ts := range [][]raftstore.Def{identity.Tables(), apps.Tables(), icon.Tables(), launcher.Tables(), detection.Tables(), secrets.Tables(), slots.Tables(), adapters.Tables(), subscriptions.Tables(), scheduler.Tables(), edge.Tables(), volumes.Tables(), backups.Tables(), idle.Tables(), security.Tables(), upgrade.Tables()} {
		tables = append(tables, ts...)
	}
	return tables
}
