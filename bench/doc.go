// Package bench is regionsync's benchmark suite (make bench, docs/performance.md): real API servers
// (etcd + kube-apiserver, launched with the shipped overlays by test/framework/fleet's StartLocal),
// the agent binary as processes with the overlays' configuration, and every figure set against a
// baseline measured in the same run, printed as one table.
//
// The suite is a test behind the build tag "bench", so go test ./... never runs it:
//
//	KUBEBUILDER_ASSETS=$(scripts/control-plane.sh) go test -tags bench -run TestBench -v -timeout 90m ./bench/
//
// Parameters come from BENCH_* environment variables (see params in bench_test.go).
//
// The figures and their targets are data, targets.yaml (read by targets.go): every verdict of the
// table comes from it, and docs/performance.md's table of figures is rendered from it
// (TestTargetsTable; go test ./bench -run TestTargetsTable -update rewrites it). The key figures
// of every run are rows of history.tsv, one per run.
package bench
