#!/usr/bin/env bash
# go-tool.sh runs a Go development tool pinned by a tools module under hack/tools/, building it first
# when it is missing.
#
# Each tool's version is pinned by its tools module (go.mod there; the project's go.mod does not carry
# the tools' dependencies). The binary is built from the Go module proxy and cached OUTSIDE the
# checkout, keyed by that version and the Go minor version it was built with (a linter built by an
# older Go cannot load code written for a newer one), so a fresh clone reuses what an earlier run built.
#
#   scripts/go-tool.sh golangci-lint run ./...   # build if missing, then run it with these arguments
#   scripts/go-tool.sh --path apidiff            # build if missing, print the binary's path
#   scripts/go-tool.sh --check golangci-lint     # exit 0 if cached, 1 if a build would be needed
#
# Environment: REGIONSYNC_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/regionsync).
set -euo pipefail

mode=run
case "${1:-}" in
--path | --check) mode=${1#--}; shift ;;
esac
name=${1:?usage: go-tool.sh [--path|--check] golangci-lint|apidiff|setup-envtest [ARGS...]}
shift

# name -> tools module, the module whose version keys the cache, the package to build, extra ldflags.
case "$name" in
golangci-lint)
	mod=hack/tools/lint vmod=github.com/golangci/golangci-lint/v2
	pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	;;
apidiff)
	mod=hack/tools/apidiff vmod=golang.org/x/exp pkg=golang.org/x/exp/cmd/apidiff
	;;
setup-envtest)
	mod=hack/tools/envtest vmod=sigs.k8s.io/controller-runtime/tools/setup-envtest
	pkg=sigs.k8s.io/controller-runtime/tools/setup-envtest
	;;
*)
	echo "go-tool.sh: unknown tool $name (known: golangci-lint, apidiff, setup-envtest)" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=$(awk -v m="$vmod" '($1 == "require" && $2 == m) || $1 == m { print ($1 == m ? $2 : $3); exit }' "$root/$mod/go.mod")
[ -n "$version" ] || { echo "go-tool.sh: no version of $vmod pinned in $mod/go.mod" >&2; exit 1; }
ldflags="-s -w"
[ "$name" = golangci-lint ] && ldflags+=" -X main.version=${version#v}"
gominor=$(go env GOVERSION | grep -oE '^go[0-9]+\.[0-9]+')
cache=${REGIONSYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regionsync}
dir="$cache/tools/${name}-${version}_${gominor}_$(go env GOOS)-$(go env GOARCH)"
bin="$dir/$name"

if [ "$mode" = check ]; then
	[ -x "$bin" ]
	exit $?
fi

log() { printf '[%s %s] %s\n' "$name" "$(date +%H:%M:%S)" "$*" >&2; }

if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	# One build at a time per cache directory (parallel make targets, two checkouts).
	exec 9>"$dir/.lock"
	flock 9
	if [ ! -x "$bin" ]; then
		log "first run on this machine: building $name $version from the Go module proxy into $dir"
		[ "$name" = golangci-lint ] && log "(2.5 min on 2 cores with a warm Go build cache, longer from cold; later runs reuse it)"
		# shellcheck source=build-tool.sh
		. "$root/scripts/build-tool.sh"
		build_tool "$mod" "$pkg" "$bin" "$ldflags"
	fi
	exec 9>&-
fi

if [ "$mode" = path ]; then
	echo "$bin"
	exit 0
fi
exec "$bin" "$@"
