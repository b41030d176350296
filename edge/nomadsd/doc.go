// Package nomadsd owns the nomad routes adapter: a Watcher that keeps the
// upstreams of svc's apps as Nomad's native service discovery reports
// them, for the edge's route table, and its adapter kind (Kind). It is
// the second route source behind the interface edge/consul serves
// (Upstreams, Run), for clusters that run Nomad without Consul.
//
// It speaks plain HTTP and JSON to Nomad's /v1/services endpoints and must
// not import Nomad's API client (github.com/hashicorp/nomad/api), which
// only scheduler/nomad may use; the few fields it reads are declared here.
//
// What it watches. Workloads register with Nomad's provider from their job
// (service blocks with provider = "nomad"); a registration is svc's
// when it carries the tag "svc", and it is the app's primary workload,
// the one the edge routes to, when it also carries "svc-primary" and
// "svc-app=<app ID>" (edge.PrimaryApp). The Watcher runs one blocking
// query on /v1/services?namespace=<namespace> to learn which such
// services exist, and one blocking query per service on
// /v1/service/<name>; each returns as soon as Nomad's index moves
// (X-Nomad-Index), so a change reaches the edge in one round trip and
// nothing polls. Indexes, retries and stale upstreams during a failure are
// handled as in edge/consul.
//
// Health. Nomad's service registrations carry no health: Nomad (1.4 and
// later) runs checks for services of the nomad provider on its clients,
// but its servers do not record their results, /v1/service/<name> lists
// every registration whatever its checks say, and the results are only
// readable per allocation from the client that runs it
// (/v1/client/allocation/<id>/checks), with no blocking query
// (hashicorp/nomad#15603, #23317). Filtering on them would mean polling
// every allocation, which this source does not do. So it routes every
// registered instance, and says so: its capabilities report
// health_filtered false. What bounds the harm: a registration exists only
// while its allocation runs (Nomad removes it when the allocation stops
// or its node is lost); a check with check_restart restarts a failing
// task; an instance that does not answer makes the edge answer 502 or 504
// for it. Where routing only to healthy instances matters, use the consul
// routes adapter.
//
// What it produces. Upstreams, by app ID: host:port of every registered
// instance. Slugs and host ports are svc's own: cmd/svc merges the two
// with edge.Merge before replacing the edge's table.
//
// Errors. Nomad's errors become *errcode.Error by HTTP status and error
// type, never by message text: not reachable ADAPTER_UNAVAILABLE; 401 and
// 403 (no token, an unknown one, or one without read-job on the namespace)
// ADAPTER_FAILED with a remedy about the token; any other 4xx and every
// 5xx ADAPTER_FAILED. Messages never carry the token or Nomad's answer.
//
// Limits. One long-lived request per watched service plus one for the
// list; Nomad reports the index of its whole service registrations table,
// so after any change a service's next query may return at once with
// nothing new for it (the watcher compares and publishes only changes).
// With ACLs the token needs the read-job capability on the namespace.
//
// It must not import the scheduler, a runtime or cmd/svc, nor read svc's
// store. Its fake (fakenomadsd) is for tests only.
//
// The watch loop itself (index handling, backoff, publishing snapshots)
// and the translation of HTTP failures into codes are edge/blocking's,
// shared with edge/consul; this package keeps what is its vendor's: requests,
// answers, headers, ACLs and the wording of its remedies.
package nomadsd
