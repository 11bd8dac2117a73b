// Package clusterinventory holds the few types of SIG-Multicluster's cluster inventory API
// (ClusterProfile, multicluster.x-k8s.io/v1alpha1, KEP-4322) that regionsync publishes, written
// against the published schema because its Go module (sigs.k8s.io/cluster-inventory-api) is not
// served by the module proxy, and the mapping of a Region to its ClusterProfile (ForRegion), so
// that tools reading the standard inventory (Argo CD, Kueue's MultiKueue, OCM) see regionsync's
// regions. Only the fields regionsync fills are declared; the API server keeps the others.
package clusterinventory

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the cluster inventory API's group and version.
var GroupVersion = schema.GroupVersion{Group: "multicluster.x-k8s.io", Version: "v1alpha1"}

// SchemeBuilder registers the kinds; AddToScheme adds them to a scheme.
var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

// Well-known keys of the API.
const (
	// LabelClusterManagerKey labels every ClusterProfile with the name of its cluster manager.
	LabelClusterManagerKey = "x-k8s.io/cluster-manager"
	// LabelClusterSetKey labels the namespace of a cluster set's ClusterProfiles with its name.
	LabelClusterSetKey = "multicluster.x-k8s.io/clusterset"
	// ConditionControlPlaneHealthy says whether the cluster's control plane is healthy.
	ConditionControlPlaneHealthy = "ControlPlaneHealthy"
	// PropertyClusterID is the About API's (KEP-2149) well-known property of a cluster's ID.
	PropertyClusterID = "cluster.clusterset.k8s.io"
)

// ClusterProfile represents one cluster of a multi-cluster inventory.
type ClusterProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterProfileSpec   `json:"spec"`
	Status ClusterProfileStatus `json:"status,omitempty"`
}

// ClusterProfileSpec is the desired state of a ClusterProfile.
type ClusterProfileSpec struct {
	// DisplayName is a human-readable name of the cluster.
	DisplayName string `json:"displayName,omitempty"`
	// ClusterManager is the system that owns this ClusterProfile (immutable).
	ClusterManager ClusterManager `json:"clusterManager"`
}

// ClusterManager names the cluster manager that owns a ClusterProfile.
type ClusterManager struct {
	// Name of the cluster manager; also the value of LabelClusterManagerKey.
	Name string `json:"name"`
}

// ClusterProfileStatus is the observed state of a ClusterProfile.
type ClusterProfileStatus struct {
	// Conditions of the cluster, ControlPlaneHealthy among them.
	Conditions []metav1.Condition `json:"conditions"`
	// Version of the cluster.
	Version ClusterVersion `json:"version,omitempty"`
	// Properties are the cluster's characteristics as name/value pairs.
	Properties []Property `json:"properties,omitempty"`
}

// ClusterVersion is the cluster's version information.
type ClusterVersion struct {
	// Kubernetes is the cluster's Kubernetes version.
	Kubernetes string `json:"kubernetes,omitempty"`
}

// Property is one characteristic of a cluster: a name (a ClusterProperty's, or one the cluster
// manager defines), its value and when it was last observed on the cluster.
type Property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// LastObservedTime is when the property was observed on the cluster.
	LastObservedTime metav1.Time `json:"lastObservedTime,omitempty"`
}

// ClusterProfileList is a list of ClusterProfiles.
type ClusterProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProfile `json:"items"`
}

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ClusterProfile{}, &ClusterProfileList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// DeepCopyInto copies p into out.
func (p *ClusterProfile) DeepCopyInto(out *ClusterProfile) {
	*out = *p
	out.TypeMeta = p.TypeMeta
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = p.Spec
	p.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of p.
func (p *ClusterProfile) DeepCopy() *ClusterProfile {
	if p == nil {
		return nil
	}
	out := new(ClusterProfile)
	p.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (p *ClusterProfile) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *ClusterProfileStatus) DeepCopyInto(out *ClusterProfileStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	if s.Properties != nil {
		out.Properties = make([]Property, len(s.Properties))
		for i := range s.Properties {
			out.Properties[i] = s.Properties[i]
			s.Properties[i].LastObservedTime.DeepCopyInto(&out.Properties[i].LastObservedTime)
		}
	}
}

// DeepCopyInto copies l into out.
func (l *ClusterProfileList) DeepCopyInto(out *ClusterProfileList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]ClusterProfile, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *ClusterProfileList) DeepCopy() *ClusterProfileList {
	if l == nil {
		return nil
	}
	out := new(ClusterProfileList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *ClusterProfileList) DeepCopyObject() runtime.Object { return l.DeepCopy() }
