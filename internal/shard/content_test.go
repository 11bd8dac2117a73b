package shard

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestAppliedContentHash(t *testing.T) {
	keys := NewKeys("regionsync.dev")
	base := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "settings-us", "namespace": "tenant-acme",
				"labels":      map[string]any{"team": "payments"},
				"annotations": map[string]any{"example.com/owner": "ops"}},
			"data": map[string]any{"color": "blue"},
		}}
	}
	want := keys.AppliedContentHash(base())
	cases := map[string]struct {
		edit func(u *unstructured.Unstructured)
		same bool
	}{
		"the agent's generation annotations and hash": {func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a[keys.RemoteGeneration], a[keys.LocalGeneration], a[keys.AppliedHash] = "0", "0", "abc"
			u.SetAnnotations(a)
		}, true},
		"a trace context": {func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a[keys.TraceParent] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			u.SetAnnotations(a)
		}, true},
		"status, finalizers, resourceVersion, generation, uid": {func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"phase": "Ready"}
			u.SetFinalizers([]string{keys.Finalizer})
			u.SetResourceVersion("42")
			u.SetGeneration(3)
			u.SetUID("6d1f0c52-3c38-4b1a-9d2e-5a8d3c0b7e41")
		}, true},
		"the data": {func(u *unstructured.Unstructured) {
			u.Object["data"] = map[string]any{"color": "green"}
		}, false},
		"a new top-level field": {func(u *unstructured.Unstructured) { u.Object["immutable"] = true }, false},
		"a label": {func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"team": "billing"})
		}, false},
		"an annotation removed": {func(u *unstructured.Unstructured) { u.SetAnnotations(nil) }, false},
		"the pause annotation (not copied down)": {func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a[keys.Paused] = "true"
			u.SetAnnotations(a)
		}, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			u := base()
			c.edit(u)
			if got := keys.AppliedContentHash(u); (got == want) != c.same {
				t.Errorf("hash %s, unedited %s: want same=%v", got, want, c.same)
			}
		})
	}
	if other := NewKeys("cloud.teleport.dev"); other.AppliedContentHash(base()) != want {
		t.Error("the hash of an object without agent keys depends on the domain")
	}
}
