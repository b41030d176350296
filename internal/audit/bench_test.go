package audit

import "testing"

// BenchmarkQuery answers queries over 100,000 entries (the "matches" metric
// is how many entries the filter matches in all, not the page).
func BenchmarkQuery(b *testing.B) {
	u := newUniverse(1000, 50, 200)
	all := genEntries(u, 100_000, 2)
	r := load(b, all)
	count := func(f Filter) int { return len(referenceAll(all, f, "")) }
	middle := all[len(all)/2].ID
	for _, bc := range []struct {
		name   string
		f      Filter
		before string
	}{
		{name: "none/first_page"},
		{name: "none/deep_page", before: middle},
		{name: "principal/busy", f: Filter{PrincipalID: "usr_0000"}},
		{name: "principal/rare", f: Filter{PrincipalID: "usr_0900"}},
		{name: "principal/system_deep_page", f: Filter{PrincipalID: "system"}, before: middle},
		{name: "action/one", f: Filter{Action: "secret.read"}},
		{name: "action/prefix", f: Filter{Action: "app."}},
		{name: "action/rare_prefix", f: Filter{Action: "grant."}},
		{name: "involving/busy", f: Filter{Involving: "usr_0000"}},
		{name: "involving/rare", f: Filter{Involving: "usr_0900"}},
		{name: "kind/deep_page", f: Filter{PrincipalKind: PrincipalToken}, before: middle},
		{name: "nothing/unknown_principal", f: Filter{PrincipalID: "usr_none"}},
		{name: "nothing/unknown_action", f: Filter{Action: "nope."}},
		{name: "nothing/indexed_but_contradictory", f: Filter{PrincipalID: "system", Action: "user.login", PrincipalKind: PrincipalUser}},
		{name: "nothing/unindexed_full_scan", f: Filter{TargetKind: "none"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				Query(r, bc.f, bc.before, DefaultLimit)
			}
			b.ReportMetric(float64(count(bc.f)), "matches")
		})
	}
}
