#!/usr/bin/env bash
# docker.sh makes sure a Docker engine runs on this machine, installing it from Debian's packages
# if needed (docker.io), and that privileged containers (the kind nodes) work. Idempotent.
#
# Where `docker run --privileged` fails because the host's capability bounding set lacks
# CAP_SYS_RESOURCE (seen in sandboxed VMs), it registers hack/kind/runc-wrapper.sh as dockerd's
# default runtime (/etc/docker/daemon.json) and restarts dockerd. Where privileged containers work,
# it changes nothing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

apt_install() {
	local missing=()
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing ${missing[*]} (apt-get)"
	if [ "$(id -u)" -ne 0 ]; then
		echo "need root to install: ${missing[*]}" >&2
		exit 1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }
}

DOCKER_LOG=${DOCKER_LOG:-/var/log/regionsync-dockerd.log}

start_dockerd() {
	docker info >/dev/null 2>&1 && return 0
	if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
		systemctl start docker
	else
		log "starting dockerd (log: $DOCKER_LOG)"
		# dockerd outlives this script: it must not inherit its descriptors (a caller's
		# `flock` lock file would stay locked for as long as dockerd runs).
		(
			for fd in /proc/self/fd/*; do
				n=${fd##*/}
				[ "$n" -gt 2 ] 2>/dev/null && eval "exec $n>&-" 2>/dev/null
			done
			exec setsid dockerd >>"$DOCKER_LOG" 2>&1 </dev/null
		) &
	fi
	for _ in $(seq 60); do
		docker info >/dev/null 2>&1 && return 0
		sleep 1
	done
	echo "dockerd did not start; see $DOCKER_LOG" >&2
	tail -20 "$DOCKER_LOG" >&2 || true
	exit 1
}

stop_dockerd() {
	if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
		systemctl stop docker
		return
	fi
	local pid
	pid=$(cat /var/run/docker.pid 2>/dev/null || true)
	[ -n "$pid" ] || return 0
	kill "$pid"
	for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
}

if ! command -v dockerd >/dev/null; then
	apt_install docker.io
fi
apt_install jq iptables busybox-static
start_dockerd

# A one-file probe image (static busybox), built locally: nothing is pulled.
PROBE=regionsync.local/probe:busybox
if ! docker image inspect "$PROBE" >/dev/null 2>&1; then
	tmp=$(mktemp -d)
	mkdir -p "$tmp/bin"
	cp /bin/busybox "$tmp/bin/busybox"
	for c in sh true cat sleep; do ln -s busybox "$tmp/bin/$c"; done
	tar -C "$tmp" -c . | docker import - "$PROBE" >/dev/null
	rm -rf "$tmp"
fi

WRAPPER=/usr/local/libexec/regionsync/runc-wrapper
# An installed wrapper is kept up to date (dockerd execs it afresh for every container).
if [ -f "$WRAPPER" ] && ! cmp -s "$here/runc-wrapper.sh" "$WRAPPER"; then
	install -m 0755 "$here/runc-wrapper.sh" "$WRAPPER"
fi
if ! docker run --rm --privileged "$PROBE" /bin/true 2>/tmp/regionsync-privileged-probe.err; then
	log "privileged containers fail here: $(grep -m1 . /tmp/regionsync-privileged-probe.err)"
	log "registering hack/kind/runc-wrapper.sh as dockerd's default runtime (drops CAP_SYS_RESOURCE)"
	install -D -m 0755 "$here/runc-wrapper.sh" "$WRAPPER"
	mkdir -p /etc/docker
	cfg=/etc/docker/daemon.json
	[ -s "$cfg" ] || echo '{}' >"$cfg"
	jq --arg w "$WRAPPER" '.runtimes["regionsync-runc"] = {"path": $w} | ."default-runtime" = "regionsync-runc"' "$cfg" >"$cfg.new"
	mv "$cfg.new" "$cfg"
	stop_dockerd
	start_dockerd
	docker run --rm --privileged "$PROBE" /bin/true
	log "privileged containers work with the wrapper"
fi
# docker exec into a privileged container (kind runs every step of its setup that way).
cid=$(docker run -d --privileged "$PROBE" sleep 60)
if ! docker exec "$cid" /bin/true; then
	docker rm -f "$cid" >/dev/null
	echo "docker exec into a privileged container fails" >&2
	exit 1
fi
docker rm -f "$cid" >/dev/null

# inotify: every kind node runs kubelet, containerd and the control plane, each holding inotify
# instances; five clusters exhaust the common default of 128 instances per user, and the last
# node's kube-proxy then exits with "too many open files" (its pods cannot reach the API
# server's Service). Raised as kind's known-issues page advises, never lowered.
raise_sysctl() {
	local key=$1 want=$2 have
	have=$(sysctl -n "$key" 2>/dev/null || echo 0)
	[ "$have" -ge "$want" ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		log "$key is $have (kind needs $want with several clusters): run sysctl -w $key=$want as root"
		return 0
	fi
	log "raising $key from $have to $want (several kind clusters)"
	sysctl -qw "$key=$want"
}
raise_sysctl fs.inotify.max_user_instances 512
raise_sysctl fs.inotify.max_user_watches 524288
