package apps_test

import (
	"context"
	"strings"
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

func TestSlugify(t *testing.T) {
	for in, want := range map[string]string{
		"My App":                            "my-app",
		"  --Hello, World!-- ":              "hello-world",
		"Ünïcödé":                           "n-c-d",
		"日本語":                               "app",
		"":                                  "app",
		strings.Repeat("ab", 40):            strings.Repeat("ab", 20),
		"a" + strings.Repeat(" ", 50) + "b": "a-b",
	} {
		if got := apps.Slugify(in); got != want {
			t.Errorf("Slugify(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSlugify(f *testing.F) {
	for _, s := range []string{"My App", "", "---", "日本語", strings.Repeat("x-", 30)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		s := apps.Slugify(name)
		if len(s) == 0 || len(s) > apps.MaxSlugLen || strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") || strings.Contains(s, "--") {
			t.Fatalf("Slugify(%q) = %q", name, s)
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				t.Fatalf("Slugify(%q) = %q", name, s)
			}
		}
	})
}

func TestCreateGrantsTheCreatorAndDeleteRemovesEverything(t *testing.T) {
	store := raftstoretest.Open(t, append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors}, identity.Tables()...)...)
	svc := apps.NewService(store, func() time.Time { return time.Now().UTC() })
	ctx := actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"})
	caller := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}
	a, err := svc.Create(ctx, caller, apps.New{Name: "Shop"})
	if err != nil {
		t.Fatal(err)
	}
	if a.State != apps.StateDraft || a.DesiredState != apps.DesiredRunning || a.Slug != "shop" {
		t.Fatalf("created %+v", a)
	}
	b, err := svc.Create(ctx, caller, apps.New{Name: "shop!"})
	if err != nil || b.Slug != "shop-2" {
		t.Fatalf("second app: %+v %v", b, err)
	}
	if _, err := svc.Create(ctx, caller, apps.New{Name: "x", Slug: "shop"}); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Fatalf("a taken slug: %v", err)
	}
	for _, bad := range []apps.New{{Name: ""}, {Name: "  "}, {Name: "a\x00b"}, {Name: strings.Repeat("n", 101)}, {Name: "ok", Slug: "Bad Slug"}, {Name: "ok", Slug: "-x"}} {
		if _, err := svc.Create(ctx, caller, bad); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	grants, _ := identity.Grants.List(store.Read(), raftstore.Query{Index: "app", Key: a.ID})
	planes := map[string]bool{}
	for _, g := range grants {
		planes[g.Value.Plane] = true
		if g.Value.PrincipalID != "usr_1" || (g.Value.Plane == identity.PlaneControl && *g.Value.RoleID != authz.RoleOwner) {
			t.Fatalf("grant %+v", g.Value)
		}
	}
	if len(grants) != 2 || !planes["control"] || !planes["data"] {
		t.Fatalf("grants = %+v", grants)
	}
	if err := svc.Delete(ctx, a.ID, apps.Decision{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(a.ID); errcode.CodeOf(err) != errcode.NotFound {
		t.Fatalf("get after delete: %v", err)
	}
	if grants, _ := identity.Grants.List(store.Read(), raftstore.Query{Index: "app", Key: a.ID}); len(grants) != 0 {
		t.Fatalf("grants left: %+v", grants)
	}
	if err := svc.Delete(ctx, a.ID, apps.Decision{}); errcode.CodeOf(err) != errcode.NotFound {
		t.Fatalf("delete twice: %v", err)
	}
}
