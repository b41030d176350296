#!/usr/bin/env bash
# Builds a pinned Vault server once per machine, for the tests that run the
# secrets contract suite against a real `vault server -dev`, and prints the
# binary's path.
#
# Vault is a test-time tool only (BUSL-1.1; see NOTICE). It is built from the
# Go module proxy in a tools module of its own, outside this repository, and
# never enters the product's go.mod or the repository (scripts/go-tool.sh).
# About 6.5 minutes on two cores the first time; afterwards the cached binary
# is reused.
#
# With --path-if-built it only prints the path of a binary already built and
# exits 1 (printing nothing) otherwise; it never builds. `make test` uses it
# to find the binary without ever starting the build.
set -euo pipefail

# v1.21.0 selects vault/sdk v0.20.0 and vault/api v1.22.0, which compile
# together; v1.14.10 and v1.21.4 do not (their published sdk does not match
# the release's own copy).
version="${SVC_VAULT_VERSION:-v1.21.0}"
exec bash "$(dirname "$0")/go-tool.sh" vault github.com/hashicorp/vault "$version" version "$@"
