#!/usr/bin/env bash
# control-plane.sh provides etcd, kube-apiserver and kube-controller-manager for the tests and the demo.
#
# The binaries are built from the Go module proxy through the tools modules under hack/tools/ (no
# setup-envtest download is needed) and cached OUTSIDE the checkout, keyed by version, so a fresh clone
# reuses what an earlier run built. Prints the directory that holds the three binaries on stdout;
# progress goes to stderr.
#
#   scripts/control-plane.sh            # build if missing, print the directory
#   scripts/control-plane.sh --check    # exit 0 if cached, 1 if a build would be needed
#
# Environment: REGIONSYNC_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/regionsync).
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

# build MODULE_DIR PACKAGE OUTPUT: a go build whose progress stays visible (a dot every 10 s).
build() {
	local mod=$1 pkg=$2 out=$3 start=$SECONDS
	log "building $(basename "$out") ($pkg) ..."
	(
		cd "$root/$mod"
		CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$out.tmp" "$pkg"
	) &
	local pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 10
		kill -0 "$pid" 2>/dev/null && printf '.' >&2
	done
	if ! wait "$pid"; then
		echo >&2
		log "FAILED to build $pkg"
		exit 1
	fi
	mv "$out.tmp" "$out"
	echo >&2
	log "built $(basename "$out") in $((SECONDS - start))s"
}

log "first run on this machine: building the control plane from the Go module proxy into $dir"
log "(etcd ~1 min, kube-apiserver ~5 min, kube-controller-manager ~2 min on 2 cores; later runs reuse it)"
[ -x "$dir/etcd" ] || build hack/tools/etcd go.etcd.io/etcd/server/v3 "$dir/etcd"
[ -x "$dir/kube-apiserver" ] || build hack/tools/kube k8s.io/kubernetes/cmd/kube-apiserver "$dir/kube-apiserver"
[ -x "$dir/kube-controller-manager" ] || build hack/tools/kube k8s.io/kubernetes/cmd/kube-controller-manager "$dir/kube-controller-manager"
echo "$dir"
