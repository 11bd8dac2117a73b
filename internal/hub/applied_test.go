package hub

import (
	"math"
	"testing"
)

// TestAppliedDigests: the hub's record of what it applied tells rendered objects apart by their
// content (map order aside) and objects by their key; an object that does not marshal has no
// digest, so it never counts as applied.
func TestAppliedDigests(t *testing.T) {
	obj := func(display string) map[string]any {
		return map[string]any{"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
			"metadata": map[string]any{"name": "acme-eu", "labels": map[string]any{"a": "1", "b": "2"}},
			"spec":     map[string]any{"displayName": display, "replicas": int64(2)}}
	}
	a, okA := digestOf(obj("Acme"))
	again, okAgain := digestOf(obj("Acme"))
	other, okOther := digestOf(obj("Beta"))
	if !okA || !okAgain || !okOther {
		t.Fatal("a JSON object has no digest")
	}
	if a != again {
		t.Error("the same content has two digests")
	}
	if a == other {
		t.Error("different content has one digest")
	}
	if _, ok := digestOf(map[string]any{"spec": map[string]any{"x": math.NaN()}}); ok {
		t.Error("an object that does not marshal has a digest")
	}
	k1 := keyDigest("demo.regionsync.dev/v1alpha1, Kind=Tenant/tenant-a/acme-eu")
	k2 := keyDigest("demo.regionsync.dev/v1alpha1, Kind=Tenant/tenant-a/acme-us")
	if k1 == k2 || k1 != keyDigest("demo.regionsync.dev/v1alpha1, Kind=Tenant/tenant-a/acme-eu") {
		t.Errorf("key digests: %x %x", k1, k2)
	}
}
