#!/usr/bin/env bash
# build-kube.sh builds the Kubernetes node binaries for the offline kind node image from the Go
# module proxy only, and caches them outside the checkout by version:
#   $REGIONSYNC_CACHE/kind/<kube-version>/bin/{kubelet,kubeadm,kubectl,kube-scheduler,kube-proxy,
#                                             kube-apiserver,kube-controller-manager,etcd}
# etcd comes from scripts/control-plane.sh's cache (same cache convention, same versions); the
# Kubernetes binaries share its Go build cache, so after `make test` only kubelet & co. compile.
# Prints the bin directory on stdout; progress on stderr.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

bin="$KIND_CACHE/bin"
mkdir -p "$bin"
exec 8>"$KIND_CACHE/.kube.lock"
flock 8

want=(kubelet kubeadm kubectl kube-scheduler kube-proxy kube-apiserver kube-controller-manager)
missing=()
for b in "${want[@]}"; do [ -x "$bin/$b" ] || missing+=("$b"); done

# etcd: the control-plane cache's (scripts/control-plane.sh builds it first if needed). The
# Kubernetes binaries are built here with their version stamped (kubeadm and kubelet check it).
if [ ! -x "$bin/etcd" ]; then
	cp_dir="$REGIONSYNC_CACHE/control-plane/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_$(go env GOOS)-$(go env GOARCH)"
	[ -x "$cp_dir/etcd" ] || cp_dir=$("$ROOT/scripts/control-plane.sh")
	cp "$cp_dir/etcd" "$bin/etcd"
fi

if [ ${#missing[@]} -gt 0 ]; then
	src="$KIND_CACHE/src"
	mkdir -p "$src"
	# A private copy of the tools module: -mod=mod may add go.sum lines for kubelet's
	# dependencies, and the checkout must stay untouched.
	cp "$ROOT/hack/tools/kube/go.mod" "$ROOT/hack/tools/kube/go.sum" "$src/"
	sed -i 's#^module .*#module regionsync.invalid/kind-node-bits#' "$src/go.mod"
	[ -f "$src/tools.go" ] || printf 'package tools\n' >"$src/tools.go"
	pkgs=()
	for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
	log "building ${missing[*]} ${KUBE_VERSION} from the Go module proxy (one go build; ~10 min cold on 2 cores)"
	start=$SECONDS
	(
		cd "$src"
		CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
			-ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2)" \
			-o "$bin/.tmp/" "${pkgs[@]}"
	)
	for b in "${missing[@]}"; do mv "$bin/.tmp/$b" "$bin/$b"; done
	rmdir "$bin/.tmp"
	log "built ${missing[*]} in $((SECONDS - start))s"
fi
echo "$bin"
