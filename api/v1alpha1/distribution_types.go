package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeletionPolicy says what happens to a Distribution's per-region objects when the Distribution
// is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionPolicyDelete (the default) deletes every per-region object; each region's agent
	// then deletes its copy through its finalizer, as for any object leaving its shard.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan leaves the per-region objects in place, without the Distribution's
	// label, so they stay synced and become ordinary management objects.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// Condition types of a Distribution.
const (
	// DistributionApplied: every placeable region's per-region object is written as rendered.
	DistributionApplied = "Applied"
	// DistributionAvailable: every placed region's copy is current and healthy.
	DistributionAvailable = "Available"
	// DistributionDegraded: some region cannot be placed, refused the object, or reports it
	// unhealthy (True is the bad state).
	DistributionDegraded = "Degraded"
	// DistributionRemovalHeld: the shrink guard holds removals of per-region objects until an
	// operator confirms them (True is the bad state).
	DistributionRemovalHeld = "RemovalHeld"
)

// Reasons of a Distribution's conditions.
const (
	// ReasonInvalidSpec: the spec cannot be rendered (the message names the field); nothing
	// already placed is changed.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonApplied: every placeable region's object is written.
	ReasonApplied = "Applied"
	// ReasonApplyFailed: writing some per-region object failed (see status.regions).
	ReasonApplyFailed = "ApplyFailed"
	// ReasonConflict: a per-region object exists that this Distribution does not control.
	ReasonConflict = "Conflict"
	// ReasonAvailable: every placed copy is current and healthy.
	ReasonAvailable = "Available"
	// ReasonProgressing: some copy is not current or not healthy yet.
	ReasonProgressing = "Progressing"
	// ReasonNoRegions: the placement selects no region.
	ReasonNoRegions = "NoRegions"
	// ReasonUnplaceable: some selected region cannot receive the object.
	ReasonUnplaceable = "Unplaceable"
	// ReasonUnhealthy: some copy reports Failed health.
	ReasonUnhealthy = "Unhealthy"
	// ReasonAsExpected: nothing is degraded.
	ReasonAsExpected = "AsExpected"
	// ReasonHeld and ReasonNotHeld: the shrink guard's state.
	ReasonHeld    = "Held"
	ReasonNotHeld = "NotHeld"
)

// PlacementState is the state of one region of a Distribution.
type PlacementState string

// The states of a region in status.regions.
const (
	// PlacementApplied: the per-region object is written as rendered.
	PlacementApplied PlacementState = "Applied"
	// PlacementUnplaceable: the region cannot receive the object (the message says why).
	PlacementUnplaceable PlacementState = "Unplaceable"
	// PlacementConflict: an object this Distribution does not control holds the per-region name.
	PlacementConflict PlacementState = "Conflict"
	// PlacementFailed: rendering (an override) or writing the object failed for this region.
	PlacementFailed PlacementState = "Failed"
	// PlacementRemoving: the region left the placement; its object is being deleted.
	PlacementRemoving PlacementState = "Removing"
	// PlacementRemovalHeld: the region left the placement but the shrink guard holds the removal.
	PlacementRemovalHeld PlacementState = "RemovalHeld"
	// PlacementWaitingForRegion: the object is terminating and waits for the region's agent to
	// delete its copy and release the finalizer.
	PlacementWaitingForRegion PlacementState = "WaitingForRegion"
)

