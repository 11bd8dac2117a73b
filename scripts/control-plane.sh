#!/usr/bin/env bash
# control-plane.sh provides etcd, kube-apiserver and kube-controller-manager for the tests and the demo.
#
# It prints the directory that holds the three binaries on stdout (progress goes to stderr), a
# cache OUTSIDE the checkout keyed by version, so a fresh clone reuses what an earlier run found or
# built. A binary missing there is taken, in this order, from:
#   1. KUBEBUILDER_ASSETS, when it names a directory of envtest binaries (yours, or setup-envtest's);
#   2. an existing setup-envtest store (${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest) with
#      Kubernetes ${KUBE_VERSION%.*}.x;
#   3. setup-envtest's download (seconds, where the network allows it; skipped with
#      REGIONSYNC_ENVTEST_DOWNLOAD=0);
#   4. a build from the Go module proxy through the tools modules under hack/tools/ (about 8 minutes
#      on 2 cores for all three: the fallback where nothing can be downloaded).
# No download has kube-controller-manager: it is always built (about 2 minutes) unless
# KUBEBUILDER_ASSETS has one.
#
#   scripts/control-plane.sh            # find, download or build what is missing; print the directory
#   scripts/control-plane.sh --check    # exit 0 if complete, 1 if something would be needed
#
# Environment: REGIONSYNC_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/regionsync),
# KUBEBUILDER_ASSETS, REGIONSYNC_ENVTEST_DOWNLOAD (default 1).
set -euo pipefail

KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.7

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${REGIONSYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regionsync}
dir="$cache/control-plane/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_$(go env GOOS)-$(go env GOARCH)"

complete() {
	for b in etcd kube-apiserver kube-controller-manager; do
		[ -x "$dir/$b" ] || return 1
	done
}

if [ "${1:-}" = "--check" ]; then
	complete
	exit $?
fi

if complete; then
	echo "control plane: using cached binaries in $dir" >&2
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
# One build at a time per cache directory (parallel make targets, two checkouts).
exec 9>"$dir/.lock"
flock 9
if complete; then
	echo "$dir"
	exit 0
fi

log() { printf '[control-plane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# shellcheck source=build-tool.sh
. "$root/scripts/build-tool.sh"

# build MODULE_DIR PACKAGE OUTPUT: one control-plane binary from the Go module proxy.
build() {
	log "building $(basename "$3") ($2) ..."
	build_tool "$1" "$2" "$3"
}

# The Kubernetes minor version the tests are written against (1.36); etcd 3.x serves it.
minor=${KUBE_VERSION#v}
minor=${minor%.*}

# link NAME SOURCE_DIR: use SOURCE_DIR/NAME when it is there, runs and is of the expected version
# (Kubernetes $minor.x, etcd 3.x); a binary of another version is named and left alone. A binary
# built from source without version stamps (it says v0.0.0-master, as this script's builds do) is
# taken as it is.
link() {
	local name=$1 src=$2 version want
	[ -x "$dir/$name" ] && return 0
	[ -n "$src" ] && [ -x "$src/$name" ] && [ "$(cd "$src" && pwd -P)" != "$(cd "$dir" && pwd -P)" ] || return 1
	version=$("$src/$name" --version 2>/dev/null | head -n1) || return 1
	case $name in
	etcd) want="etcd Version: 3." ;;
	*) want="Kubernetes v$minor." ;;
	esac
	if [[ $version != "$want"* && $version != "Kubernetes v0.0.0-master"* ]]; then
		log "not using $src/$name: it says '$version', want ${want}x"
		return 1
	fi
	ln -sf "$(cd "$src" && pwd -P)/$name" "$dir/$name"
	log "using $name from $src ($version)"
}
missing() {
	local out=()
	for b in "$@"; do [ -x "$dir/$b" ] || out+=("$b"); done
	echo "${out[*]:-}"
}

log "first run on this machine: looking for the control plane for $dir"
# 1. KUBEBUILDER_ASSETS.
for b in etcd kube-apiserver kube-controller-manager; do link "$b" "${KUBEBUILDER_ASSETS:-}" || true; done
# 2. An existing setup-envtest store, newest patch of this minor first.
store=${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest/k8s
if [ -n "$(missing etcd kube-apiserver)" ] && [ -d "$store" ]; then
	for d in $(ls -d "$store/$minor".*-"$(go env GOOS)-$(go env GOARCH)" 2>/dev/null | sort -rV); do
		link etcd "$d" || true
		link kube-apiserver "$d" || true
	done
fi
# 3. setup-envtest's download.
if [ -n "$(missing etcd kube-apiserver)" ] && [ "${REGIONSYNC_ENVTEST_DOWNLOAD:-1}" != 0 ]; then
	log "trying setup-envtest's download of Kubernetes $minor.x ..."
	if assets=$(timeout 300 "$root/scripts/go-tool.sh" setup-envtest use -p path "$minor.x" 2>/dev/null) && [ -d "$assets" ]; then
		link etcd "$assets" || true
		link kube-apiserver "$assets" || true
	else
		log "no download (no network, or no release for $minor.x): building from the Go module proxy instead"
	fi
fi
# 4. Build what is still missing.
if [ -n "$(missing etcd kube-apiserver kube-controller-manager)" ]; then
	log "building $(missing etcd kube-apiserver kube-controller-manager) from the Go module proxy"
	log "(etcd ~1 min, kube-apiserver ~5 min, kube-controller-manager ~2 min on 2 cores; later runs reuse them)"
fi
[ -x "$dir/etcd" ] || build hack/tools/etcd go.etcd.io/etcd/server/v3 "$dir/etcd"
[ -x "$dir/kube-apiserver" ] || build hack/tools/kube k8s.io/kubernetes/cmd/kube-apiserver "$dir/kube-apiserver"
[ -x "$dir/kube-controller-manager" ] || build hack/tools/kube k8s.io/kubernetes/cmd/kube-controller-manager "$dir/kube-controller-manager"
echo "$dir"
