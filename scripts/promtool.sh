#!/usr/bin/env bash
# promtool.sh runs promtool with the given arguments, installing Debian's prometheus package
# (which ships promtool) first when it is missing and this is a Debian machine we may administer.
set -euo pipefail
if ! command -v promtool >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
		echo "promtool: installing Debian's prometheus package ..." >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >&2
	else
		echo "promtool not found: install Prometheus' promtool (Debian: apt-get install prometheus)" >&2
		exit 1
	fi
fi
exec promtool "$@"
