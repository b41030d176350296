# svc: the two commands a newcomer needs are `make run` and `make test`.

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
# The work dir of `make run` lives under the checkout unless set.
SVC_SERVER_WORK_DIR ?= $(CURDIR)/.svc
export SVC_SERVER_WORK_DIR

# `make soak SOAK=30m` kills cluster leaders for that long.
SOAK      ?= 10m
# `make soak-events` sends this many webhook events through this many
# leader kills.
SOAK_EVENTS ?= 10000
SOAK_KILLS  ?= 20
# `make fuzz FUZZTIME=2m` runs every fuzz target for that long.
FUZZTIME  ?= 30s
# Benchmarks write where the work dir's disk is.
BENCHTIME ?= 2000x
# The vault binary the secrets adapter's tests run against (a dev server),
# when `make tools` has built it on this machine; empty otherwise, and then
# those tests skip and say how to get it. `make test` never builds it. Only
# the recipes that run those tests get it: `svc serve` (make run) warns of
# an SVC_ variable it does not know.
test bench: export SVC_VAULT_BIN ?= $(shell bash scripts/vault-tool.sh --path-if-built 2>/dev/null)
# Likewise the versitygw binary (an S3-compatible server) the s3 backup
# storage adapter's tests and benchmarks run against.
test bench: export SVC_VERSITYGW_BIN ?= $(shell bash scripts/versitygw-tool.sh --path-if-built 2>/dev/null)

.PHONY: all build run test lint vet fmt bench soak soak-events fuzz notice tools clean console terraform-check terraform-e2e

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/svc ./cmd/svc

run: build
	bin/svc serve

# The web console's built assets (console/dist), committed and embedded in
# the binary: rebuild them after changing console/src, and commit them
# (make test fails while they are stale). Needs Node.js 20.19+ and npm.
console:
	cd console && npm ci --no-audit --no-fund && npm run build

# Everything CI runs: formatting, vet, and every test (unit, real-store,
# server, fuzz seeds, and the multi-process cluster tests) under the race
# detector.
test: lint
	$(GO) test -race -count=1 -timeout 30m ./...

