//go:build e2e && kind

package e2e

import (
	"context"
	"testing"
	"time"
)

// TestKind runs the scenarios on kind clusters (needs Docker): make test-e2e-kind.
func TestKind(t *testing.T) {
	start := time.Now()
	deployCopy, err := CopyDeployTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartKind(context.Background(), PlanKind(Regions, "ghcr.io/regionsync/agent:e2e"), deployCopy, t.Logf)
	if f != nil {
		t.Cleanup(f.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	RunScenarios(t, f, deployCopy)
	t.Run("deployed agents export one trace per change", func(t *testing.T) { RunTraceScenario(t, f, f.Traces) })
	t.Logf("kind e2e took %s", time.Since(start).Round(time.Second))
}
