package syncer

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regionsync/regionsync/internal/jsonvalue"
	"github.com/regionsync/regionsync/internal/shard"
)

// This file holds the pure part of "spec down": what the local copy must look like, and whether
// the live local object already does. No client calls here.

// isContentKey reports whether a top-level field is content that flows remote → local
// (shard.IsContentField: the one rule the hub's currentness check shares).
func isContentKey(k string) bool { return shard.IsContentField(k) }

// copiedMetadata returns the labels and annotations that flow down: the remote's, minus the
// agent's own keys, plus the marks that make the local object the agent's.
func copiedMetadata(remote *unstructured.Unstructured, keys shard.Keys, region string) (labels, annotations map[string]string) {
	labels = map[string]string{}
	for k, v := range remote.GetLabels() {
		if !keys.IsAgentKey(k) {
			labels[k] = v
		}
	}
	labels[keys.Region] = region
	annotations = map[string]string{}
	for k, v := range remote.GetAnnotations() {
		if !keys.IsAgentKey(k) {
			annotations[k] = v
		}
	}
	annotations[keys.RemoteUID] = string(remote.GetUID())
	return labels, annotations
}

// specHash hashes what flows down from remote (its content and copied labels and annotations):
// the same hash written twice means the first write was undone locally.
func specHash(remote *unstructured.Unstructured, keys shard.Keys, region string) string {
	content := map[string]any{}
	for k, v := range remote.Object {
		if isContentKey(k) {
			content[k] = v
		}
	}
	labels, annotations := copiedMetadata(remote, keys, region)
	delete(annotations, keys.TraceParent) // a new trace is not new content
	return jsonvalue.Hash(map[string]any{"content": content, "labels": labels, "annotations": annotations})
}

// copiedKeys lists, sorted, the remote's label and annotation keys that flow down.
func copiedKeys(remote *unstructured.Unstructured, keys shard.Keys) string {
	var list []string
	for k := range remote.GetLabels() {
		if !keys.IsAgentKey(k) {
			list = append(list, "label:"+k)
		}
	}
	for k := range remote.GetAnnotations() {
		if !keys.IsAgentKey(k) {
			list = append(list, "annotation:"+k)
		}
	}
	sort.Strings(list)
	return strings.Join(list, ",")
}

// copyMarks are marks a copy carries beyond the region's and the remote UID: a fan-out copy's
// source (fan-out). Nil for an ordinary copy.
type copyMarks struct {
	labels, annotations map[string]string
}

// apply sets the marks on o.
func (m *copyMarks) apply(o *unstructured.Unstructured) {
	if m == nil {
		return
	}
	o.SetLabels(merged(o.GetLabels(), m.labels))
	o.SetAnnotations(merged(o.GetAnnotations(), m.annotations))
}

// on reports whether o carries every mark.
func (m *copyMarks) on(o *unstructured.Unstructured) bool {
	return m == nil || isSubMap(m.labels, o.GetLabels()) && isSubMap(m.annotations, o.GetAnnotations())
}

// copyContent deep-copies the remote's content fields into out.
func copyContent(out, remote *unstructured.Unstructured) {
	for k, v := range remote.Object {
		if isContentKey(k) {
			out.Object[k] = jsonvalue.DeepCopy(v)
		}
	}
}

// contentEqual compares the content fields (see isContentKey) of two objects.
func contentEqual(a, b map[string]any) bool {
	for k, v := range a {
		if isContentKey(k) && !reflect.DeepEqual(v, b[k]) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; isContentKey(k) && !ok {
			return false
		}
	}
	return true
}

func isSubMap(want, got map[string]string) bool {
	for k, v := range want {
		if gv, ok := got[k]; !ok || gv != v {
			return false
		}
	}
	return true
}

func merged(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}

// hashSecretData hashes a Secret's type and data (keys sorted) for D/last-uploaded-hash. The hash
// is one-way: it reveals nothing of the secret.
func hashSecretData(secretType string, data map[string][]byte) string {
	h := sha256.New()
	h.Write([]byte(secretType))
	h.Write([]byte{0})
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(data[k])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// newCopy is an empty object of remote's kind named local.
func newCopy(remote *unstructured.Unstructured, local types.NamespacedName) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(remote.GetAPIVersion())
	out.SetKind(remote.GetKind())
	out.SetNamespace(local.Namespace)
	out.SetName(local.Name)
	return out
}
