package edge

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	appA = "app_01J0000000000000000000000A"
	appB = "app_01J0000000000000000000000B"
)

func TestPrimaryApp(t *testing.T) {
	for _, tc := range []struct {
		name string
		tags []string
		want string
	}{
		{"primary", []string{TagService, TagPrimary, TagApp + appA, TagSlug + "notes"}, appA},
		{"any order", []string{TagApp + appA, "http", TagPrimary, TagService}, appA},
		{"same app tag twice", []string{TagService, TagPrimary, TagApp + appA, TagApp + appA}, appA},
		{"secondary workload", []string{TagService, TagApp + appA}, ""},
		{"not svc's", []string{TagPrimary, TagApp + appA}, ""},
		{"no app", []string{TagService, TagPrimary}, ""},
		{"empty app", []string{TagService, TagPrimary, TagApp}, ""},
		{"two apps", []string{TagService, TagPrimary, TagApp + appA, TagApp + appB}, ""},
		{"not an app ID", []string{TagService, TagPrimary, TagApp + "usr_01J0000000000000000000000A"}, ""},
		{"lower-case ULID", []string{TagService, TagPrimary, TagApp + "app_01j0000000000000000000000a"}, ""},
		{"nil", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PrimaryApp(tc.tags)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("PrimaryApp(%q) = %q, %v; want %q", tc.tags, got, ok, tc.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	base := []Route{
		{AppID: appA, Slug: "notes", Port: 9001, Upstream: "127.0.0.1:5000"},
		{AppID: appB, Slug: "wiki", Upstream: "127.0.0.1:5001"},
	}
	for _, tc := range []struct {
		name string
		ups  Upstreams
		want []Route
	}{
		{"no source knows anything", nil, []Route{
			{AppID: appA, Slug: "notes", Port: 9001},
			{AppID: appB, Slug: "wiki"},
		}},
		{"one healthy instance", Upstreams{appA: {"10.0.0.7:31000"}}, []Route{
			{AppID: appA, Slug: "notes", Port: 9001, Upstream: "10.0.0.7:31000"},
			{AppID: appB, Slug: "wiki"},
		}},
		{"several instances: the first address", Upstreams{appA: {"10.0.0.9:1", "10.0.0.10:2", "10.0.0.8:3"}, appB: {"[fd00::1]:80"}}, []Route{
			{AppID: appA, Slug: "notes", Port: 9001, Upstream: "10.0.0.10:2"},
			{AppID: appB, Slug: "wiki", Upstream: "[fd00::1]:80"},
		}},
		{"an empty list is no instance", Upstreams{appA: {}}, []Route{
			{AppID: appA, Slug: "notes", Port: 9001},
			{AppID: appB, Slug: "wiki"},
		}},
		{"apps svc does not know are not routed", Upstreams{"app_01J0000000000000000000000C": {"10.0.0.1:80"}}, []Route{
			{AppID: appA, Slug: "notes", Port: 9001},
			{AppID: appB, Slug: "wiki"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]Route(nil), base...)
			got := Merge(base, tc.ups)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Merge (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, base); d != "" {
				t.Errorf("Merge modified base:\n%s", d)
			}
		})
	}
	if got := Merge(nil, Upstreams{appA: {"10.0.0.1:80"}}); len(got) != 0 {
		t.Errorf("Merge(nil, …) = %v", got)
	}
}

func TestUpstreamsEqual(t *testing.T) {
	a := Upstreams{appA: {"10.0.0.1:80", "10.0.0.2:80"}}
	for _, tc := range []struct {
		name string
		b    Upstreams
		want bool
	}{
		{"same", Upstreams{appA: {"10.0.0.1:80", "10.0.0.2:80"}}, true},
		{"one fewer", Upstreams{appA: {"10.0.0.1:80"}}, false},
		{"another app", Upstreams{appB: {"10.0.0.1:80", "10.0.0.2:80"}}, false},
		{"one more app", Upstreams{appA: {"10.0.0.1:80", "10.0.0.2:80"}, appB: {"10.0.0.3:80"}}, false},
		{"nil", nil, false},
	} {
		if got := a.Equal(tc.b); got != tc.want {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !Upstreams(nil).Equal(Upstreams{}) {
		t.Error("nil and empty differ")
	}
}
