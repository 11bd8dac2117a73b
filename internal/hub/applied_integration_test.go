//go:build integration

package hub

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestDeleteForgetsApplied: once the hub deleted a per-region object, or found it gone, its
// record of what it applied forgets the object (the record would otherwise grow with every
// object ever placed and removed); a delete that fails (the UID precondition: another object
// took the name) keeps it.
func TestDeleteForgetsApplied(t *testing.T) {
	ctx := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	const ns = "tenant-applied"
	if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	newObject := func() *unstructured.Unstructured {
		t.Helper()
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": ns, "name": "settings-r1"}, "data": map[string]any{"color": "blue"}}}
		if err := mgmt.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	r := &DistributionReconciler{applied: map[appliedKey]appliedDigest{}}
	w := writer{Client: mgmt.Client, sa: "the test's admin"}
	first := newObject()
	key := keyDigest(appliedKeyOf(first))
	remembered := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.applied[key]
		return ok
	}
	remember := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.applied[key] = appliedDigest{1}
	}

	remember()
	if err := r.delete(ctx, w, first); err != nil {
		t.Fatal(err)
	}
	if remembered() {
		t.Error("a deleted object is still in the record of what was applied")
	}
	remember()
	if err := r.delete(ctx, w, first); err != nil {
		t.Fatalf("deleting an object already gone: %v", err)
	}
	if remembered() {
		t.Error("an object found gone is still in the record of what was applied")
	}

	newObject() // the name taken again, by an object with another UID
	remember()
	if err := r.delete(ctx, w, first); err == nil {
		t.Fatal("a delete with the old UID as precondition succeeded")
	}
	if !remembered() {
		t.Error("a delete that failed dropped the object from the record of what was applied")
	}
}
