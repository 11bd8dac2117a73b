#!/usr/bin/env bash
# soak.sh runs the test suite (make test's go test, unit and integration) several times in a row,
# each run a new go test process with fresh API servers, while a busy loop keeps one of the
# machine's cores busy, and prints the failures per test. A suite that passes once may still fail
# now and then; this is how to know it does not.
#
#   scripts/soak.sh                 # 10 runs of ./... with one core busy
#   SOAK_RUNS=3 SOAK_HOG=0 scripts/soak.sh ./internal/syncer/ ./pkg/...
#
# Environment: SOAK_RUNS (default 10), SOAK_HOG (busy cores, default 1), SOAK_DIR (where each run's
# go test -json output and failing tests' logs are kept; default a new temporary directory),
# TEST_TIMEOUT (per run, default 40m). Exits non-zero when any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${SOAK_RUNS:-10}
hogs=${SOAK_HOG:-1}
if ! [[ $runs =~ ^[1-9][0-9]*$ ]] || ! [[ $hogs =~ ^[0-9]+$ ]]; then
	echo "soak: SOAK_RUNS='$runs' must be a whole number from 1, SOAK_HOG='$hogs' one from 0" >&2
	exit 2
fi
dir=${SOAK_DIR:-$(mktemp -d -t regionsync-soak.XXXXXX)}
mkdir -p "$dir"
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

assets=$(scripts/control-plane.sh)
go build ./... >/dev/null
go test -tags integration -count=1 -run XXX "${pkgs[@]}" >/dev/null # compile the tests once, outside the timings

hog_pids=()
stop_hogs() { [ ${#hog_pids[@]} -eq 0 ] || kill "${hog_pids[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
trap "exit 130" INT TERM
for _ in $(seq 1 "$hogs"); do
	( while :; do :; done ) &
	hog_pids+=($!)
done

log() { printf '[soak %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
log "$runs runs of ${pkgs[*]} with $hogs busy core(s); outputs in $dir"
failed_runs=0
: >"$dir/failures"
for i in $(seq 1 "$runs"); do
	start=$SECONDS
	out="$dir/run-$i.json"
	rc=0
	KUBEBUILDER_ASSETS="$assets" go test -tags integration -count=1 -json -timeout "${TEST_TIMEOUT:-40m}" "${pkgs[@]}" >"$out" 2>"$dir/run-$i.stderr" || rc=$?
	# Failed tests: "Action":"fail" events that name a test (a package's own fail line names none).
	fails=$(grep '"Action":"fail"' "$out" | grep '"Test":"' |
		sed -E 's/.*"Package":"([^"]*)".*"Test":"([^"]*)".*/\1 \2/' | sort -u || true)
	if [ "$rc" -ne 0 ]; then
		failed_runs=$((failed_runs + 1))
		if [ -z "$fails" ]; then
			fails=$(grep '"Action":"fail"' "$out" | sed -E 's/.*"Package":"([^"]*)".*/\1 (package: build, panic or timeout)/' | sort -u || true)
			[ -n "$fails" ] || fails="(go test exit $rc: see run-$i.stderr)"
		fi
		printf '%s\n' "$fails" | sed "s/^/run $i: /" >>"$dir/failures"
		log "run $i: FAIL in $((SECONDS - start))s"
		printf '%s\n' "$fails" | sed 's/^/    /'
	else
		log "run $i: ok in $((SECONDS - start))s"
	fi
done

log "$failed_runs of $runs runs failed"
if [ -s "$dir/failures" ]; then
	echo "failures per test:"
	sed -E 's/^run [0-9]+: //' "$dir/failures" | sort | uniq -c | sort -rn
	exit 1
fi
