#!/usr/bin/env bash
# region-kubeconfig.sh REGION [--context CTX] [--duration D] [--kubeconfig FILE] [--server URL]
#
# Writes to stdout the kubeconfig region REGION's agents use on management: management's server
# and CA (from the caller's kubeconfig, context CTX or the current one) and a token of the
# region's identity, the ServiceAccount regionsync-system/region-REGION (TokenRequest API, as
# `kubectl create token region-REGION -n regionsync-system --duration D`). Nothing else of the
# caller's kubeconfig is copied: no other user, certificate, key or token. D defaults to 720h
# (the API server may cap it; the expiry is printed on stderr). --server overrides the address
# when the region reaches management under another name.
#
# The logic is the Go command cmd/region-kubeconfig (Go is all a machine needs, no kubectl); it
# is built once into the cache outside the checkout and rebuilt when its sources change.
#
#   scripts/region-kubeconfig.sh us-east-1 --context management > kubeconfig
#   kubectl --context us-east-1 -n regionsync-system create secret generic \
#     regionsync-management-kubeconfig --from-file=kubeconfig=kubeconfig
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${REGIONSYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regionsync}
mkdir -p "$cache/bin"
bin="$cache/bin/region-kubeconfig"
tmp=$(mktemp "$bin.XXXXXX")
trap 'rm -f "$tmp"' EXIT
# go build is incremental: with nothing changed it only links from the build cache.
(cd "$root" && go build -o "$tmp" ./cmd/region-kubeconfig)
mv -f "$tmp" "$bin"
trap - EXIT
exec "$bin" "$@"
