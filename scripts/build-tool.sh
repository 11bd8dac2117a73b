# build-tool.sh is sourced by the scripts that build tools from the Go module proxy
# (control-plane.sh, go-tool.sh); it defines build_tool. The caller defines log and root.

# build_tool MODULE_DIR PACKAGE OUTPUT [LDFLAGS]: go build PACKAGE in the tools module MODULE_DIR
# (relative to root) into OUTPUT, printing a dot every 10 s so that a long build shows progress;
# exits the script on failure. OUTPUT appears only when the build succeeded.
build_tool() {
	local mod=$1 pkg=$2 out=$3 ldflags=${4:--s -w} start=$SECONDS
	(
		cd "$root/$mod"
		CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="$ldflags" -o "$out.tmp" "$pkg"
	) &
	local pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 10
		kill -0 "$pid" 2>/dev/null && printf '.' >&2
	done
	if ! wait "$pid"; then
		echo >&2
		log "FAILED to build $pkg"
		exit 1
	fi
	mv "$out.tmp" "$out"
	echo >&2
	log "built $(basename "$out") in $((SECONDS - start))s"
}
