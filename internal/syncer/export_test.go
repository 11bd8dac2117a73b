package syncer

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Test-only exports for the external test package.

// UnstructuredFor is an empty unstructured object of gvk.
func UnstructuredFor(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	return unstructuredFor(gvk)
}
