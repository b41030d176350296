#!/usr/bin/env bash
# Builds a pinned OpenTofu once per machine, for TestTofuFmt (`tofu fmt
# -check` over terraform/, make terraform-check) and make terraform-e2e,
# and prints the binary's path, as scripts/vault-tool.sh does for Vault.
#
# OpenTofu (MPL-2.0) is a test-time tool only: built from the Go module
# proxy outside this repository, it never enters the product's go.mod or
# the repository (scripts/go-tool.sh). `go install` refuses it (its go.mod
# has replace directives), so go-tool.sh downloads the module and builds
# ./cmd/tofu inside a copy of it (GO_TOOL_MAIN). The first build took 42
# minutes on two cores shared with other builds and tests (-p=1, nice 10);
# afterwards the cached binary is reused.
#
# With --path-if-built it only prints the path of a binary already built and
# exits 1 (printing nothing) otherwise; it never builds.
set -euo pipefail

version="${SVC_TOFU_VERSION:-v1.12.6}"
# version.dev=no, as OpenTofu's release builds set it (.goreleaser.yaml):
# without it the binary calls itself v1.12.6-dev.
GO_TOOL_MAIN=./cmd/tofu GO_TOOL_LDFLAGS="-X github.com/opentofu/opentofu/version.dev=no" exec bash "$(dirname "$0")/go-tool.sh" tofu github.com/opentofu/opentofu "$version" version "$@"
