#!/usr/bin/env bash
# node-image.sh builds a kind node image for the project's Kubernetes version WITHOUT any container
# registry: Debian packages (debootstrap, apt) and the Go module proxy only. It is the offline /
# air-gapped path; where registry.k8s.io and docker.io are reachable, `kind create cluster` with the
# stock kindest/node image needs none of this. See hack/kind/README.md.
#
#   hack/kind/node-image.sh          # build if missing (cached by version), print the image name
#   hack/kind/node-image.sh --check  # exit 0 if the image is in the local Docker
#
# What goes in, mirroring sigs.k8s.io/kind@v0.33.0's images/base and pkg/build/nodeimage:
#   - a Debian bookworm rootfs (debootstrap) with systemd, containerd, runc, CNI plugins, iptables;
#   - kind's base files (entrypoint, systemd units, containerd config) from the kind module;
#   - kubelet, kubeadm, kubectl (hack/kind/build-kube.sh) in /usr/bin;
#   - the images kubeadm runs, built locally FROM scratch and imported into the node's containerd:
#     kube-apiserver, kube-controller-manager, kube-scheduler, etcd, pause, and kube-proxy (on the
#     Debian rootfs, for iptables). CoreDNS is not built (the e2e needs no cluster DNS; see README).
#   - a bridge CNI config (the clusters are single-node; kind's kindnetd image is not built).
# Cache: $REGIONSYNC_CACHE/kind/<kube-version>/ (rootfs tarball, binaries, image tarballs). The
# result is tagged regionsync.local/kind-node:<kube-version> in the local Docker.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

if [ "${1:-}" = "--check" ]; then
	docker image inspect "$NODE_IMAGE" >/dev/null 2>&1
	exit $?
fi

"$here/docker.sh"
if docker image inspect "$NODE_IMAGE" >/dev/null 2>&1 && [ -z "${KIND_NODE_REBUILD:-}" ]; then
	log "node image $NODE_IMAGE is in the local Docker (KIND_NODE_REBUILD=1 rebuilds)"
	echo "$NODE_IMAGE"
	exit 0
fi
exec 7>"$KIND_CACHE/.node.lock"
flock 7
total_start=$SECONDS

