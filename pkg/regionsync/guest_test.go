package regionsync_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGuestImports: the library is a guest in its host's process. Its import graph holds no trace
// exporter (the host passes its tracer provider), no kustomize and no kind (deployment tools),
// no package that registers flags, and none of regionsync's process-only packages.
func TestGuestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{
		"go.opentelemetry.io/otel/exporters/",
		"sigs.k8s.io/kustomize/",
		"sigs.k8s.io/kind",
		// Its init registers --kubeconfig on flag.CommandLine: a host's own flag would collide.
		"sigs.k8s.io/controller-runtime/pkg/client/config",
		"github.com/regionsync/regionsync/internal/telemetry/tracer",
		"github.com/regionsync/regionsync/test/framework/demo",
		"github.com/regionsync/regionsync/test/framework/deploy",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list returned %d packages; the check would prove nothing", len(deps))
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("pkg/regionsync imports %s (forbidden: %s)", dep, f)
			}
		}
	}
}
