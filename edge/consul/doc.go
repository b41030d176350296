// Package consul owns the consul routes adapter: a Watcher that keeps the
// upstreams of svc's apps as Consul's health API reports them, for the
// edge's route table, and its adapter kind (Kind). It is the only importer
// of Consul's API client (github.com/hashicorp/consul/api).
//
// What it watches. Each app's workloads register as Consul services from
// their Nomad job (service blocks with checks); a service is svc's when it
// carries the tag "svc", and it is the app's primary workload, the one the
// edge routes to, when it also carries "svc-primary" and "svc-app=<app
// ID>" (edge.PrimaryApp; "svc-slug=<slug>" is for people). The Watcher
// runs one blocking query on /v1/catalog/services to learn which such
// services exist, and one blocking query per service on
// /v1/health/service/<name>?passing=true: only instances whose every check
// passes are routed (a warning is not passing). A blocking query returns
// as soon as Consul's index for what it reads moves, so a change reaches
// the edge in the time of one round trip; nothing polls. Indexes are
// handled as Consul's documentation asks: one that goes backwards (a
// snapshot restore, a new cluster behind the same address) starts the
// watch over with a non-blocking read, and an index of 0 is never waited
// on. A failed query is retried with exponential backoff and jitter, and
// the upstreams known before the failure are kept meanwhile: the instances
// are likelier to be serving than not, and the adapter's health check
// (Check) reports the failure.
//
// What it produces. Upstreams, by app ID: host:port of every passing
// instance (the service's address, else its node's). Slugs and host ports
// are svc's own, from its store: cmd/svc merges the two with edge.Merge
// before replacing the edge's table. Apps whose services are in Consul but
// not in svc's store are not routed.
//
// Errors. Consul's errors become *errcode.Error by HTTP status and error
// type, never by message text: not reachable (refused, DNS, reset,
// timeout) ADAPTER_UNAVAILABLE; 401 and 403 (an unknown token, or one
// without the policy) ADAPTER_FAILED with a remedy about the token; any
// other 4xx and every 5xx (no cluster leader, an unknown datacenter)
// ADAPTER_FAILED; a certificate not trusted ADAPTER_FAILED. Messages name
// the operation and the status, never the token, and carry nothing of
// Consul's answer.
//
// Limits. One long-lived request per watched service plus one for the
// catalog: over plain HTTP each is a connection, and a Consul agent
// accepts 200 connections per client address by default
// (limits.http_max_conns_per_client); beyond about 200 apps per edge node
// raise that limit or use https, over which the requests share one
// HTTP/2 connection. With ACLs, the token needs service:read on svc's
// services and node:read on their nodes, and nothing else
// (/v1/status/leader takes no ACL); Consul filters rather than refuses:
// a token that may not read a service does not see it at all, and one
// that may read it but not its nodes sees none of its instances, so in
// either case its app is not routed. Like every Consul client, an empty
// token setting falls back to CONSUL_HTTP_TOKEN_FILE, then
// CONSUL_HTTP_TOKEN, in svc's environment, as namespace and partition do
// to CONSUL_NAMESPACE and CONSUL_PARTITION; those two are Consul
// Enterprise features, which the community edition refuses (HTTP 400).
//
// It must not import the scheduler, a runtime or cmd/svc, nor read svc's
// store: it hands upstreams out and cmd/svc feeds the table. Its fake
// (fakeconsul) is for tests only.
//
// The watch loop itself (index handling, backoff, publishing snapshots)
// and the translation of HTTP failures into codes are edge/blocking's,
// shared with edge/nomadsd; this package keeps what is its vendor's: requests,
// answers, headers, ACLs and the wording of its remedies.
package consul
