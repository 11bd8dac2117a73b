//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestLocal deploys management + 3 regions from the overlays on local control planes and runs
// every scenario (which add 2 more: the add-a-region scenario's and FanOutRegion).
func TestLocal(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	start := time.Now()
	dir := t.TempDir()
	bin, err := testenv.BuildAgent(dir)
	if err != nil {
		t.Fatal(err)
	}
	hubBin, err := testenv.BuildHub(dir)
	if err != nil {
		t.Fatal(err)
	}
	deployCopy, err := CopyDeployTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartLocal(context.Background(), bin, hubBin, dir, deployCopy, Regions, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Stop()
		if t.Failed() {
			for _, r := range append(Regions, "sa-east-1", FanOutRegion, SameClusterRegion) {
				for _, n := range []string{"-replica-0", "-replica-1"} {
					if data, err := os.ReadFile(filepath.Join(dir, r+n+".log")); err == nil {
						t.Logf("--- %s%s (tail) ---\n%s", r, n, testenv.Tail(string(data), 2000))
					}
				}
			}
			for i := range HubReplicas {
				if data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("hub-replica-%d.log", i))); err == nil {
					t.Logf("--- hub-replica-%d (tail) ---\n%s", i, testenv.Tail(string(data), 3000))
				}
			}
		}
	})
	t.Logf("fleet deployed in %s", time.Since(start).Round(100*time.Millisecond))
	RunScenarios(t, f, deployCopy)
	RunDistributionScenario(t, f)
	RunClusterProfileScenario(t, f)
	if !t.Run("add a region with namespace fan-out for ConfigMaps", func(t *testing.T) { AddFanOutRegion(t, f, deployCopy, FanOutRegion) }) {
		t.FailNow()
	}
	RunRolloutScenario(t, f)
	RunFanOutScenario(t, f, FanOutRegion)
	t.Run("deployed agents export one trace per change", func(t *testing.T) { RunTraceScenario(t, f, f.Traces) })
	t.Run("the regions' and the hub's requests run under the overlays' FlowSchemas", func(t *testing.T) { flowSchemaInUse(t, f.mgmt.Config) })
	// Last: the region on management itself is not one the scenarios above go over.
	t.Run("namespace fan-out in one cluster: a Distribution's spec.source into every namespace", func(t *testing.T) {
		WriteFanOutOverlays(t, f, deployCopy, SameClusterRegion)
		if err := f.AddSameClusterRegion(context.Background(), SameClusterRegion, deployCopy); err != nil {
			t.Fatal(err)
		}
		RunSameClusterScenario(t, f, SameClusterRegion)
	})
	t.Logf("local e2e took %s", time.Since(start).Round(100*time.Millisecond))
}
