#!/usr/bin/env bash
# agent-image.sh builds the agent image with no registry at all: the agent, the hub and the demo
# tenant operator are built on the host (CGO_ENABLED=0, static) and copied into a FROM scratch image that
# runs as 65532:65532 (non-root; the overlays' readOnlyRootFilesystem needs nothing writable but
# the /tmp emptyDir they mount). `make docker-build` (the Dockerfile at the root, golang +
# distroless) is the path where those base images can be pulled.
#
#   hack/kind/agent-image.sh IMAGE [VERSION]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
img=${1:?usage: agent-image.sh IMAGE [VERSION]}
version=${2:-$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)}

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
start=$SECONDS
(
	cd "$ROOT"
	CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X main.Version=${version}" \
		-o "$ctx/" ./cmd/agent ./cmd/hub ./test/cmd/tenant-operator
)
mkdir -p "$ctx/rootfs/etc" "$ctx/rootfs/tmp"
chmod 1777 "$ctx/rootfs/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/rootfs/etc/group"
cp "$here/Dockerfile.agent" "$ctx/Dockerfile"
"$here/docker.sh"
DOCKER_BUILDKIT=0 docker build -q -t "$img" "$ctx" >/dev/null
log "agent image $img built in $((SECONDS - start))s ($(docker image inspect -f '{{.Size}}' "$img" | numfmt --to=iec))"
