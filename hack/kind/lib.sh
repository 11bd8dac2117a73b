# lib.sh: shared settings of the hack/kind scripts (sourced, not run).
# The versions follow scripts/control-plane.sh (the Kubernetes the tests already run against).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KUBE_VERSION=$(sed -n 's/^KUBE_VERSION=//p' "$ROOT/scripts/control-plane.sh")
ETCD_VERSION=$(sed -n 's/^ETCD_VERSION=//p' "$ROOT/scripts/control-plane.sh")
REGIONSYNC_CACHE=${REGIONSYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regionsync}
KIND_CACHE="$REGIONSYNC_CACHE/kind/$KUBE_VERSION"
NODE_IMAGE=${KIND_NODE_IMAGE:-regionsync.local/kind-node:$KUBE_VERSION}
mkdir -p "$KIND_CACHE"
log() { printf '[kind %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
