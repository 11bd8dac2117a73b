package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	// DistributionProgressing: a rollout of the update revision is under way (True) or not
	// (False: complete, halted or paused; the reason says which).
	DistributionProgressing = "Progressing"
	// DistributionHalted: the rollout stopped itself on failures (True is the bad state); the
	// message names the regions, the condition and since when.
	DistributionHalted = "Halted"
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
	// ReasonInvalidHealthRule: spec.health does not compile (the message names the field);
	// every copy's health is Unknown.
	ReasonInvalidHealthRule = "InvalidHealthRule"
	// ReasonHealthRuleError: spec.health failed on some copies (the message names the field
	// and the regions); their health is Unknown.
	ReasonHealthRuleError = "HealthRuleError"
	// ReasonSourceNotFound: spec.source names an object that does not exist (yet), or its
	// selector matches none; it is placed when it appears.
	ReasonSourceNotFound = "SourceNotFound"
	// ReasonCannotWatch (Applied=False): the hub cannot list and watch the Distribution's kind
	// (its ClusterRole has no rule for it, or the kind is not served), so it cannot tell what is
	// placed; nothing is changed until it can.
	ReasonCannotWatch = "CannotWatch"
	// ReasonHeld and ReasonNotHeld: the shrink guard's state.
	ReasonHeld    = "Held"
	ReasonNotHeld = "NotHeld"
	// ReasonDeleting: the Distribution is being deleted; its per-region objects are being removed
	// (Applied is False until they are gone and the hub's finalizer is released).
	ReasonDeleting = "Deleting"

	// Reasons of Progressing and Halted (and of status.rollout.halt).

	// ReasonWaveInProgress: a wave is being written or waits for its regions to be healthy.
	ReasonWaveInProgress = "WaveInProgress"
	// ReasonSoaking: every region of the wave is healthy; the next starts after the soak.
	ReasonSoaking = "Soaking"
	// ReasonRolloutComplete: every region runs the update revision, healthy.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonPaused: spec.paused holds the rollout where it is.
	ReasonPaused = "Paused"
	// ReasonRolloutHalted: the rollout halted on failures (see Halted).
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRolledBack: the rollout halted and the updated regions were given the previous
	// revision back.
	ReasonRolledBack = "RolledBack"
	// ReasonNotHalted: nothing is halted.
	ReasonNotHalted = "NotHalted"
	// ReasonRegionDown: a region of a started wave is not live (its Ready condition is Unknown,
	// or it never reported).
	ReasonRegionDown = "RegionDown"
	// ReasonProgressDeadlineExceeded: a region of the wave was not healthy within
	// spec.strategy.progressDeadline of the wave's start.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
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
	// PlacementPending: a progressive rollout has not reached the region's wave yet and the
	// region has no revision to keep (nothing is written there yet).
	PlacementPending PlacementState = "Pending"
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
//
// +kubebuilder:validation:XValidation:rule="has(self.template) != has(self.source)",message="exactly one of spec.template and spec.source"
type DistributionSpec struct {
	// Template is the object to place: apiVersion, kind, metadata.labels,
	// metadata.annotations and every other top-level field but status (spec, data, ...). Its
	// name is the Distribution's, plus each region's suffix; its namespace the Distribution's.
	// The kind must be one the placed regions sync. Exactly one of template and source.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	Template runtime.RawExtension `json:"template,omitzero"`
	// Source places existing objects of the Distribution's namespace instead of a template: one
	// by name, or every object of the kind matching a label selector, including those created
	// later. Each is placed as "<source name><region suffix>". Exactly one of template and source.
	// +optional
	Source *DistributionSource `json:"source,omitempty"`
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
	// Health judges each region's copy by CEL rules instead of kstatus (the default). Either
	// way a copy whose status reports an observedGeneration other than its own generation is
	// InProgress.
	// +optional
	Health *HealthRule `json:"health,omitempty"`
	// Strategy says how a change of what is placed (the template and the overrides, or the
	// source objects as placed and the overrides: a revision) reaches the regions: all at once
	// (All, the default) or wave by wave, each gated on the health of the previous one
	// (Progressive).
	// +optional
	Strategy RolloutStrategy `json:"strategy,omitempty"`
	// Paused holds a progressive rollout where it is: no wave starts and no region gets a new
	// revision (a halt on failures still happens). Not the agents' per-object pause annotation.
	// +optional
	Paused bool `json:"paused,omitempty"`
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

// RolloutStrategyType is how a new revision reaches the regions.
// +kubebuilder:validation:Enum=All;Progressive
type RolloutStrategyType string

const (
	// RolloutAll writes a new revision to every region at once.
	RolloutAll RolloutStrategyType = "All"
	// RolloutProgressive writes a new revision wave by wave, each wave after the previous one
	// has been healthy for the soak, halting on failures.
	RolloutProgressive RolloutStrategyType = "Progressive"
)

// FailureAction is what a progressive rollout does when it halts.
// +kubebuilder:validation:Enum=Halt;Rollback
type FailureAction string

const (
	// FailureHalt stops the rollout: the regions already updated keep the new revision.
	FailureHalt FailureAction = "Halt"
	// FailureRollback stops the rollout and writes the previous revision back to the regions
	// already updated.
	FailureRollback FailureAction = "Rollback"
)

// RolloutStrategy configures how revisions are rolled out.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.waves) && has(self.maxConcurrency))",message="set at most one of waves and maxConcurrency"
// +kubebuilder:validation:XValidation:rule="self.type == 'Progressive' || (!has(self.waves) && !has(self.maxConcurrency))",message="waves and maxConcurrency need type Progressive"
type RolloutStrategy struct {
	// Type is All (default: every region at once) or Progressive.
	// +optional
	// +kubebuilder:default=All
	Type RolloutStrategyType `json:"type,omitempty"`
	// Waves are the ordered waves of a progressive rollout: a region takes the first wave that
	// selects it; the regions no wave selects form one last wave.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Waves []RolloutWave `json:"waves,omitempty"`
	// MaxConcurrency, instead of waves, cuts the regions (sorted by name) into waves of this
	// many regions: a count, or a percentage of the placed regions (rounded up, at least 1).
	// Neither waves nor maxConcurrency: one region per wave.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`
	// Soak is how long every region of a wave must stay healthy before the next wave starts.
	// +optional
	// +kubebuilder:default="60s"
	Soak *metav1.Duration `json:"soak,omitempty"`
	// ProgressDeadline is how long, from a wave's start, each of its regions has to become
	// healthy; a region that has not counts as a failure.
	// +optional
	// +kubebuilder:default="10m"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`
	// MaxFailures is how many failed regions (a count, or a percentage of the placed regions,
	// rounded down) the rollout tolerates as a whole; one more halts it. Default 0: the first
	// failure halts.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:default=0
	MaxFailures *intstr.IntOrString `json:"maxFailures,omitempty"`
	// OnFailure is Halt (default) or Rollback.
	// +optional
	// +kubebuilder:default=Halt
	OnFailure FailureAction `json:"onFailure,omitempty"`
}

// RolloutWave selects the regions of one wave, by name and/or by their labels (the union).
type RolloutWave struct {
	// Name of the wave, for people (events, status).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`
	// Regions by name.
	// +optional
	// +listType=set
	Regions []string `json:"regions,omitempty"`
	// RegionSelector selects Regions by their labels.
	// +optional
	RegionSelector *metav1.LabelSelector `json:"regionSelector,omitempty"`
}

// HealthRule judges the health of a region's copy with CEL expressions (the Kubernetes CEL
// library, as in ValidatingAdmissionPolicy) over the variable `object`: the per-region object as
// management holds it, with the status its region uploaded and, as metadata.generation, the
// copy's own generation. Failed is evaluated first, then Current; when neither is true the copy
// is InProgress. An expression that does not compile, or fails on a copy, is reported in the
// Degraded condition naming its field; that copy's health is then Unknown.
type HealthRule struct {
	// Current is true when the copy is healthy, e.g.
	// `object.?status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Current string `json:"current"`
	// Failed is true when the copy has failed (Degraded, and a failure for rollouts), e.g.
	// `object.?status.?phase.orValue('') == 'Failed'`.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Failed string `json:"failed,omitempty"`
}

// DistributionSource selects existing objects of the Distribution's namespace to place: one by
// name, or every object of the kind matching a label selector. Objects the hub or an agent wrote
// (per-region objects, uploaded Secrets: anything carrying the region label or one of
// regionsync's own keys) and names inside a region's shard are never sources.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.labelSelector)",message="exactly one of name and labelSelector"
type DistributionSource struct {
	// APIVersion of the source objects (e.g. v1).
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind of the source objects (e.g. ConfigMap).
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the one source object.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// LabelSelector selects every object of the kind in the namespace whose labels match, now
	// and later; an object deleted or no longer matching is removed from every region (through
	// the shrink guard).
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
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
	// Ready regions: current, and the copy's health (kstatus, or spec.health) is Current.
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
	// Reason is a CamelCase reason (why Unplaceable or Failed; HealthRuleError when spec.health
	// could not judge the copy).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says it for people, naming the field at fault.
	// +optional
	Message string `json:"message,omitempty"`
	// Generation is the per-region object's metadata.generation.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// Current: the region's agent copied this generation down and its copy's status is of the
	// copy's current generation (the generation annotations); for a kind without
	// metadata.generation, the content the agent copied is the object's now (its applied-content
	// hash).
	// +optional
	Current bool `json:"current,omitempty"`
	// Health is the copy's kstatus (Current, InProgress, Failed, Terminating, Unknown), or
	// spec.health's verdict, judged on the uploaded status against the copy's own generation.
	// +optional
	Health string `json:"health,omitempty"`
	// LastTransitionTime is when State, Current or Health last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// RolloutStatus is the state of the rollout of a Distribution's revisions.
type RolloutStatus struct {
	// CurrentRevision is the stable revision: the last one every region ran healthy (the one
	// regions joining the placement get, and the one a rollback writes back).
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`
	// UpdateRevision is the revision of the spec as it is now (a ControllerRevision's name).
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`
	// Wave is the wave in progress, from 1 (0: no rollout in progress).
	// +optional
	Wave int32 `json:"wave,omitempty"`
	// Waves is the number of waves.
	// +optional
	Waves int32 `json:"waves,omitempty"`
	// WaveName is the wave's name, when it has one.
	// +optional
	WaveName string `json:"waveName,omitempty"`
	// WaveStartTime is when the wave in progress started.
	// +optional
	WaveStartTime *metav1.Time `json:"waveStartTime,omitempty"`
	// WaveHealthyTime is since when every region of the wave in progress is healthy (the soak
	// counts from it).
	// +optional
	WaveHealthyTime *metav1.Time `json:"waveHealthyTime,omitempty"`
	// Updated regions carry the update revision.
	// +optional
	Updated int32 `json:"updated,omitempty"`
	// Healthy regions are healthy for the update revision.
	// +optional
	Healthy int32 `json:"healthy,omitempty"`
	// Failed regions count against maxFailures.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Halt says why the rollout of the update revision halted; nil when it did not.
	// +optional
	Halt *RolloutHalt `json:"halt,omitempty"`
}

// RolloutHalt records a halted rollout.
type RolloutHalt struct {
	// Revision is the revision whose rollout halted: it is never applied again by itself (a
	// new revision, or the retry annotation, starts a new rollout).
	Revision string `json:"revision"`
	// Regions that failed (at most 20 listed).
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Regions []string `json:"regions,omitempty"`
	// Reason is the failing condition (Unhealthy, RegionDown, ProgressDeadlineExceeded,
	// ApplyFailed).
	Reason string `json:"reason"`
	// Message says it for people.
	// +optional
	Message string `json:"message,omitempty"`
	// Since is when the rollout halted (a retry annotation must be later).
	Since metav1.Time `json:"since"`
	// RolledBack: the updated regions were given the previous revision back.
	// +optional
	RolledBack bool `json:"rolledBack,omitempty"`
}

// DistributionStatus is written by the hub.
type DistributionStatus struct {
	// ObservedGeneration is the Distribution generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Applied, Available, Degraded, RemovalHeld, Progressing, Halted.
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
	// Rollout is the state of the rollout of revisions.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
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
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.rollout.wave`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.rollout.updated`
// +kubebuilder:printcolumn:name="Healthy",type=integer,JSONPath=`.status.rollout.healthy`
// +kubebuilder:printcolumn:name="Halted",type=string,JSONPath=`.status.conditions[?(@.type=="Halted")].status`
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
