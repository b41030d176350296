// Package blocking owns what the edge's route sources share about
// blocking queries (Consul's and Nomad's work alike): the watch loop of a
// route source (Routes: one query on the list of primary services, one per
// service, their upstreams merged and published as snapshots), the
// handling of the index a query waits on (NextIndex: an index that went
// backwards starts the watch over, 0 is never waited on), the backoff with
// jitter after a failed query, the bound on one query's time, and the
// translation of HTTP failures (an error status, or no answer at all) into
// svc's error codes for a route source (Vendor).
//
// It must not import any vendor's client (Consul's API, Nomad's), nor the
// scheduler, a runtime or cmd/svc: edge/consul and edge/nomadsd make the
// requests, parse the answers and keep their vendor's URLs, headers, JSON
// shapes and ACL behaviour; this package only runs their queries. Its
// fakes' share, fakeblock, is for tests only.
package blocking
