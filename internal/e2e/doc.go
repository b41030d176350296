// Package e2e runs the real svc binary as separate processes and checks what
// an operator sees: the configuration it refuses, the state it keeps across
// crashes, and a cluster that keeps every acknowledged write, and delivers
// every event's webhooks, while its leaders are killed.
//
// The browser tests (browser_test.go) drive a real headless Chromium
// (internal/browsertest) against the real binary, with a hostile tenant's
// app (hostile_test.go) playing every app: `go test -run TestBrowser
// ./internal/e2e/` (they skip without Chromium; SVC_REQUIRE_BROWSER=1 makes
// that a failure).
//
// It holds only tests. It must not import the server, the store or any
// internal package of svc but test harnesses: it talks to svc only through
// the api client and the process boundary (environment variables, flags, signals, exit codes,
// logs and the files of the work directory). TestMain builds ./cmd/svc once
// into a temporary directory.
//
// Environment knobs:
//
//	SVC_E2E_RACE=1          build the binary with -race (and fail on a race report)
//	SVC_SOAK_DURATION=10m   keep killing cluster leaders for that long instead of 3 rounds
//	SVC_SOAK_EVENTS=300     webhook events the webhook soak sends through leader kills
//	SVC_SOAK_KILLS=3        leader kills of the webhook soak
//	SVC_SOAK_SEED=19        seeds which attempts the webhook soak's receiver fails
//	SVC_E2E_LOG_DIR=dir     keep the processes' logs in dir instead of the test's temp dir
//	SVC_BENCH_DIR=dir       where BenchmarkWritesBesideEtcd keeps svc's and etcd's data (the repository's .bench)
//	ETCD_BIN=path           the etcd that benchmark compares with (etcd on PATH; without one, svc alone)
//
// go test -short runs one leader kill instead of three.
package e2e
