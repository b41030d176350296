package apps_test

import (
	"context"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

func TestSetSourceRecordsAndAudits(t *testing.T) {
	store := raftstoretest.Open(t, append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors}, identity.Tables()...)...)
	svc := apps.NewService(store, func() time.Time { return time.Now().UTC() })
	ctx := actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"})
	caller := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}
	a, err := svc.Create(ctx, caller, apps.New{Name: "Sourced"})
	if err != nil {
		t.Fatal(err)
	}
	repo := apps.Source{Kind: apps.SourceRepository, Repository: "https://github.com/acme/app", Ref: "main", Commit: "0123456789012345678901234567890123456789", Subdir: "web"}
	if err := svc.SetSource(ctx, a.ID, repo); err != nil {
		t.Fatal(err)
	}
	archive := apps.Source{Kind: apps.SourceArchive, Commit: "sha256:abc"}
	if err := svc.SetSource(ctx, a.ID, archive); err != nil {
		t.Fatal(err)
	}
	got, _ := svc.Get(a.ID)
	if got.Source == nil || *got.Source != archive || !got.UpdatedAt.After(a.UpdatedAt) {
		t.Fatalf("source = %+v (updated %v)", got.Source, got.UpdatedAt)
	}
	items, _ := audit.Entries.List(store.Read(), raftstore.Query{})
	var actions []string
	for _, it := range items {
		actions = append(actions, it.Value.Action)
	}
	if len(actions) != 3 || actions[1] != "source.fetch" || actions[2] != "source.upload" {
		t.Fatalf("audit = %v", actions)
	}
	for _, bad := range []apps.Source{{}, {Kind: "svn"}, {Kind: apps.SourceRepository}, {Kind: apps.SourceArchive, Ref: "main"}, {Kind: apps.SourceArchive, Commit: "a\nb"}} {
		if err := svc.SetSource(ctx, a.ID, bad); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if err := svc.SetSource(ctx, "app_01JZZZZZZZZZZZZZZZZZZZZZZZ", archive); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("unknown app: %v", err)
	}
}