KIND_MOD=$(cd "$ROOT" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind 2>/dev/null || true)
if [ -z "$KIND_MOD" ] || [ ! -d "$KIND_MOD/images/base/files" ]; then
	(cd "$ROOT" && go mod download sigs.k8s.io/kind)
	KIND_MOD=$(cd "$ROOT" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
fi
BASE_FILES="$KIND_MOD/images/base/files"

# --- 1. the Debian rootfs ------------------------------------------------------------------------
PACKAGES=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
rootfs_key=$(echo "bookworm $PACKAGES $MIRROR" | sha256sum | cut -c1-12)
rootfs_tar="$KIND_CACHE/rootfs-bookworm-$rootfs_key.tar"
if [ ! -s "$rootfs_tar" ]; then
	command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
	log "debootstrap bookworm (minbase + $PACKAGES) ..."
	start=$SECONDS
	dir=$(mktemp -d "$KIND_CACHE/rootfs.XXXXXX")
	debootstrap --variant=minbase --include="$PACKAGES" bookworm "$dir" "$MIRROR" >"$KIND_CACHE/debootstrap.log" 2>&1 ||
		{ tail -30 "$KIND_CACHE/debootstrap.log" >&2; exit 1; }
	rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
	tar --numeric-owner -C "$dir" -cf "$rootfs_tar.tmp" .
	mv "$rootfs_tar.tmp" "$rootfs_tar"
	rm -rf "$dir"
	log "rootfs done in $((SECONDS - start))s ($(du -h "$rootfs_tar" | cut -f1))"
fi
ROOTFS_IMAGE=regionsync.local/kind-rootfs:bookworm-$rootfs_key
if ! docker image inspect "$ROOTFS_IMAGE" >/dev/null 2>&1; then
	docker import "$rootfs_tar" "$ROOTFS_IMAGE" >/dev/null
fi

# --- 2. Kubernetes binaries ----------------------------------------------------------------------
bin=$("$here/build-kube.sh")

# --- 3. the component images kubeadm runs, built locally -----------------------------------------
images_tar="$KIND_CACHE/images.tar"
list=$("$bin/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" 2>/dev/null)
img() { echo "$list" | grep "/$1:" | head -1; }
PAUSE_IMAGE=$(img pause)
if [ ! -s "$images_tar" ]; then
	log "building the component images (FROM scratch; kube-proxy on the Debian rootfs)"
	ctx=$(mktemp -d)
	trap 'rm -rf "$ctx"' EXIT
	# pause: kubernetes' own pause.c, static.
	gcc -Os -static -o "$ctx/pause" "$(cd "$ROOT/hack/tools/kube" && go list -m -f '{{.Dir}}' k8s.io/kubernetes 2>/dev/null || echo "$(go env GOMODCACHE)/k8s.io/kubernetes@$KUBE_VERSION")/build/pause/linux/pause.c"
	strip "$ctx/pause"
	build_scratch() { # build_scratch IMAGE BINARY PATH-IN-IMAGE
		local d="$ctx/$(basename "$2")-img"
		mkdir -p "$d"
		cp "$2" "$d/bin"
		printf 'FROM scratch\nCOPY bin %s\nENV PATH=/usr/local/bin:/usr/bin:/bin\nENTRYPOINT ["%s"]\n' "$3" "$3" >"$d/Dockerfile"
		DOCKER_BUILDKIT=0 docker build -q -t "$1" "$d" >/dev/null
	}
	build_scratch "$(img kube-apiserver)" "$bin/kube-apiserver" /usr/local/bin/kube-apiserver
	build_scratch "$(img kube-controller-manager)" "$bin/kube-controller-manager" /usr/local/bin/kube-controller-manager
	build_scratch "$(img kube-scheduler)" "$bin/kube-scheduler" /usr/local/bin/kube-scheduler
	build_scratch "$(img etcd)" "$bin/etcd" /usr/local/bin/etcd
	build_scratch "$PAUSE_IMAGE" "$ctx/pause" /pause
	docker tag "$PAUSE_IMAGE" registry.k8s.io/pause:3.10 # kind's containerd config.toml sandbox_image
	mkdir -p "$ctx/proxy"
	cp "$bin/kube-proxy" "$ctx/proxy/kube-proxy"
	printf 'FROM %s\nCOPY kube-proxy /usr/local/bin/kube-proxy\n' "$ROOTFS_IMAGE" >"$ctx/proxy/Dockerfile"
	DOCKER_BUILDKIT=0 docker build -q -t "$(img kube-proxy)" "$ctx/proxy" >/dev/null
	names=("$(img kube-apiserver)" "$(img kube-controller-manager)" "$(img kube-scheduler)" "$(img etcd)" "$(img kube-proxy)" "$PAUSE_IMAGE" registry.k8s.io/pause:3.10)
	docker save -o "$images_tar.tmp" "${names[@]}"
	mv "$images_tar.tmp" "$images_tar"
	printf '%s\n' "${names[@]}" >"$KIND_CACHE/images.txt"
	rm -rf "$ctx"
	trap - EXIT
fi

# --- 4. the node image ---------------------------------------------------------------------------
log "assembling $NODE_IMAGE"
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/files"
cp -r "$BASE_FILES/." "$ctx/files/"
for b in kubelet kubeadm kubectl; do cp "$bin/$b" "$ctx/$b"; done
echo -n "$KUBE_VERSION" >"$ctx/version"
cp "$here/node/10-regionsync-bridge.conflist" "$ctx/"
cp "$here/node/setup.sh" "$ctx/"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $ROOTFS_IMAGE
COPY files/ /tmp/kind-files/
COPY kubelet kubeadm kubectl /usr/bin/
COPY version /kind/version
COPY 10-regionsync-bridge.conflist /etc/cni/net.d/
COPY setup.sh /tmp/setup.sh
RUN bash /tmp/setup.sh && rm -rf /tmp/setup.sh /tmp/kind-files
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
STOPSIGNAL SIGRTMIN+3
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q -t "$NODE_IMAGE.pre" "$ctx" >/dev/null

# Import the component images into the node's containerd (kind's own way: containerd in a build
# container, `ctr images import --no-unpack`, then docker commit).
cid=$(docker run -d --entrypoint=sleep --security-opt seccomp=unconfined "$NODE_IMAGE.pre" infinity)
trap 'rm -rf "$ctx"; docker rm -f -v "$cid" >/dev/null 2>&1 || true' EXIT
docker exec "$cid" bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &'
docker exec "$cid" bash -c 'for i in $(seq 30); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 1; done; cat /tmp/containerd.log; exit 1'
docker exec -i "$cid" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - <"$images_tar" >/dev/null
docker exec "$cid" ctr --namespace=k8s.io images list -q >&2
# Stop containerd cleanly before the commit (its parent is `sleep`, which never reaps it: wait
# for the zombie state, not for the pid to vanish).
docker exec "$cid" bash -c 'pid=$(pgrep -x containerd); kill "$pid"; for i in $(seq 40); do s=$(awk "{print \$3}" /proc/$pid/stat 2>/dev/null || echo Z); [ "$s" = Z ] && exit 0; sleep 0.5; done; exit 1'
docker exec "$cid" rm -rf /tmp/containerd.log
docker commit \
	--change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
	--change "LABEL dev.regionsync.kind-node.kube-version=$KUBE_VERSION" \
	"$cid" "$NODE_IMAGE" >/dev/null
docker rm -f -v "$cid" >/dev/null
docker rmi "$NODE_IMAGE.pre" >/dev/null 2>&1 || true
log "node image $NODE_IMAGE built in $((SECONDS - total_start))s ($(docker image inspect -f '{{.Size}}' "$NODE_IMAGE" | numfmt --to=iec))"
echo "$NODE_IMAGE"
