// Package v1alpha1 is the regionsync.dev API group: the cluster-scoped Region kind through which
// each region's agent publishes its health on the management cluster (and whose operator-written
// spec.shard tells the hub where it may place objects), and the namespaced Distribution kind, one
// object the hub places in many regions.
//
// +kubebuilder:object:generate=true
// +groupName=regionsync.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RegionLabel is the label convention of the shipped overlays: management-side tooling labels
// every object meant for a region with RegionLabel=<region>, each region's agent selects on it
// (shard.labelSelector, so nothing else is cached), and management's admission policy lets a
// region's identity write only objects labelled for its own region.
const RegionLabel = "regionsync.dev/region"

// GroupVersion is the regionsync.dev API group and version.
var GroupVersion = schema.GroupVersion{Group: "regionsync.dev", Version: "v1alpha1"}

// SchemeBuilder registers the kinds; AddToScheme adds them to a scheme.
var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

// Condition types of a Region.
const (
	// ConditionReady: connected, shard claimed, synced, nothing held.
	ConditionReady = "Ready"
	// ConditionManagementConnected: the agent reaches the management API server.
	ConditionManagementConnected = "ManagementConnected"
	// ConditionShardClaimed: the agent holds the region's shard Lease and no other live shard overlaps it.
	ConditionShardClaimed = "ShardClaimed"
	// ConditionSynced: no object of the shard is pending, failed or invalid.
	ConditionSynced = "Synced"
	// ConditionDeletionsHeld: the deletion budget holds deletions (True is the bad state).
	ConditionDeletionsHeld = "DeletionsHeld"
)

// Condition reasons of a Region.
const (
	// ManagementConnected.
	ReasonConnected   = "Connected"
	ReasonUnreachable = "Unreachable"

	// ShardClaimed, and Ready while the shard is not claimed: the shard claim's state.
	ReasonClaimed = "Claimed"
	// ReasonWaiting: the agent waits for the region's shard Lease (or is not the local leader).
	ReasonWaiting = "Waiting"
	// ReasonHeldByOtherFleet: another fleet (another cluster or namespace) holds the Lease.
	ReasonHeldByOtherFleet = "HeldByOtherFleet"
	// ReasonShardOverlap: another region's live shard, registered first, overlaps this one.
	ReasonShardOverlap = "ShardOverlap"
	// ReasonShardNotRegistered: the agent's shard differs from the one the operator registered on
	// its Region (spec.shard); it does not claim until they agree.
	ReasonShardNotRegistered = "ShardNotRegistered"

	// Synced.
	ReasonSynced    = "Synced"
	ReasonNotSynced = "NotSynced"

	// DeletionsHeld.
	ReasonBudgetExceeded = "BudgetExceeded"
	ReasonNoneHeld       = "NoneHeld"

	// Ready (besides the shard claim reasons).
	ReasonReady    = "Ready"
	ReasonNotReady = "NotReady"
	// ReasonHeartbeatMissed: set by the hub (Ready=Unknown) when the region's shard Lease was not
	// renewed for its lease duration plus a grace; the agent's next report replaces it.
	ReasonHeartbeatMissed = "HeartbeatMissed"
)

// RegionSpec is written by the operator who adds the region.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.shard) || (has(self.shard) && self.shard == oldSelf.shard)",message="spec.shard is immutable: once set it can be neither changed nor removed (a region's shard is its identity on management)"
type RegionSpec struct {
	// Description says what the region is for.
	// +optional
	Description string `json:"description,omitempty"`
	// Shard is the region's shard as the operator registered it (scripts/new-region.sh writes
	// it): the only source the hub reads a region's suffixes, namespace prefix, selector,
	// annotation domain and kinds from, never what the region's agent writes itself. Immutable
	// once set. A Region without it keeps syncing as before but no Distribution places objects
	// in it.
	// +optional
	Shard *RegionShard `json:"shard,omitempty"`
}

// RegionShard is a region's shard definition, the same fields as the agent's configuration
// (shard.* and annotationDomain, and the kinds of its resources).
type RegionShard struct {
	// AnnotationDomain is the region's annotation domain (default regionsync.dev); the hub
	// places only into regions of its own domain.
	// +optional
	// +kubebuilder:default=regionsync.dev
	AnnotationDomain string `json:"annotationDomain,omitempty"`
	// NamespacePrefix starts every namespace of the shard.
	// +optional
	NamespacePrefix string `json:"namespacePrefix,omitempty"`
	// RemoteResourceSuffix ends every management object name of the shard.
	// +optional
	RemoteResourceSuffix string `json:"remoteResourceSuffix,omitempty"`
	// RemoteNamespaceSuffix ends every management namespace of the shard.
	// +optional
	RemoteNamespaceSuffix string `json:"remoteNamespaceSuffix,omitempty"`
	// LocalNamespaceSuffix ends every namespace of the shard in the region.
	// +optional
	LocalNamespaceSuffix string `json:"localNamespaceSuffix,omitempty"`
	// LabelSelector is the shard's label selector (e.g. regionsync.dev/region=us-east-1).
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
	// Kinds the region syncs, dotted: "Tenant.demo.regionsync.dev", "ConfigMap" for core kinds.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	Kinds []string `json:"kinds"`
}

