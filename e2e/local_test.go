//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/otlpsink"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// Regions are deployed at the start of every e2e run.
var Regions = []string{"us-east-1", "eu-west-1", "ap-southeast-1"}

// TestLocal deploys management + 3 regions from the overlays on local control planes
// (fleet.StartLocal) and runs every scenario (which add 2 more: the add-a-region scenario's and FanOutRegion).
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
	deployCopy, err := fleet.CopyDeployTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The agents export to it (OTEL_EXPORTER_OTLP_ENDPOINT, as a Deployment would set it), and
	// so do the tenant operators.
	traces, err := otlpsink.Start(otlpsink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(traces.Stop) // after the fleet's Stop below
	f, err := fleet.StartLocal(context.Background(), fleet.LocalOptions{Dir: dir, Regions: Regions, Log: t.Logf,
		DeployDir: deployCopy, AgentBinary: bin, TenantOperators: true, Traces: traces,
		Hub: &fleet.HubOptions{Binary: hubBin, Overlay: fleet.ClusterProfilesHub}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Logf("stopping the fleet: %v", err)
		}
		if t.Failed() {
			for _, r := range append(Regions, "sa-east-1", FanOutRegion, SameClusterRegion) {
				for _, n := range []string{"-replica-0", "-replica-1"} {
					if data, err := os.ReadFile(filepath.Join(dir, r+n+".log")); err == nil {
						t.Logf("--- %s%s (tail) ---\n%s", r, n, testenv.Tail(string(data), 2000))
					}
				}
			}
			for _, h := range f.Hubs() {
				if data, err := os.ReadFile(h.Log); err == nil {
					t.Logf("--- %s (tail) ---\n%s", h.Name, testenv.Tail(string(data), 3000))
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
	t.Run("deployed agents export one trace per change", func(t *testing.T) { RunTraceScenario(t, f, traces) })
	t.Run("the regions' and the hub's requests run under the overlays' FlowSchemas", func(t *testing.T) { flowSchemaInUse(t, f.Cluster(fleet.Management).Config) })
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