// Reasons a region is Unplaceable (status.regions[].reason).
const (
	// ReasonNoShard: the Region has no spec.shard (made before the hub; see docs).
	ReasonNoShard = "NoShard"
	// ReasonRegionNotFound: the placement names a Region that does not exist.
	ReasonRegionNotFound = "RegionNotFound"
	// ReasonKindNotSynced: the region does not sync the template's kind.
	ReasonKindNotSynced = "KindNotSynced"
	// ReasonNamespaceOutOfScope: the Distribution's namespace is outside the region's shard.
	ReasonNamespaceOutOfScope = "NamespaceOutOfScope"
	// ReasonOtherAnnotationDomain: the region uses another annotation domain than the hub.
	ReasonOtherAnnotationDomain = "OtherAnnotationDomain"
	// ReasonSelectorMismatch: the rendered object would not match the region's shard selector.
	ReasonSelectorMismatch = "SelectorMismatch"
	// ReasonInvalidName: the per-region name or namespace is not a valid Kubernetes name.
	ReasonInvalidName = "InvalidName"
	// ReasonInvalidShard: the Region's spec.shard cannot be used (e.g. its selector does not parse).
	ReasonInvalidShard = "InvalidShard"
)

// MaxStatusRegions bounds status.regions: at most this many regions are listed; the counts
// always cover every region.
const MaxStatusRegions = 100

// DistributionSpec is what to place, where, and how it differs per region.
type DistributionSpec struct {
	// Template is the object to place: apiVersion, kind, metadata.labels,
	// metadata.annotations and every other top-level field but status (spec, data, ...). Its
	// name is the Distribution's, plus each region's suffix; its namespace the Distribution's.
	// The kind must be one the placed regions sync.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	Template runtime.RawExtension `json:"template"`
	// Placement selects the regions (the union of Regions and RegionSelector).
	Placement Placement `json:"placement"`
	// Overrides change the object for some regions, applied in order to the rendered object.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Overrides []Override `json:"overrides,omitempty"`
	// DeletionPolicy is Delete (default) or Orphan.
	// +optional
	// +kubebuilder:default=Delete
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
	// ServiceAccountName is the ServiceAccount of the Distribution's namespace the hub writes
	// the per-region objects as (impersonation): a Distribution places only what that
	// ServiceAccount may write. Empty: the hub configuration's defaultServiceAccountName; with
	// neither, nothing is placed (Applied=False naming this field). The admission policy
	// deploy/kustomize/hub ships refuses a Distribution whose author may not impersonate it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// Namespaces asks each placed region for namespace fan-out: a label selector over the
	// region's namespaces ("*": every namespace in the agent's scope). The per-region object
	// carries it as the annotation <domain>/fan-out-namespaces, and each region's agent keeps
	// one copy in every matching namespace instead of the object's mapped one (the kind must
	// have fan-out enabled in the agent's configuration). Unset: no fan-out.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Namespaces string `json:"namespaces,omitempty"`
}

// Placement selects Regions by name and/or by their labels.
type Placement struct {
	// Regions by name.
	// +optional
	// +listType=set
	Regions []string `json:"regions,omitempty"`
	// RegionSelector selects Regions by their labels (an empty selector selects every Region).
	// +optional
	RegionSelector *metav1.LabelSelector `json:"regionSelector,omitempty"`
}

// Override is a patch applied to the object rendered for the regions it selects.
//
// +kubebuilder:validation:XValidation:rule="has(self.jsonPatch) != has(self.mergePatch)",message="exactly one of jsonPatch and mergePatch"
type Override struct {
	// Regions by name this override applies to.
	// +optional
	// +listType=set
	Regions []string `json:"regions,omitempty"`
	// RegionSelector selects the Regions, by label, this override applies to.
	// +optional
	RegionSelector *metav1.LabelSelector `json:"regionSelector,omitempty"`
	// JSONPatch is an RFC 6902 JSON patch applied to the rendered object.
	// +optional
	JSONPatch []JSONPatchOperation `json:"jsonPatch,omitempty"`
	// MergePatch is an RFC 7386 JSON merge patch applied to the rendered object.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	MergePatch *apiextensionsv1.JSON `json:"mergePatch,omitempty"`
}

