package edge

import (
	"slices"
	"strings"

	"github.com/svchost/svc/internal/ids"
)

// Routes from a source outside this server. In a cluster, where an app's
// instances run and whether they are healthy is known to Consul (or to
// Nomad's own service discovery), not to svc's store; which apps exist,
// their slugs and their host ports are known to svc's store alone. A route
// source (edge/consul, edge/nomadsd) therefore reports only Upstreams, by
// app ID, and Merge joins them with the routes svc's store gives.

// The tags by which a service registration is recognised as an app's
// primary workload. The Nomad job templates put them on the workloads'
// service blocks: every svc service carries TagService and
// TagApp+<app ID> (and TagSlug+<slug>, for people reading the catalog);
// the primary workload's, the one the edge routes to, carries TagPrimary.
const (
	TagService = "svc"
	TagPrimary = "svc-primary"
	TagApp     = "svc-app="
	TagSlug    = "svc-slug="
)

// PrimaryApp returns the app ID of a service registration carrying these
// tags if it is the primary workload of an svc app: TagService,
// TagPrimary, and exactly one well-formed TagApp. Anything else (another
// team's service, a secondary workload, a mangled or ambiguous app tag) is
// not routed.
func PrimaryApp(tags []string) (appID string, ok bool) {
	if !slices.Contains(tags, TagService) || !slices.Contains(tags, TagPrimary) {
		return "", false
	}
	for _, t := range tags {
		id, isApp := strings.CutPrefix(t, TagApp)
		if !isApp {
			continue
		}
		if appID != "" && appID != id {
			return "", false
		}
		appID = id
	}
	if !ids.Valid(ids.App, appID) {
		return "", false
	}
	return appID, true
}

// Upstreams are the addresses (host:port) of the healthy instances of
// each app's primary workload, by app ID, each list sorted and without
// duplicates. An app without a healthy instance is absent.
type Upstreams map[string][]string

// Equal reports whether u and v list the same addresses for the same apps.
func (u Upstreams) Equal(v Upstreams) bool {
	if len(u) != len(v) {
		return false
	}
	for id, a := range u {
		b, ok := v[id]
		if !ok || !slices.Equal(a, b) {
			return false
		}
	}
	return true
}

// Merge returns base (the routes svc's store gives: app, slug, host port)
// with each route's Upstream taken from ups instead: one of the app's
// healthy instances, or empty (the edge answers 502) when it has none.
// Apps in ups that base does not list are not routed: a registration in
// the catalog does not make an app. base is not modified.
//
// A route holds one upstream, so an app with several healthy instances
// is routed to the one whose address sorts first; every edge node picks
// the same one, and the next one takes over as soon as it leaves.
func Merge(base []Route, ups Upstreams) []Route {
	out := slices.Clone(base)
	for i := range out {
		out[i].Upstream = ""
		if addrs := ups[out[i].AppID]; len(addrs) > 0 {
			out[i].Upstream = slices.Min(addrs)
		}
	}
	return out
}
