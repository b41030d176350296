#!/usr/bin/env bash
# Builds a pinned versitygw (an S3-compatible server) once per machine, for
# the tests that run the backup storage contract suite against a real S3
# server (backupstores/s3, through internal/s3test: a posix backend on a
# temporary directory), and prints the binary's path.
#
# versitygw is a test-time tool only (Apache-2.0; see NOTICE). It is built
# from the Go module proxy in a tools module of its own, outside this
# repository, and never enters the product's go.mod or the repository
# (scripts/go-tool.sh). About 3 minutes on two cores the first time;
# afterwards the cached binary is reused.
#
# With --path-if-built it only prints the path of a binary already built and
# exits 1 (printing nothing) otherwise; it never builds. `make test` uses it
# to find the binary without ever starting the build.
set -euo pipefail

version="${SVC_VERSITYGW_VERSION:-v1.8.0}"
exec bash "$(dirname "$0")/go-tool.sh" versitygw github.com/versity/versitygw/cmd/versitygw "$version" --version "$@"
