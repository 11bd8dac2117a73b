package syncer

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Test-only exports for the external test package.

// UnstructuredFor is an empty unstructured object of gvk.
func UnstructuredFor(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	return unstructuredFor(gvk)
}

// SetStartJitterRand replaces how the start jitter's wait is drawn, until the returned function
// restores it.
func SetStartJitterRand(draw func(limit time.Duration) time.Duration) (restore func()) {
	old := startJitterRand.Swap(&draw)
	return func() { startJitterRand.Store(old) }
}
