package clusterinventory

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// ClusterManagerName is regionsync's name as a cluster manager (spec.clusterManager.name and the
// LabelClusterManagerKey label of the ClusterProfiles it publishes).
const ClusterManagerName = "regionsync"

// Properties regionsync adds to a region's ClusterProfile, besides PropertyClusterID.
const (
	PropertyRegion       = "regionsync.dev/region"
	PropertyAgentVersion = "regionsync.dev/agent-version"
	PropertyShard        = "regionsync.dev/shard"
	PropertyDescription  = "regionsync.dev/description"
)

// maxPropertyValue is the longest property value the API accepts.
const maxPropertyValue = 1024

// ConditionRegionReady mirrors the Region's Ready condition on its ClusterProfile.
const ConditionRegionReady = "regionsync.dev/Ready"

// Reasons of ControlPlaneHealthy on a region's ClusterProfile.
const (
	// ReasonAgentReporting: the region's agent reports from its regional control plane (its
	// local caches synced, its heartbeat current).
	ReasonAgentReporting = "AgentReporting"
	// ReasonNoReport: the region's agent has not reported yet.
	ReasonNoReport = "NoReport"
)

// ForRegion is the ClusterProfile of region r in namespace (the cluster set's namespace): named
// after the region, owned by regionsync, its ControlPlaneHealthy condition following the
// Region's liveness (Unknown while the agent has not reported or the hub found its heartbeat
// missed, True while it reports), the Region's Ready condition mirrored, and the cluster ID,
// region, agent version, shard and description as properties observed at the heartbeat (after
// the regional ClusterProperty objects the agent reports, which win over a property of the same
// name), and the regional Kubernetes version the agent reports. It is
// pure: the caller writes it (spec on create, status through the status subresource).
func ForRegion(r *regionsyncv1alpha1.Region, namespace string) *ClusterProfile {
	p := &ClusterProfile{
		TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "ClusterProfile"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      r.Name,
			Labels:    map[string]string{LabelClusterManagerKey: ClusterManagerName, regionsyncv1alpha1.RegionLabel: r.Name},
		},
		Spec: ClusterProfileSpec{DisplayName: r.Name, ClusterManager: ClusterManager{Name: ClusterManagerName}},
	}
	// Conditions need a transition time: before the first heartbeat, the Region's creation.
	observed := r.CreationTimestamp
	if r.Status.HeartbeatTime != nil {
		observed = *r.Status.HeartbeatTime
	}
	healthy := metav1.Condition{Type: ConditionControlPlaneHealthy, Status: metav1.ConditionUnknown, Reason: ReasonNoReport,
		Message: fmt.Sprintf("region %s's agent has not reported on its Region yet", r.Name), LastTransitionTime: observed}
	ready := readyOf(r)
	if ready != nil {
		mirrored := *ready
		mirrored.Type = ConditionRegionReady
		mirrored.ObservedGeneration = 0
		p.Status.Conditions = append(p.Status.Conditions, mirrored)
		healthy.LastTransitionTime = ready.LastTransitionTime
		switch ready.Reason {
		case regionsyncv1alpha1.ReasonHeartbeatMissed:
			healthy.Reason, healthy.Message = regionsyncv1alpha1.ReasonHeartbeatMissed, ready.Message
		default:
			healthy.Status, healthy.Reason = metav1.ConditionTrue, ReasonAgentReporting
			healthy.Message = fmt.Sprintf("region %s's agent reports from its control plane (Region Ready=%s, %s)", r.Name, ready.Status, ready.Reason)
		}
	}
	p.Status.Conditions = append([]metav1.Condition{healthy}, p.Status.Conditions...)
	// The region's own ClusterProperty objects (About API) come first and win over a property
	// of the same name regionsync would add (a region's cluster.clusterset.k8s.io is its ID).
	fromRegion := map[string]bool{}
	for _, cp := range r.Status.ClusterProperties {
		fromRegion[cp.Name] = true
	}
	property := func(name, value string) {
		if len(value) > maxPropertyValue {
			value = value[:maxPropertyValue]
		}
		if value != "" {
			p.Status.Properties = append(p.Status.Properties, Property{Name: name, Value: value, LastObservedTime: observed})
		}
	}
	for _, cp := range r.Status.ClusterProperties {
		property(cp.Name, cp.Value)
	}
	p.Status.Version.Kubernetes = r.Status.KubernetesVersion
	for _, own := range [][2]string{
		{PropertyClusterID, r.Status.ClusterID}, {PropertyRegion, r.Name}, {PropertyAgentVersion, r.Status.AgentVersion},
		{PropertyShard, r.Status.Shard}, {PropertyDescription, r.Spec.Description},
	} {
		if !fromRegion[own[0]] {
			property(own[0], own[1])
		}
	}
	return p
}

func readyOf(r *regionsyncv1alpha1.Region) *metav1.Condition {
	for i := range r.Status.Conditions {
		if r.Status.Conditions[i].Type == regionsyncv1alpha1.ConditionReady {
			return &r.Status.Conditions[i]
		}
	}
	return nil
}
