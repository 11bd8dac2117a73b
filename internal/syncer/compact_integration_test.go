//go:build integration

package syncer_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/internal/syncer/compact"
)

// TestCachesHoldCompactObjects: with the agent's cache options, the local informer of a synced
// kind holds compacted objects, and the engine still reads whole ones through it.
func TestCachesHoldCompactObjects(t *testing.T) {
	e := newEnv(t)
	ns := e.remoteNamespace("compact")
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	gvk := e.opts.Resources[0].Object.GetObjectKind().GroupVersionKind()
	inf, err := e.mgr.GetCache().GetInformer(e.ctx, syncer.UnstructuredFor(gvk))
	if err != nil {
		t.Fatal(err)
	}
	items := inf.(toolscache.SharedIndexInformer).GetStore().List()
	if len(items) == 0 {
		t.Fatal("the local informer holds nothing")
	}
	for _, it := range items {
		if !compact.IsCompact(it) {
			t.Fatalf("the local informer holds %T, want *compactObject", it)
		}
	}
	got := syncer.UnstructuredFor(gvk)
	if err := e.mgr.GetCache().Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "acme"}, got); err != nil {
		t.Fatal(err)
	}
	if name, _, _ := unstructured.NestedString(got.Object, "spec", "displayName"); name != "Acme" || got.GetLabels()[e.keys.Region] != e.opts.Region {
		t.Fatalf("read through the cache: %v", got.Object)
	}
}
