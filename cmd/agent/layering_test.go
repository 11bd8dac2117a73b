package main_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionLayering: no product package (the commands that ship, internal/, pkg/) links the
// test scaffolding (test/: control planes, the fleet launcher, the demo and its tenant operator,
// the OTLP receiver, overlay rendering), the demo API, the e2e scenarios or the benchmarks; and the
// health reporter knows neither the engine nor the shard claim (it reads them through
// health.Sources).
func TestProductionLayering(t *testing.T) {
	const mod = "github.com/regionsync/regionsync/"
	scaffolding := []string{mod + "test/", mod + "api/demo/", mod + "e2e", mod + "bench"}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`,
		"../../cmd/...", "../../internal/...", "../../pkg/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("go list returned %d product packages; the check would prove nothing", len(lines))
	}
	rules := map[string][]string{mod + "internal/health": {mod + "internal/syncer", mod + "internal/shard/claim"}}
	for _, line := range lines {
		f := strings.Fields(line)
		pkg, deps := f[0], f[1:]
		forbidden := append(scaffolding, rules[pkg]...)
		for _, dep := range deps {
			for _, bad := range forbidden {
				if strings.HasPrefix(dep, bad) {
					t.Errorf("%s imports %s (forbidden: %s)", pkg, dep, bad)
				}
			}
		}
	}
}
