#!/usr/bin/env bash
# new-region.sh NAME [--suffix SUFFIX] [--namespace-prefix PREFIX] — write the overlays of a new
# region from the template (deploy/regions/.template): deploy/regions/NAME/agent (apply to the
# region's cluster) and deploy/regions/NAME/management (apply to management). SUFFIX defaults to
# "-NAME", PREFIX to "tenant-". The region's shard selects the label regionsync.dev/region=NAME,
# which management's admission policy also checks (docs/security.md).
# It refuses a NAME that is not a DNS label or that already exists, so re-running it never
# changes an existing region, and a SUFFIX that another region's names can also end with (the
# same suffix, or one that ends the other): the region's identity may read and write the uploaded
# Secrets named tenant-token<SUFFIX> in every namespace and the objects named *<SUFFIX>, so a
# colliding suffix would hand it another region's tenant tokens. Nothing is written then.
set -euo pipefail
usage() { echo "usage: $0 NAME [--suffix SUFFIX] [--namespace-prefix PREFIX]" >&2; exit 2; }
[ $# -ge 1 ] || usage
name=$1; shift
suffix="-$name"
prefix="tenant-"
while [ $# -gt 0 ]; do
	case $1 in
	--suffix) [ $# -ge 2 ] || usage; suffix=$2; shift 2 ;;
	--suffix=*) suffix=${1#--suffix=}; shift ;;
	--namespace-prefix) [ $# -ge 2 ] || usage; prefix=$2; shift 2 ;;
	--namespace-prefix=*) prefix=${1#--namespace-prefix=}; shift ;;
	*) usage ;;
	esac
done
if ! [[ $name =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || [ ${#name} -gt 53 ]; then
	echo "new-region: region name '$name' must be a DNS label (lower case letters, digits, '-'; at most 53 characters so that region-NAME fits)" >&2
	exit 1
fi
if ! [[ $suffix =~ ^[-a-z0-9.]*[a-z0-9]$ ]]; then
	echo "new-region: suffix '$suffix' must consist of lower case letters, digits, '-' or '.' and end with a letter or digit" >&2
	exit 1
fi
if ! [[ $prefix =~ ^([a-z0-9][-a-z0-9]*)?$ ]] || [ ${#prefix} -gt 62 ]; then
	echo "new-region: namespace prefix '$prefix' must consist of lower case letters, digits or '-', start with a letter or digit, and be shorter than 63 characters" >&2
	exit 1
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="$root/deploy/regions/$name"
if [ -e "$dest" ]; then
	echo "new-region: region '$name' already exists at deploy/regions/$name; nothing changed" >&2
	exit 1
fi
# Suffixes collide when one ends with the other ("-west-1" and "-eu-west-1"): every name the
# shorter one's region holds may belong to the longer one's.
for cfg in "$root"/deploy/regions/*/agent/config.yaml; do
	[ -f "$cfg" ] || continue
	other=$(basename "$(dirname "$(dirname "$cfg")")")
	theirs=$(sed -n 's/^[[:space:]]*remoteResourceSuffix:[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}[[:space:]]*$/\1/p' "$cfg" | head -n1)
	if [ -z "$theirs" ]; then
		echo "new-region: region '$other' ($cfg) has no remoteResourceSuffix: every name may be its; refusing to add '$name' beside it" >&2
		exit 1
	fi
	if [[ $suffix == *"$theirs" || $theirs == *"$suffix" ]]; then
		echo "new-region: suffix '$suffix' collides with region '$other' (suffix '$theirs'): one ends with the other, so names ending in the longer one are in both shards (each region could claim the other's objects; with the same suffix, '$name' could also read '$other''s uploaded Secrets tenant-token$theirs); choose a suffix that neither ends nor is ended by another region's; nothing written" >&2
		exit 1
	fi
done
tmp=$(mktemp -d "$root/deploy/regions/.new-$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp -R "$root/deploy/regions/.template/." "$tmp/"
find "$tmp" -type f -print0 | while IFS= read -r -d '' f; do
	sed -i -e "s|__REGION__|$name|g" -e "s|__SUFFIX__|$suffix|g" -e "s|__PREFIX__|$prefix|g" "$f"
done
mv "$tmp" "$dest"
trap - EXIT
echo "new-region: wrote deploy/regions/$name/{agent,management} (suffix $suffix, namespace prefix '$prefix', label regionsync.dev/region=$name)"
echo "  management: kubectl apply -k deploy/regions/$name/management"
echo "  region:     scripts/region-kubeconfig.sh $name --context MANAGEMENT > kubeconfig, store it as Secret"
echo "              regionsync-system/regionsync-management-kubeconfig, then kubectl apply -k deploy/regions/$name/agent"