// JSONPatchOperation is one RFC 6902 operation.
type JSONPatchOperation struct {
	// Op is the operation.
	// +kubebuilder:validation:Enum=add;remove;replace;move;copy;test
	Op string `json:"op"`
	// Path is a JSON pointer into the rendered object.
	Path string `json:"path"`
	// From is the source pointer of move and copy.
	// +optional
	From string `json:"from,omitempty"`
	// Value of add, replace and test.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
}

// DistributionCounts count a Distribution's regions by state.
type DistributionCounts struct {
	// Selected regions (by the placement, existing or not).
	// +optional
	Selected int32 `json:"selected,omitempty"`
	// Placed regions: their per-region object is written as rendered.
	// +optional
	Placed int32 `json:"placed,omitempty"`
	// Current regions: the copy in the region is of the per-region object's current generation.
	// +optional
	Current int32 `json:"current,omitempty"`
	// Ready regions: current, and the copy's health (kstatus) is Current.
	// +optional
	Ready int32 `json:"ready,omitempty"`
	// Unplaceable regions (see status.regions).
	// +optional
	Unplaceable int32 `json:"unplaceable,omitempty"`
	// Failed regions: a conflict, an override that does not apply, a write that failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Removing regions: left the placement, object being deleted, held or waiting for the region.
	// +optional
	Removing int32 `json:"removing,omitempty"`
}

// DistributionRegionStatus is one region's view of a Distribution.
type DistributionRegionStatus struct {
	// Region is the Region's name.
	Region string `json:"region"`
	// Name is the per-region object's name (empty when none can be rendered).
	// +optional
	Name string `json:"name,omitempty"`
	// State of the region.
	State PlacementState `json:"state"`
	// Reason is a CamelCase reason (why Unplaceable or Failed).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says it for people, naming the field at fault.
	// +optional
	Message string `json:"message,omitempty"`
	// Generation is the per-region object's metadata.generation.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// Current: the region's agent copied this generation down and its copy's status is of the
	// copy's current generation (the generation annotations).
	// +optional
	Current bool `json:"current,omitempty"`
	// Health is the copy's kstatus (Current, InProgress, Failed, Terminating, Unknown), judged
	// on the uploaded status against the copy's own generation.
	// +optional
	Health string `json:"health,omitempty"`
	// LastTransitionTime is when State, Current or Health last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// DistributionStatus is written by the hub.
type DistributionStatus struct {
	// ObservedGeneration is the Distribution generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Applied, Available, Degraded, RemovalHeld.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Counts cover every selected region and every region that still holds an object.
	// +optional
	Counts DistributionCounts `json:"counts,omitempty"`
	// PlacedKind is the apiVersion and kind of the per-region objects last written, so that a
	// changed template kind removes the objects of the previous one.
	// +optional
	PlacedKind string `json:"placedKind,omitempty"`
	// Regions lists, by name, the regions that need attention (not current and ready), and every
	// region while there are at most 100; never more than 100 (RegionsOmitted counts the rest).
	// +listType=map
	// +listMapKey=region
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Regions []DistributionRegionStatus `json:"regions,omitempty"`
	// RegionsOmitted counts the regions not listed in Regions.
	// +optional
	RegionsOmitted int32 `json:"regionsOmitted,omitempty"`
}

// Distribution places one object in many regions: the hub writes, per placed region, the object
// "<name><region suffix>" in the Distribution's namespace, labelled for that region, which the
// region's agent syncs as any other.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=dist
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Regions",type=integer,JSONPath=`.status.counts.selected`
// +kubebuilder:printcolumn:name="Placed",type=integer,JSONPath=`.status.counts.placed`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.counts.current`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.counts.ready`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="a Distribution's name must fit a label value (at most 63 characters)"
type Distribution struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what to place and where (written by the tenant).
	Spec DistributionSpec `json:"spec"`
	// Status is the hub's report (written by the hub only).
	Status DistributionStatus `json:"status,omitempty"`
}

// DistributionList is a list of Distributions.
//
// +kubebuilder:object:root=true
type DistributionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Distribution `json:"items"`
}
