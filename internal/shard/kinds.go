package shard

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FieldManager is the field manager of every write regionsync makes (server-side apply, status,
// Lease and Region updates included).
const FieldManager = "regionsync"

// KindName is the dotted name of a kind ("Tenant.demo.regionsync.dev", "ConfigMap" for core):
// the name of its controller, metrics and logs, and of the kind in a shard definition.
func KindName(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind
	}
	return gvk.Kind + "." + gvk.Group
}

// ListGVK is the list kind of gvk.
func ListGVK(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	return gvk.GroupVersion().WithKind(gvk.Kind + "List")
}
