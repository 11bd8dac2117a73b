//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/clusterinventory"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// clusterProfileNamespace is where the hub of deploy/kustomize/hub-clusterprofiles publishes the
// ClusterProfiles (its configuration's clusterProfiles.namespace).
const clusterProfileNamespace = "regionsync-system"

// RunClusterProfileScenario reads the inventory as a tool of SIG-Multicluster's cluster inventory
// would (Argo CD, MultiKueue, OCM): one ClusterProfile per Region on management, managed by
// regionsync, with the Region's Kubernetes version and properties, and conditions that follow the
// Region's liveness: ControlPlaneHealthy Unknown (HeartbeatMissed) while a region's agents are
// stopped, True once they run again, the other regions' profiles staying healthy.
func RunClusterProfileScenario(t *testing.T, f fleet.Fleet) {
	ctx := context.Background()
	regions := f.Regions()
	t.Run("hub: one ClusterProfile per Region, with the Region's version and properties", func(t *testing.T) {
		for _, r := range regions {
			waitProfile(t, f.Management(), r, metav1.ConditionTrue, clusterinventory.ReasonAgentReporting)
		}
		// No profile of regionsync's names a Region that does not exist.
		profiles, err := listProfiles(ctx, f.Management())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range profiles {
			if err := f.Management().Get(ctx, client.ObjectKey{Name: p.Name}, &regionsyncv1alpha1.Region{}); err != nil {
				t.Errorf("ClusterProfile %s/%s: its Region: %v", p.Namespace, p.Name, err)
			}
		}
	})
	t.Run("hub: a ClusterProfile goes ControlPlaneHealthy=Unknown (HeartbeatMissed) when its region's agents stop, True when they start", func(t *testing.T) {
		region := regions[len(regions)-1]
		waitProfile(t, f.Management(), region, metav1.ConditionTrue, clusterinventory.ReasonAgentReporting)
		if err := f.StopAgents(ctx, region); err != nil {
			t.Fatal(err)
		}
		waitProfile(t, f.Management(), region, metav1.ConditionUnknown, regionsyncv1alpha1.ReasonHeartbeatMissed)
		for _, other := range regions {
			if other != region {
				waitProfile(t, f.Management(), other, metav1.ConditionTrue, clusterinventory.ReasonAgentReporting)
			}
		}
		if err := f.StartAgents(ctx, region); err != nil {
			t.Fatal(err)
		}
		waitProfile(t, f.Management(), region, metav1.ConditionTrue, clusterinventory.ReasonAgentReporting)
	})
}

// listProfiles lists the ClusterProfiles regionsync manages (by their cluster-manager label),
// read as unstructured objects, as a client without regionsync's types would.
func listProfiles(ctx context.Context, c client.Client) ([]clusterinventory.ClusterProfile, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(clusterinventory.GroupVersion.WithKind("ClusterProfileList"))
	if err := c.List(ctx, list, client.InNamespace(clusterProfileNamespace),
		client.MatchingLabels{clusterinventory.LabelClusterManagerKey: clusterinventory.ClusterManagerName}); err != nil {
		return nil, err
	}
	out := make([]clusterinventory.ClusterProfile, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &out[i]); err != nil {
			return nil, fmt.Errorf("ClusterProfile %s: %w", list.Items[i].GetName(), err)
		}
	}
	return out, nil
}

// waitProfile waits for region's ClusterProfile to say what its Region says: managed by
// regionsync and labelled with the region, the Region's Kubernetes version, agent version and
// name as properties, its Ready condition mirrored, and ControlPlaneHealthy at status and reason.
func waitProfile(t *testing.T, c client.Client, region string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("ClusterProfile %s/%s ControlPlaneHealthy=%s %s", clusterProfileNamespace, region, status, reason), 2*time.Minute, func() error {
		ctx := context.Background()
		r := &regionsyncv1alpha1.Region{}
		if err := c.Get(ctx, client.ObjectKey{Name: region}, r); err != nil {
			return err
		}
		profiles, err := listProfiles(ctx, c)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(profiles, func(p clusterinventory.ClusterProfile) bool { return p.Name == region })
		if i < 0 {
			return fmt.Errorf("no ClusterProfile of regionsync named %s", region)
		}
		p := profiles[i]
		if p.Spec.ClusterManager.Name != clusterinventory.ClusterManagerName || p.Labels[regionsyncv1alpha1.RegionLabel] != region || p.Spec.DisplayName != region {
			return fmt.Errorf("cluster manager %q, region label %q, display name %q", p.Spec.ClusterManager.Name, p.Labels[regionsyncv1alpha1.RegionLabel], p.Spec.DisplayName)
		}
		if r.Status.KubernetesVersion == "" || p.Status.Version.Kubernetes != r.Status.KubernetesVersion {
			return fmt.Errorf("version.kubernetes %q, the Region's %q", p.Status.Version.Kubernetes, r.Status.KubernetesVersion)
		}
		props := map[string]string{}
		for _, pr := range p.Status.Properties {
			props[pr.Name] = pr.Value
		}
		if props[clusterinventory.PropertyRegion] != region || r.Status.AgentVersion == "" || props[clusterinventory.PropertyAgentVersion] != r.Status.AgentVersion {
			return fmt.Errorf("properties %v, the Region's agent version %q", props, r.Status.AgentVersion)
		}
		ready := meta.FindStatusCondition(r.Status.Conditions, regionsyncv1alpha1.ConditionReady)
		mirrored := meta.FindStatusCondition(p.Status.Conditions, clusterinventory.ConditionRegionReady)
		if ready == nil || mirrored == nil || mirrored.Status != ready.Status || mirrored.Reason != ready.Reason {
			return fmt.Errorf("condition %s %+v, the Region's Ready %+v", clusterinventory.ConditionRegionReady, mirrored, ready)
		}
		h := meta.FindStatusCondition(p.Status.Conditions, clusterinventory.ConditionControlPlaneHealthy)
		if h == nil || h.Status != status || h.Reason != reason {
			return fmt.Errorf("condition %s %+v", clusterinventory.ConditionControlPlaneHealthy, h)
		}
		return nil
	})
}
