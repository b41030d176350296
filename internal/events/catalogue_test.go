package events

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var nameRE = regexp.MustCompile(`^[a-z]+(\.[a-z_]+)+$`)

func TestCatalogueShape(t *testing.T) {
	c := Catalogue()
	if got, want := len(c), 43; got != want {
		t.Errorf("catalogue has %d names; want %d", got, want)
	}
	seen := map[string]bool{}
	for _, k := range c {
		if seen[k.Name] {
			t.Errorf("event %q listed twice", k.Name)
		}
		seen[k.Name] = true
		if !nameRE.MatchString(k.Name) {
			t.Errorf("event name %q does not match %s", k.Name, nameRE)
		}
		switch k.Scope {
		case ScopeApp, ScopeInstall, ScopeAppOrInstall:
		default:
			t.Errorf("event %q has scope %q; want app, install or app_or_install", k.Name, k.Scope)
		}
		if k.Meaning == "" {
			t.Errorf("event %q has no meaning", k.Name)
		}
		fields := map[string]bool{}
		for _, f := range k.Data {
			if fields[f] {
				t.Errorf("event %q lists data field %q twice", k.Name, f)
			}
			fields[f] = true
		}
		got, ok := Lookup(k.Name)
		if !ok {
			t.Errorf("Lookup(%q) found nothing", k.Name)
		} else if diff := cmp.Diff(k, got); diff != "" {
			t.Errorf("Lookup(%q) (-catalogue +lookup):\n%s", k.Name, diff)
		}
	}
}

func TestSpecifiedNames(t *testing.T) {
	tests := []struct {
		name  string
		scope Scope
	}{
		{"adapter.configured", ScopeInstall},
		{"adapter.recovered", ScopeInstall},
		{"adapter.unhealthy", ScopeInstall},
		{"deploy.failed", ScopeApp},
		{"svc.upgraded", ScopeInstall},
		{"policy.updated", ScopeInstall},
		{"subscription.test", ScopeInstall},
		{"token.created", ScopeInstall},
		{"token.revoked", ScopeInstall},
		{"user.created", ScopeInstall},
		{"user.deleted", ScopeInstall},
		{"user.signed_in", ScopeInstall},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, ok := Lookup(tt.name)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tt.name)
			}
			if k.Scope != tt.scope {
				t.Errorf("scope of %q = %q; want %q", tt.name, k.Scope, tt.scope)
			}
		})
	}
}

func TestDeployFailedData(t *testing.T) {
	k, ok := Lookup("deploy.failed")
	if !ok {
		t.Fatal("Lookup(\"deploy.failed\") found nothing")
	}
	want := []string{"deployment_id", "spec_id", "trigger", "error_code", "message"}
	if diff := cmp.Diff(want, k.Data); diff != "" {
		t.Errorf("deploy.failed data (-want +got):\n%s", diff)
	}
}

func TestLookupUnknown(t *testing.T) {
	for _, name := range []string{"", "deploy", "deploy.*", "Deploy.failed", "deploy.failed "} {
		if k, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) = %+v; want nothing", name, k)
		}
	}
}

func TestCatalogueReturnsCopy(t *testing.T) {
	c := Catalogue()
	c[0].Name = "changed"
	if got := Catalogue()[0].Name; got == "changed" {
		t.Error("modifying the result of Catalogue() changed the catalogue")
	}
}

// TestMatches documents the filter language as implemented: "*" selects
// everything; a filter ending in one "*" is a plain string prefix (so "dep*"
// selects deploy.* and "deploy.*" does not select a bare "deploy"); anything
// else, including a "*" elsewhere than at the end, must equal the name.
// Matching is case-sensitive.
func TestMatches(t *testing.T) {
	tests := []struct {
		filter, name string
		want         bool
	}{
		{"deploy.failed", "deploy.failed", true},
		{"deploy.failed", "deploy.started", false},
		{"deploy.failed", "deploy.failed.x", false},
		{"Deploy.failed", "deploy.failed", false},
		{"deploy.*", "deploy.failed", true},
		{"deploy.*", "deploy.waiting_approval", true},
		{"deploy.*", "app.created", false},
		{"deploy.*", "deploy", false},
		{"*", "deploy.failed", true},
		{"*", "anything.at_all", true},
		{"nope", "deploy.failed", false},
		{"deploy.*x", "deploy.failed", false},
		{"deploy.*x", "deploy.*x", true}, // no "*" at the end: compared as a name
		{"*.failed", "deploy.failed", false},
		{"dep*", "deploy.failed", true},
		{"d*", "deploy.failed", true},
		{"deploy.**", "deploy.failed", false},
		{"**", "deploy.failed", false},
		{"", "deploy.failed", false},
		{"deploy.", "deploy.failed", false},
		{"app.*", "app.created", true},
		{"app.*", "adapter.configured", false},
	}
	for _, tt := range tests {
		t.Run(tt.filter+"|"+tt.name, func(t *testing.T) {
			if got := Matches(tt.filter, tt.name); got != tt.want {
				t.Errorf("Matches(%q, %q) = %t; want %t", tt.filter, tt.name, got, tt.want)
			}
		})
	}
}

func TestFilterMatchesAny(t *testing.T) {
	tests := []struct {
		filter string
		want   bool
	}{
		{"deploy.failed", true},
		{"user.signed_in", true},
		{"deploy.*", true},
		{"security.*", true},
		{"*", true},
		{"dep*", true},
		{"nope", false},
		{"nope.*", false},
		{"deploy.*x", false},
		{"deploy.", false},
		{"deploy", false},
		{"*.failed", false},
		{"**", false},
		{"", false},
		{"DEPLOY.*", false},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			if got := FilterMatchesAny(tt.filter); got != tt.want {
				t.Errorf("FilterMatchesAny(%q) = %t; want %t", tt.filter, got, tt.want)
			}
		})
	}
}

// TestEveryNameSelectsItself checks each name is a filter that selects it
// and nothing else, and that its family prefix selects it.
func TestEveryNameSelectsItself(t *testing.T) {
	for _, k := range Catalogue() {
		n := 0
		for _, other := range Catalogue() {
			if Matches(k.Name, other.Name) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("filter %q selects %d events; want 1", k.Name, n)
		}
		head, _, _ := strings.Cut(k.Name, ".")
		family := head + ".*"
		if !Matches(family, k.Name) {
			t.Errorf("Matches(%q, %q) = false; want true", family, k.Name)
		}
	}
}