// ResourceCounts are the objects of one synced kind by state.
type ResourceCounts struct {
	// Resource is the dotted kind, e.g. Tenant.demo.regionsync.dev.
	Resource string `json:"resource"`
	Synced   int32  `json:"synced"`
	Pending  int32  `json:"pending"`
	Failed   int32  `json:"failed"`
	Paused   int32  `json:"paused"`
	Invalid  int32  `json:"invalid"`
	// DeletionsHeld counts local copies whose deletion the budget holds.
	DeletionsHeld int32 `json:"deletionsHeld,omitempty"`
	// FanOutCopies counts the current namespace fan-out copies of the kind's fan-out objects
	// (each fan-out object itself is counted once, by its state, above).
	// +optional
	FanOutCopies int32 `json:"fanOutCopies,omitempty"`
	// FanOutFailed counts the namespaces where a fan-out copy failed (an object that is not a
	// copy in the way, a refused write).
	// +optional
	FanOutFailed int32 `json:"fanOutFailed,omitempty"`
}

// Bounds of a Region's status.clusterProperties.
const (
	// MaxClusterProperties is how many ClusterProperty objects a Region reports.
	MaxClusterProperties = 64
	// MaxClusterPropertyValue is how long a reported value may be (a ClusterProfile property's
	// limit).
	MaxClusterPropertyValue = 1024
)

// ClusterProperty is one of the regional cluster's ClusterProperty objects: its name and value.
type ClusterProperty struct {
	// Name is the ClusterProperty's name (e.g. cluster.clusterset.k8s.io).
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Value is its spec.value, cut to MaxClusterPropertyValue characters.
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
}

// RegionStatus is published by the region's leading agent.
type RegionStatus struct {
	// Conditions: Ready, ManagementConnected, ShardClaimed, Synced, DeletionsHeld.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Leader is the identity of the agent replica that leads the region.
	// +optional
	Leader string `json:"leader,omitempty"`
	// ClusterID is the UID of the regional cluster's kube-system namespace.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// AgentVersion is the leading agent's version.
	// +optional
	AgentVersion string `json:"agentVersion,omitempty"`
	// KubernetesVersion is the regional API server's version (its /version gitVersion, e.g.
	// v1.36.3). A server built from source without release metadata reports v0.0.0-master; the
	// agent then reports the binary's major.minor (e.g. v1.36) when the server states it, else
	// the gitVersion as it is.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// ClusterProperties are the regional cluster's ClusterProperty objects (the About API,
	// about.k8s.io/v1alpha1, KEP-2149) where the region has them, read-only: at most
	// MaxClusterProperties, by name, each value cut to MaxClusterPropertyValue characters.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	ClusterProperties []ClusterProperty `json:"clusterProperties,omitempty"`
	// Shard describes the claimed shard.
	// +optional
	Shard string `json:"shard,omitempty"`
	// Resources counts the shard's objects per kind.
	// +optional
	Resources []ResourceCounts `json:"resources,omitempty"`
	// LastSyncTime is when the agent last wrote a change to either cluster.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// CredentialExpiryTime is when the management credential (the region's ServiceAccount
	// token) the leader uses expires. With credential renewal on, the agent renews it at two
	// thirds of its lifetime (or its configured margin), so it keeps moving forward; a time that
	// comes near means renewal fails. Empty when unknown (not a ServiceAccount token).
	// +optional
	CredentialExpiryTime *metav1.Time `json:"credentialExpiryTime,omitempty"`
	// HeartbeatTime is when the leader last wrote this status. The status is written when it
	// changes (and, only with the agent's telemetry.heartbeatInterval set, that often besides),
	// so an old time on an idle region is normal: the region's heartbeat is its shard Lease's
	// renewTime (Lease region-<name> in the management namespace), which the hub judges.
	// +optional
	HeartbeatTime *metav1.Time `json:"heartbeatTime,omitempty"`
}

// Region is one regional cluster of the fleet. The operator creates it when adding the region;
// the region's agent only updates its status.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`
// +kubebuilder:printcolumn:name="Reported",type=date,JSONPath=`.status.heartbeatTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Region struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RegionSpec   `json:"spec,omitempty"`
	Status RegionStatus `json:"status,omitempty"`
}

// RegionList is a list of Regions.
//
// +kubebuilder:object:root=true
type RegionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Region `json:"items"`
}

// addKnownTypes registers the kinds and the meta/v1 option types under GroupVersion (as
// apimachinery's API packages do; controller-runtime's scheme.Builder is deprecated for API packages,
// which should depend on apimachinery only).
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Region{}, &RegionList{}, &Distribution{}, &DistributionList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
