package syncer

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Test-only exports for the external test package.

// IsCompact reports whether a cache holds obj in the engine's compact form.
func IsCompact(obj any) bool { _, ok := obj.(*compactObject); return ok }

// UnstructuredFor is an empty unstructured object of gvk.
func UnstructuredFor(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	return unstructuredFor(gvk)
}
