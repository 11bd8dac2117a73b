// Package v1alpha1 is the demo API group demo.regionsync.dev: the Tenant kind that tests and
// `make demo` sync from the management cluster to the regions.
//
// +kubebuilder:object:generate=true
// +groupName=demo.regionsync.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the demo kinds.
var GroupVersion = schema.GroupVersion{Group: "demo.regionsync.dev", Version: "v1alpha1"}

// SchemeBuilder registers the demo kinds; AddToScheme adds them to a scheme.
var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

// TenantSpec is what the management cluster asks of a region for one tenant.
type TenantSpec struct {
	// DisplayName is shown to the tenant's users.
	// +kubebuilder:validation:MinLength=1
	DisplayName string `json:"displayName"`
	// Plan is the tenant's service plan: free, team or enterprise are served; the operator
	// reports any other plan Stalled (a spec it cannot serve), so the API server accepts it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:default=free
	Plan string `json:"plan,omitempty"`
	// Replicas is how many serving replicas the tenant gets.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
}

// TenantStatus is what the regional tenant operator reports.
type TenantStatus struct {
	// ObservedGeneration is the metadata.generation the operator last acted on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is Pending until the operator has provisioned the tenant, then Ready; Failed when
	// it cannot (see the conditions).
	Phase string `json:"phase,omitempty"`
	// Endpoint is derived from the spec: where the tenant is served in this region.
	Endpoint string `json:"endpoint,omitempty"`
	// TokenSecret names the Secret holding the tenant's access token.
	TokenSecret string `json:"tokenSecret,omitempty"`
	// Conditions are the standard ones kstatus reads: Ready (True once the tenant is served),
	// and Stalled (True for a spec the operator cannot serve, such as an unknown plan).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Tenant is one customer's tenant.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Plan",type=string,JSONPath=`.spec.plan`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TenantSpec   `json:"spec,omitempty"`
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
//
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}

// addKnownTypes registers the demo kinds and the meta/v1 option types under GroupVersion (as
// apimachinery's API packages do; controller-runtime's scheme.Builder is deprecated for API packages,
// which should depend on apimachinery only).
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Tenant{}, &TenantList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
