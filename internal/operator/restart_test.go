package operator

import (
	"testing"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/raftstore"
)

func TestRecordRestartWritesOneAuditEntry(t *testing.T) {
	svc, clk := newService(t)
	who := actor.Actor{Kind: "token", ID: "tok_01M7ZVAA7HN5NZE25AZ701FBCF", RequestID: "req_01M7ZVAA7HN5NZE25AZ701FBCF"}
	if err := svc.RecordRestart(actor.With(testContext(t), who)); err != nil {
		t.Fatalf("RecordRestart: %v", err)
	}
	items, _ := audit.Entries.List(svc.store.Read(), raftstore.Query{})
	if len(items) != 1 {
		t.Fatalf("got %d audit entries, want 1", len(items))
	}
	e := items[0].Value
	if e.Action != "server.restart" || e.TargetKind == nil || *e.TargetKind != "node" || e.TargetID == nil || *e.TargetID != "n1" || !e.Time.Equal(clk.Now()) {
		t.Errorf("entry = %+v, want server.restart on node n1 at %s", e, clk.Now())
	}
	if e.PrincipalKind != who.Kind || e.PrincipalID != who.ID || e.RequestID != who.RequestID {
		t.Errorf("entry names %s %s (request %s), want the actor %+v", e.PrincipalKind, e.PrincipalID, e.RequestID, who)
	}
}
