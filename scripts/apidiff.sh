#!/usr/bin/env bash
# apidiff.sh checks that the public packages (pkg/...) keep the API of the previous release: it
# compares them against the newest v* tag reachable from HEAD with golang.org/x/exp's apidiff (pinned
# by hack/tools/apidiff, built by scripts/go-tool.sh) and fails on any incompatible change.
#
# No tag yet (or a clone without tags): says so and passes. An incompatible change that is meant
# (a v0 minor release may break the API; see docs and the compatibility table) is accepted by adding
# apidiff's line for it to hack/apidiff-accepted.txt; empty that file after the next tag.
#
#   scripts/apidiff.sh              # compare against the newest reachable v* tag
#   APIDIFF_BASE=v0.1.0 scripts/apidiff.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
public=pkg
accepted=hack/apidiff-accepted.txt

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "apidiff: not a git checkout; no previous release to compare the public API against: skipped"
	exit 0
fi
base=${APIDIFF_BASE:-$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null || true)}
if [ -z "$base" ]; then
	echo "apidiff: no v* release tag yet; nothing to compare the public API ($public/...) against: passed"
	exit 0
fi

apidiff=$(scripts/go-tool.sh --path apidiff)
modpath=$(go list -m)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The base's public packages, from a plain export of the tag (no worktree, nothing left in .git).
mkdir "$tmp/base"
git archive "$base" | tar -x -C "$tmp/base"
if [ ! -d "$tmp/base/$public" ]; then
	echo "apidiff: $base has no $public/ directory; nothing to compare against: passed"
	exit 0
fi
(cd "$tmp/base" && GOFLAGS=-mod=mod "$apidiff" -m -w "$tmp/base.x" "$modpath/$public") 2>"$tmp/base.err" ||
	{ cat "$tmp/base.err" >&2; echo "apidiff: could not load $public/... at $base" >&2; exit 1; }

"$apidiff" -m "$tmp/base.x" "$modpath/$public" >"$tmp/all" 2>"$tmp/err" ||
	{ cat "$tmp/err" >&2; echo "apidiff: could not load $public/... at HEAD" >&2; exit 1; }
"$apidiff" -m -incompatible "$tmp/base.x" "$modpath/$public" >"$tmp/incompatible" 2>/dev/null
# apidiff prints section headers ("Incompatible changes:") as well as changes; a change is a "- " line.
grep '^- ' "$tmp/incompatible" >"$tmp/changes" || true
if [ -f "$accepted" ]; then
	grep -vxF -f <(grep -v '^#' "$accepted" | grep -v '^$' || true) "$tmp/changes" >"$tmp/left" || true
else
	cp "$tmp/changes" "$tmp/left"
fi

if [ -s "$tmp/left" ]; then
	echo "apidiff: incompatible changes to the public API ($public/...) since $base:"
	cat "$tmp/incompatible"
	echo
	echo "apidiff: FAILED. Keep the old API (deprecate, add instead of change), or, if the break is meant"
	echo "  for the next v0 minor release, add the lines above that start with '- ' to $accepted."
	exit 1
fi
n=$(sed -n '/^Compatible changes:/,$p' "$tmp/all" | grep -c '^- ' || true)
echo "apidiff: public API ($public/...) compatible with $base ($n compatible change(s), $(wc -l <"$tmp/changes") accepted)"
