package authz

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// specVerbs is the specification's list of verbs with their scopes, in its
// order.
var specVerbs = []struct {
	Verb  Verb
	Scope Scope
}{
	{"app.create", ScopeInstall},
	{"app.view", ScopeApp},
	{"app.spec.edit", ScopeApp},
	{"app.delete", ScopeApp},
	{"app.restart", ScopeApp},
	{"app.logs.read", ScopeApp},
	{"app.exec", ScopeApp},
	{"app.deploy", ScopeApp},
	{"app.secrets.write", ScopeApp},
	{"app.secrets.read", ScopeApp},
	{"app.grants.manage", ScopeApp},
	{"install.view", ScopeInstall},
	{"install.tokens.manage", ScopeInstall},
	{"install.users.manage", ScopeInstall},
	{"install.adapters.manage", ScopeInstall},
	{"install.policy.manage", ScopeInstall},
	{"install.audit.read", ScopeInstall},
	{"install.backup.manage", ScopeInstall},
	{"install.events.manage", ScopeInstall},
}

func TestAllMatchesSpecification(t *testing.T) {
	if got, want := len(specVerbs), 19; got != want {
		t.Fatalf("test table has %d verbs; the specification has %d", got, want)
	}
	var want []Verb
	for _, v := range specVerbs {
		want = append(want, v.Verb)
	}
	if diff := cmp.Diff(want, All()); diff != "" {
		t.Errorf("All() (-want +got):\n%s", diff)
	}
}

func TestScopeOf(t *testing.T) {
	for _, tt := range specVerbs {
		t.Run(string(tt.Verb), func(t *testing.T) {
			got, ok := ScopeOf(tt.Verb)
			if !ok || got != tt.Scope {
				t.Errorf("ScopeOf(%q) = %q, %t; want %q, true", tt.Verb, got, ok, tt.Scope)
			}
			if !Known(tt.Verb) {
				t.Errorf("Known(%q) = false; want true", tt.Verb)
			}
		})
	}
}

func TestUnknownVerbs(t *testing.T) {
	for _, v := range []Verb{"", "app", "app.*", "*", "App.view", "app.view ", "app.views", "install", "install.tokens", "app.secrets"} {
		if Known(v) {
			t.Errorf("Known(%q) = true; want false", v)
		}
		if s, ok := ScopeOf(v); ok || s != "" {
			t.Errorf("ScopeOf(%q) = %q, %t; want \"\", false", v, s, ok)
		}
	}
}

func TestVerbsByScope(t *testing.T) {
	want := map[Scope][]Verb{}
	for _, v := range specVerbs {
		want[v.Scope] = append(want[v.Scope], v.Verb)
	}
	tests := []struct {
		scope Scope
		n     int
	}{
		{ScopeInstall, 9},
		{ScopeApp, 10},
	}
	for _, tt := range tests {
		t.Run(string(tt.scope), func(t *testing.T) {
			got := Verbs(tt.scope)
			if diff := cmp.Diff(want[tt.scope], got); diff != "" {
				t.Errorf("Verbs(%q) (-want +got):\n%s", tt.scope, diff)
			}
			if len(got) != tt.n {
				t.Errorf("len(Verbs(%q)) = %d; want %d", tt.scope, len(got), tt.n)
			}
			for _, v := range got {
				if s, _ := ScopeOf(v); s != tt.scope {
					t.Errorf("Verbs(%q) lists %q whose ScopeOf is %q", tt.scope, v, s)
				}
			}
		})
	}
	if got := Verbs("nope"); len(got) != 0 {
		t.Errorf("Verbs(\"nope\") = %v; want none", got)
	}
}

func TestScopesPartitionAll(t *testing.T) {
	union := append(Verbs(ScopeInstall), Verbs(ScopeApp)...)
	all := All()
	slices.Sort(union)
	slices.Sort(all)
	if diff := cmp.Diff(all, union); diff != "" {
		t.Errorf("install and app verbs are not exactly All() (-all +union):\n%s", diff)
	}
}

func TestNoDuplicates(t *testing.T) {
	seen := map[Verb]bool{}
	for _, v := range All() {
		if seen[v] {
			t.Errorf("verb %q listed twice", v)
		}
		seen[v] = true
	}
}

func TestAllReturnsCopy(t *testing.T) {
	a := All()
	a[0] = "changed"
	if got := All()[0]; got != AppCreate {
		t.Errorf("after modifying a result of All(), All()[0] = %q; want %q", got, AppCreate)
	}
}
