package main_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionLayering: the shipped agent links no harness room (test environments, the demo,
// its API and operator, the OTLP receiver, overlay rendering), and the health reporter knows
// neither the engine nor the shard claim (it reads them through health.Sources).
func TestProductionLayering(t *testing.T) {
	const mod = "github.com/regionsync/regionsync/"
	for pkg, forbidden := range map[string][]string{
		".": {
			mod + "api/demo/", mod + "internal/testenv", mod + "internal/demo", mod + "internal/tenantoperator",
			mod + "internal/otlpsink", mod + "internal/deploy",
		},
		"../../internal/health": {mod + "internal/syncer", mod + "internal/shard/claim"},
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 20 {
			t.Fatalf("go list %s returned %d packages; the check would prove nothing", pkg, len(deps))
		}
		for _, dep := range deps {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s imports %s (forbidden: %s)", pkg, dep, f)
				}
			}
		}
	}
}
