//go:build e2e && kind

package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/regionsync/regionsync/test/framework/fleet"
)

// TestKind runs the scenarios on kind clusters (fleet.StartKind; needs Docker): make test-e2e-kind. With
// KIND_NODE_IMAGE=regionsync.local/... (make kind-node-image) nothing is pulled from a registry.
// KIND_REGIONS (default 2) is how many of Regions start; the add-a-region scenario adds one more
// and AddFanOutRegion another (FanOutRegion, ConfigMaps fanned out).
// KIND_KEEP_CLUSTERS=1 keeps the clusters of a failed run for inspection.
func TestKind(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	start := time.Now()
	n := 2
	if v, err := strconv.Atoi(os.Getenv("KIND_REGIONS")); err == nil && v >= 2 && v <= len(Regions) {
		n = v
	}
	deployCopy, err := fleet.CopyDeployTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := fleet.KindOptionsFromEnv()
	t.Logf("kind: node image %q (offline %v), cgroup v1 host %v, %d regions", opts.NodeImage, opts.Offline, opts.CgroupV1, n)
	f, err := fleet.StartKind(context.Background(), fleet.PlanKind(Regions[:n], "ghcr.io/regionsync/agent:e2e", opts), deployCopy, t.Logf)
	if f != nil {
		t.Cleanup(func() {
			if t.Failed() && os.Getenv("KIND_KEEP_CLUSTERS") != "" {
				t.Logf("kind: KIND_KEEP_CLUSTERS set, the clusters stay (kind delete clusters --all)")
				return
			}
			f.Stop()
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WaitAgentsReady(context.Background(), 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("kind: fleet deployed in %s", time.Since(start).Round(time.Second))
	RunScenarios(t, f, deployCopy)
	RunDistributionScenario(t, f)
	RunClusterProfileScenario(t, f)
	if !t.Run("add a region with namespace fan-out for ConfigMaps", func(t *testing.T) { AddFanOutRegion(t, f, deployCopy, FanOutRegion) }) {
		t.FailNow()
	}
	RunRolloutScenario(t, f)
	RunFanOutScenario(t, f, FanOutRegion)
	t.Run("deployed agents export one trace per change", func(t *testing.T) { RunTraceScenario(t, f, f.Traces) })
	t.Logf("kind e2e took %s", time.Since(start).Round(time.Second))
}
