#!/usr/bin/env bash
# runc-wrapper.sh: an OCI runtime for dockerd on hosts (sandboxes, some CI VMs) whose capability
# bounding set lacks CAP_SYS_RESOURCE. `docker run --privileged` asks runc for every capability, and
# runc fails with "unable to apply caps: operation not permitted". This wrapper removes
# CAP_SYS_RESOURCE from the bundle's config.json (runc create/run --bundle) and from the process spec
# (runc exec --process) and then runs the real runc with the same arguments.
# Installed by hack/kind/docker.sh only where a privileged probe container fails.
set -euo pipefail
RUNC=${REGIONSYNC_REAL_RUNC:-/usr/sbin/runc}
[ -x "$RUNC" ] || RUNC=/usr/bin/runc

strip() { # strip FILE JQ-PATH-PREFIX
	local f=$1 p=$2 tmp
	[ -f "$f" ] || return 0
	tmp=$(mktemp "$f.XXXXXX")
	jq "if $p.capabilities then $p.capabilities |= with_entries(.value |= (if type == \"array\" then map(select(. != \"CAP_SYS_RESOURCE\")) else . end)) else . end" "$f" >"$tmp"
	chmod --reference="$f" "$tmp"
	mv "$tmp" "$f"
}

cmd="" bundle="" process=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	a=${args[$i]}
	if [ -z "$cmd" ]; then
		case $a in
		--root | --log | --log-format | --criu) i=$((i + 1)) ;; # global flags with a value
		-*) ;;
		*) cmd=$a ;;
		esac
		continue
	fi
	case $a in
	--bundle | -b) bundle=${args[$((i + 1))]} ;;
	--bundle=*) bundle=${a#--bundle=} ;;
	--process | -p) process=${args[$((i + 1))]} ;;
	--process=*) process=${a#--process=} ;;
	esac
done
case $cmd in
create | run) strip "${bundle:-.}/config.json" .process ;;
exec) [ -n "$process" ] && strip "$process" "" ;;
esac
exec "$RUNC" "$@"