lint: vet
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Replicated writes per second with 1 and 64 writers, on one node and on
# three (leader and via a follower), beside the raw fsync rate of this disk;
# a 64 MiB blob fetched by one node from another (MB/s); the API's hot
# paths; sealing; a secret set and read through builtin and (when `make
# tools` built it) a real Vault dev server; the edge's assertions: cached,
# signed, and verified by the app-side verifier; the sandbox's cost: a
# workload run to ready, a build, requests to a workload, and a deploy and
# wrk through the edge with and without it; a rollback beside a fresh
# deploy on both runtimes (Releases, below).
#
# Writes beside etcd (BenchmarkWritesBesideEtcd): the real svc binary, one
# node, renames launcher sections through its HTTP API (PATCH
# /api/v1/me/sections/{id}, a bearer token, one Raft command each: the row
# and its audit entry), and etcd (Debian's etcd-server, 3.4) started on
# loopback with default settings makes the same number of puts through its
# HTTP gateway (POST /v3/kv/put); both keep their data in .bench and fsync
# every write before answering. It prints, for 1 client, 64 clients each
# writing its own object and 64 clients writing one object: writes/s that
# succeeded, p50/p99 latency, failures by status and code (never retried),
# and svc/etcd, the ratio of writes/s. Without etcd (apt-get install
# etcd-server, or ETCD_BIN=/path/to/etcd) it says so and measures svc alone.
#
# Releases (BenchmarkRollbackAgainstDeploy): deploy-ms, a fresh deploy of
# samples/go-hello after a new upload (its Go build, then the start),
# beside rollback-ms, a rollback to the release before it (its kept build
# started, nothing built), on the sandboxed process runtime and on the
# Nomad runtime against the fake Nomad (build jobs, the artifact store,
# tasks run for real) and, when SVC_NOMAD_BIN names a nomad binary (or one
# is on PATH), against a real `nomad agent -dev` (...RealAgent; skipped,
# saying why, without one).
#
# A tool call of the tool server at /mcp beside the same API call
# (BenchmarkToolCall: apps_list over streamable HTTP, GET /api/v1/apps).
#
# The console (BenchmarkConsoleLauncher): the launcher's load time with 200
# apps in a real headless Chromium (navigation to every tile rendered, ms),
# and the console's transfer size (its HTML, JS and CSS gzipped, bytes).
#
# CLI start-up (BenchmarkCLIStartup): ms/op from exec to exit of the
# built svc, `svc apps list` against a real server on loopback (one GET,
# a table printed) and `svc --help` with no server.
#
# Webhooks: commit-to-first-attempt (BenchmarkWebhookLatency: one secret
# set at a time through the API, from its answer to the first request of its
# event at a loopback receiver; p50-ms, p99-ms over 1000 events) and
# sustained deliveries per second (BenchmarkWebhookThroughput: 2,000 events
# to 1 and to 10 install-wide subscriptions, each attempt answered 204 and
# recorded), on a single node with its store on this disk.
#
# Backup storage (BenchmarkStorageLocal, BenchmarkStorageS3): put and get
# throughput (MB/s) of a 64 MiB object on the local adapter (in .bench,
# fsynced) and on the s3 adapter against a real versitygw on loopback, over
# http and https (skipped, saying why, when `make tools` has not built it).
#
# History (BenchmarkAuditedWrites): a million audited changes (SVC_BENCH_AUDIT_ENTRIES
# sets how many) written by 64 writers to a real store on this disk, then the
# heap the process holds per million entries after a collection, the store's
# files (raft log, history, snapshots), and GET /audit's query latency
# (p50/p99) over them for filters of every kind, first and deep pages.
#
# Security scans (internal/scan): each sample scanned with the fixture OSV
# database, a generated 10,000-file repository against 5,000 generated
# advisories, and loading that export from its zip.
#
# Backups (BenchmarkBackupRestore): a 1 GiB tree of random data backed up to
# the local storage on this disk (every chunk new), verified and restored:
# MB/s of each.
bench:
	@mkdir -p .bench
	SVC_BENCH_DIR=$(CURDIR)/.bench $(GO) test -run '^$$' -bench BackupRestore -benchtime 1x -count 1 ./internal/backuprepo/
	SVC_BENCH_DIR=$(CURDIR)/.bench $(GO) test -run '^$$' -bench . -skip FetchBlob -benchtime $(BENCHTIME) -count 1 ./raftstore/
	$(GO) test -run '^$$' -bench FetchBlob -benchtime 20x -count 1 ./raftstore/
	$(GO) test -run '^$$' -bench . -skip WebhookLatency -benchmem -count 1 ./server/
	$(GO) test -run '^$$' -bench WebhookLatency -benchtime 1000x -count 1 ./server/
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 1 ./internal/keyring/ ./vaultsecrets/ ./internal/throttle/ ./internal/clientip/ ./internal/webhook/
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./edge/ ./assertion/ ./edge/consul/ ./edge/nomadsd/ ./jobs-templates/
	$(GO) test -run '^$$' -bench . -skip RollbackAgainstDeploy -benchtime 200x -count 1 ./scheduler/ ./scheduler/nomad/
	$(GO) test -run '^$$' -bench . -skip 'RunToReady|BuildCommand|RollbackAgainstDeploy' -benchtime 200x -count 1 ./scheduler/process/
	$(GO) test -run '^$$' -bench 'RunToReady|BuildCommand' -benchtime 20x -count 1 ./scheduler/process/
	$(GO) test -run '^$$' -bench RollbackAgainstDeploy -benchtime 5x -count 1 ./scheduler/process/ ./scheduler/nomad/
	$(GO) test -run '^$$' -bench 'EdgeWrk|SandboxEdge' -benchtime 1x -count 1 ./internal/e2e/
	$(GO) test -run '^$$' -bench 'ScanSample|LoadDB' -benchmem -count 1 ./internal/scan/
	$(GO) test -run '^$$' -bench Scan10000Files -benchmem -benchtime 3x -count 1 ./internal/scan/
	$(GO) test -run '^$$' -bench CLIStartup -benchtime 50x -count 1 ./internal/e2e/
	$(GO) test -run '^$$' -bench ToolCall -benchtime 500x -count 1 ./internal/e2e/
	$(GO) test -run '^$$' -bench ConsoleLauncher -benchtime 10x -count 1 ./internal/e2e/
	SVC_BENCH_DIR=$(CURDIR)/.bench $(GO) test -run '^$$' -bench WritesBesideEtcd -benchtime $(BENCHTIME) -count 1 ./internal/e2e/
	SVC_BENCH_DIR=$(CURDIR)/.bench $(GO) test -run '^$$' -bench Storage -benchtime 5x -count 1 ./backupstores/local/ ./backupstores/s3/
	$(GO) test -run '^$$' -bench Query -benchmem -count 1 ./internal/audit/
	SVC_BENCH_DIR=$(CURDIR)/.bench $(GO) test -run '^$$' -bench AuditedWrites -benchtime 1x -timeout 90m -count 1 ./internal/audit/

