package fleetspec

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// APIVersion is the apiVersion of regionsync's configuration files (the agent's AgentConfig, the
// hub's HubConfig).
const APIVersion = "regionsync.dev/v1alpha1"

// Strategy says how spec is written to the local copy.
type Strategy string

const (
	// StrategyReplace makes the local copy exactly the remote's; local drift is reverted.
	StrategyReplace Strategy = "Replace"
	// StrategyApply uses server-side apply with field manager "regionsync"; fields owned by
	// local controllers survive.
	StrategyApply Strategy = "Apply"
)

// AdoptionPolicy says what happens to a pre-existing, unmarked local object at a mapped name
// (outside a namespace the agent created for that very object, whose objects are always its own).
type AdoptionPolicy string

const (
	// AdoptionAdopt marks the object as managed and syncs it: a management user can then
	// overwrite, upload the secrets of and later delete an object the region made. Opt-in.
	AdoptionAdopt AdoptionPolicy = "Adopt"
	// AdoptionRefuse (the default) leaves the object alone, uploads none of its secrets and
	// reports a Warning event.
	AdoptionRefuse AdoptionPolicy = "Refuse"
)

// LeaseTimings times a Lease as client-go's leader election does: the holder renews every
// RetryPeriod, gives up after failing to renew for RenewDeadline, and others may take the Lease
// LeaseDuration after its last renewal.
type LeaseTimings struct {
	LeaseDuration metav1.Duration `json:"leaseDuration,omitempty"`
	RenewDeadline metav1.Duration `json:"renewDeadline,omitempty"`
	RetryPeriod   metav1.Duration `json:"retryPeriod,omitempty"`
}

// Shard is the shard definition (docs/design/sync-rules.md#shard-and-name-mapping). Empty fields are no constraint.
type Shard struct {
	// NamespacePrefix must start every remote and local namespace of the shard.
	NamespacePrefix string `json:"namespacePrefix,omitempty"`
	// RemoteResourceSuffix must end every remote object name; it is removed locally.
	RemoteResourceSuffix string `json:"remoteResourceSuffix,omitempty"`
	// RemoteNamespaceSuffix must end every remote namespace; it is replaced by LocalNamespaceSuffix.
	RemoteNamespaceSuffix string `json:"remoteNamespaceSuffix,omitempty"`
	// LocalNamespaceSuffix ends every local namespace of the shard.
	LocalNamespaceSuffix string `json:"localNamespaceSuffix,omitempty"`
	// LabelSelector narrows the shard server-side (objects that do not match are never cached).
	// The shipped overlays select RegionLabel=<region>.
	LabelSelector string `json:"labelSelector,omitempty"`
	// ExcludedNamespaces are local namespaces the agent never creates, writes or deletes in,
	// in addition to the built-in system namespaces (see ProtectedNamespaces).
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
}

// Resource is one kind to sync.
type Resource struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Secrets names local Secrets, controlled by the local object, that are uploaded to
	// "<name><remoteResourceSuffix>" in the remote namespace.
	Secrets []string `json:"secrets,omitempty"`
	// Strategy is Replace (default) or Apply.
	Strategy Strategy `json:"strategy,omitempty"`
	// Adoption is Refuse (default) or Adopt.
	Adoption AdoptionPolicy `json:"adoption,omitempty"`
	// AllowPrivileged must be true to sync a kind that grants privileges in the region (RBAC
	// objects, ServiceAccounts, admission configuration, CRDs, APIServices, PriorityClasses,
	// cluster-scoped kinds): whoever may write such objects on management then holds those
	// privileges in the region. See PrivilegedKinds.
	AllowPrivileged bool `json:"allowPrivileged,omitempty"`
	// DeletePropagation is used when deleting the local object (default Foreground).
	DeletePropagation metav1.DeletionPropagation `json:"deletePropagation,omitempty"`
	// Concurrency is the number of parallel reconciles for this kind (default 4).
	Concurrency int `json:"concurrency,omitempty"`
	// FanOut lets management objects of this kind ask for namespace fan-out (one copy in every
	// matching local namespace); nil or disabled: such objects are refused as invalid.
	FanOut *FanOut `json:"fanOut,omitempty"`
}

// FanOut configures namespace fan-out for one kind: a management object annotated
// D/fan-out-namespaces gets one copy in every local namespace that matches the annotation's
// label selector, inside the shard's namespace scope.
type FanOut struct {
	// Enabled lets objects of the kind fan out. The agent then watches the region's namespaces
	// (list and watch on namespaces in its RBAC).
	Enabled bool `json:"enabled,omitempty"`
	// WideSourceNamespaces are management namespaces whose objects may fan out beyond the
	// shard's namespace scope: into every local namespace but the protected ones (system
	// namespaces, the agent's own, the excluded ones). Empty: no source fans out wider.
	WideSourceNamespaces []string `json:"wideSourceNamespaces,omitempty"`
}

// GroupVersionKind is the kind r names.
func (r Resource) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// FanOutEnabled reports whether objects of the kind may fan out.
func (r Resource) FanOutEnabled() bool { return r.FanOut != nil && r.FanOut.Enabled }

// LeaderElection configures a leader election among replicas (durations as in client-go).
type LeaderElection struct {
	// Enabled turns leader election on (default true; false only for single-replica test runs).
	Enabled       *bool           `json:"enabled,omitempty"`
	Namespace     string          `json:"namespace,omitempty"`
	LeaseDuration metav1.Duration `json:"leaseDuration,omitempty"`
	RenewDeadline metav1.Duration `json:"renewDeadline,omitempty"`
	RetryPeriod   metav1.Duration `json:"retryPeriod,omitempty"`
}

// Tracing configures the OTLP trace exporter. An empty endpoint (and no OTEL_* endpoint
// variable) means tracing is off.
type Tracing struct {
	Endpoint      string   `json:"endpoint,omitempty"`
	Insecure      bool     `json:"insecure,omitempty"`
	SamplingRatio *float64 `json:"samplingRatio,omitempty"`
}
