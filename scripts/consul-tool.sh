#!/usr/bin/env bash
# Builds Consul once per machine from the Go module proxy and prints the
# binary's path: the agent edge/consul's contract suite (TestContractAgent)
# and `make terraform-e2e CONSUL=...` run against. It is a test-time tool:
# built outside this repository, never in the product's go.mod, never
# shipped (scripts/go-tool.sh).
#
# The proxy serves Consul's root module up to v1.20.x (later zips are
# refused), whose go.mod replaces its api, sdk, envoyextensions,
# proto-public and troubleshoot modules with subdirectories the module's
# zip does not hold: go-tool.sh drops those replace directives
# (GO_TOOL_DROP_REPLACES) so that their published versions, which the
# go.mod requires, are used, and builds the module's main package. The
# first build took 25 minutes on two cores beside a `make test` (-p 1);
# afterwards the cached binary is reused.
#
# With --path-if-built it only prints the path of a binary already built and
# exits 1 (printing nothing) otherwise; it never builds.
set -euo pipefail

version="${SVC_CONSUL_VERSION:-v1.20.6}"
drop=""
for m in api envoyextensions proto-public sdk troubleshoot; do
	drop="$drop github.com/hashicorp/consul/$m"
done
GO_TOOL_MAIN=. GO_TOOL_DROP_REPLACES="$drop" exec bash "$(dirname "$0")/go-tool.sh" consul github.com/hashicorp/consul "$version" version "$@"
