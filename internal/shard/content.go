package shard

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/regionsync/regionsync/internal/jsonvalue"
)

// IsContentField reports whether a top-level field of an object is content that flows from
// management to a region: everything but the object's identity, metadata and status (spec, and
// data for ConfigMap-like kinds).
func IsContentField(field string) bool {
	switch field {
	case "apiVersion", "kind", "metadata", "status":
		return false
	}
	return true
}

// AppliedContentHash hashes what an agent copies down from a management object: its content
// fields and its labels and annotations but the agent's own keys (which never flow down). The
// agent records it as AppliedHash on the management object of a kind without
// metadata.generation once the copy holds that content, and the hub compares it with the hash of
// the object as it is now: equal means the region's copy is current. The hash is one-way: it
// reveals nothing of the content (a Secret's data stays secret).
func (k Keys) AppliedContentHash(o *unstructured.Unstructured) string {
	content := map[string]any{}
	for f, v := range o.Object {
		if IsContentField(f) {
			content[f] = v
		}
	}
	labels, annotations := map[string]string{}, map[string]string{}
	for key, v := range o.GetLabels() {
		if !k.IsAgentKey(key) {
			labels[key] = v
		}
	}
	for key, v := range o.GetAnnotations() {
		if !k.IsAgentKey(key) {
			annotations[key] = v
		}
	}
	return jsonvalue.Hash(map[string]any{"content": content, "labels": labels, "annotations": annotations})
}
