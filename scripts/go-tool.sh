#!/usr/bin/env bash
# Builds a test-time tool written in Go once per machine from the Go module
# proxy, in a tools module of its own outside this repository (never in the
# product's go.mod), and prints the binary's path. scripts/vault-tool.sh and
# scripts/versitygw-tool.sh call it with their tool's pins:
#
#   go-tool.sh NAME PACKAGE VERSION CHECK-ARG [--path-if-built]
#
# The binary goes to ${SVC_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-tools}/NAME-VERSION/NAME;
# a binary already there that answers `NAME CHECK-ARG` is reused.
#
# With GO_TOOL_MAIN set (e.g. ./cmd/tofu) PACKAGE is a module whose go.mod
# has replace directives, which `go get -tool` and `go install` refuse: the
# module is downloaded with `go mod download`, copied out of the read-only
# module cache into a temporary directory, and GO_TOOL_MAIN is built there
# with the module's own go.mod and go.sum, and GO_TOOL_LDFLAGS as -ldflags
# (scripts/tofu-tool.sh). GO_TOOL_DROP_REPLACES (module paths, space
# separated) drops the replace directives of those modules first: ones
# that point into the repository's own subdirectories, which are separate
# modules and so absent from the root module's zip; the module's require
# lines then take their published versions (scripts/consul-tool.sh). With
# --path-if-built it only prints the path of a binary already built and
# exits 1 (printing nothing) otherwise; it never builds. `make test` uses it
# to find the binary without ever starting the build.
set -euo pipefail

name="$1" package="$2" version="$3" check="$4"
cache="${SVC_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-tools}/$name-$version"
bin="$cache/$name"

if [ "${5:-}" = "--path-if-built" ]; then
	[ -x "$bin" ] || exit 1
	echo "$bin"
	exit 0
fi

if [ -x "$bin" ] && "$bin" "$check" >/dev/null 2>&1; then
	echo "$bin"
	exit 0
fi

mkdir -p "$cache/module"
cd "$cache/module"
# Builds from here must not pick up the product's go.work or toolchain pins.
export GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
if [ -n "${GO_TOOL_MAIN:-}" ]; then
	dir=$(go mod download -json "$package@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ -z "$dir" ] || [ ! -d "$dir/$GO_TOOL_MAIN" ]; then
		echo "go-tool: go mod download $package@$version gave no module directory with $GO_TOOL_MAIN" >&2
		exit 1
	fi
	src=$(mktemp -d "$cache/src.XXXXXX")
	trap 'chmod -R u+w "$src" 2>/dev/null; rm -rf "$src"' EXIT
	cp -R "$dir/." "$src"
	chmod -R u+w "$src"
	for m in ${GO_TOOL_DROP_REPLACES:-}; do
		(cd "$src" && go mod edit -dropreplace="$m")
	done
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "${GO_TOOL_LDFLAGS:-}" -o "$bin.tmp" "$GO_TOOL_MAIN") >&2
else
	if [ ! -f go.mod ]; then
		go mod init "svc.local/tools/$name" >/dev/null 2>&1
	fi
	go get -tool "$package@$version" >&2
	go build -o "$bin.tmp" "$package" >&2
fi
mv "$bin.tmp" "$bin"
echo "$bin"