# Three svc serve processes; the leader is killed with SIGKILL again and
# again for $(SOAK) while clients write; every acknowledged write must be on
# every node afterwards.
soak:
	SVC_SOAK_DURATION=$(SOAK) $(GO) test -count=1 -v -timeout 0 -run 'TestClusterKeepsAcknowledgedWritesThroughLeaderKills' ./internal/e2e/

# Three svc serve processes, an install-wide webhook subscription to a
# receiver failing a fifth of the attempts, $(SOAK_EVENTS) secret changes
# written through any node while the leader is killed with SIGKILL
# $(SOAK_KILLS) times: every acknowledged change is delivered at least
# once, repeats carry the same body, and nothing is sent for a change that
# never committed. `make test` runs a short version (300 events, 3 kills).
soak-events:
	SVC_SOAK_EVENTS=$(SOAK_EVENTS) SVC_SOAK_KILLS=$(SOAK_KILLS) $(GO) test -count=1 -v -timeout 0 -run 'TestWebhooksDeliveredThroughLeaderKills' ./internal/e2e/

# Every fuzz target, one after another, for $(FUZZTIME) each.
# The Terraform modules' checks that need no providers: the Go test (also
# part of `make test`) and, where OpenTofu is installed, tofu fmt -check.
# The terraform/ checks: TestModulesAndExamples (parse, hclwrite.Format,
# variables, outputs, module calls), the templates rendered, and
# TestTofuFmt: `tofu fmt -check -recursive -diff` with a real OpenTofu
# (SVC_TOFU_BIN, tofu on PATH, or the one `bash scripts/tofu-tool.sh`
# built); without one it skips and says so, SVC_REQUIRE_TOFU=1 fails.
terraform-check:
	$(GO) test -count=1 ./terraform/
	$(GO) test -count=1 -v -run '^TestTofuFmt$$' ./terraform/

# Applies terraform/examples/local with OpenTofu against a real Nomad dev
# agent and Vault dev server on this machine, checks the three svc servers
# form one Raft cluster with the adapters from their config file, deploys
# samples/static-hello through the nomad runtime, checks it answers through
# the edge, destroys, and checks nothing is left (scripts/terraform-e2e.sh
# says what it needs: TOFU=, NOMAD=, VAULT=, PROVIDERS_DIR=). ACL=1 runs
# Nomad with ACLs; CONSUL=/path/to/consul adds Consul with ACLs and routes
# through it; DRIVER=exec runs the servers with the exec driver.
terraform-e2e:
	TOFU="$(TOFU)" NOMAD="$(NOMAD)" VAULT="$(VAULT)" PROVIDERS_DIR="$(PROVIDERS_DIR)" ACL="$(ACL)" CONSUL="$(CONSUL)" DRIVER="$(DRIVER)" bash scripts/terraform-e2e.sh

fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "== $$pkg $$target"; \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# Test-time tools, built once per machine into a cache outside the
# repository: Vault (BUSL-1.1, never linked into or shipped with svc; about
# 6.5 minutes the first time), OpenTofu (MPL-2.0, for terraform-check's
# tofu fmt and terraform-e2e) and versitygw (Apache-2.0, an S3-compatible
# server; about 3 minutes).
tools:
	bash scripts/vault-tool.sh
	bash scripts/tofu-tool.sh
	bash scripts/versitygw-tool.sh

# NOTICE lists every module linked into bin/svc with its license.
notice:
	$(GO) run scripts/notice.go > NOTICE

clean:
	rm -rf bin .bench
