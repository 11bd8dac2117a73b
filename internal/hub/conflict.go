package hub

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
)

// Two Distributions may want one per-region object (a template named like another's source, two
// sources selecting one object). The one that controls it (its D/distribution label) keeps it;
// when none does yet, the oldest (creation time, then name) places it; the others report a
// Conflict naming the Distribution that holds or takes the object.

// older reports whether a was created before b (by creation time, then name).
func older(a, b *regionsyncv1alpha1.Distribution) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// wants reports whether Distribution o would place the per-region object of kind gvk and base
// name base (a source object with labels srcLabels, or nil when unknown) in region.
func wants(o *regionsyncv1alpha1.Distribution, gvk schema.GroupVersionKind, base string, srcLabels map[string]string, region string, regions []regionsyncv1alpha1.Region, keys shard.Keys) bool {
	if o.DeletionTimestamp != nil {
		return false
	}
	if o.Spec.Source != nil {
		if !sourceSelects(o, gvk, base, srcLabels) {
			return false
		}
	} else {
		t, err := ParseTemplate(o.Spec.Template.Raw, keys)
		if err != nil || t.GVK != gvk || o.Name != base {
			return false
		}
	}
	selected, err := Selected(o.Spec.Placement, regions)
	return err == nil && slices.Contains(selected, region)
}

// olderWanting is the oldest Distribution of d's namespace, older than d, that also wants the
// per-region object t renders for region (nil when none does).
func (r *DistributionReconciler) olderWanting(ctx context.Context, d *regionsyncv1alpha1.Distribution, t *Template, region string, regions []regionsyncv1alpha1.Region) *regionsyncv1alpha1.Distribution {
	var list regionsyncv1alpha1.DistributionList
	if err := r.Client.List(ctx, &list, client.InNamespace(d.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	base := t.baseName(d.Name)
	// The labels matter only to a Distribution with a source: read once, and only then (for a
	// template that is a GET per new per-region object).
	var srcLabels map[string]string
	srcRead := false
	var winner *regionsyncv1alpha1.Distribution
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == d.Name || !older(o, d) || (winner != nil && !older(o, winner)) {
			continue
		}
		if o.Spec.Source != nil && !srcRead {
			srcLabels, srcRead = r.sourceLabels(ctx, d, t), true
		}
		if wants(o, t.GVK, base, srcLabels, region, regions, r.Keys) {
			winner = o
		}
	}
	if winner != nil {
		return winner.DeepCopy()
	}
	return nil
}

// sourceLabels are the labels of the object named like t's base in d's namespace, when it is a
// source object: t's own for a source; for a template, the labels of an object of its kind with
// the Distribution's name, if one exists (another Distribution may select it as a source).
func (r *DistributionReconciler) sourceLabels(ctx context.Context, d *regionsyncv1alpha1.Distribution, t *Template) map[string]string {
	if t.Name != "" {
		return (&unstructured.Unstructured{Object: t.Object}).GetLabels()
	}
	if r.Sources == nil {
		return nil
	}
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(t.GVK)
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: d.Name}, m); err != nil {
		return nil
	}
	return m.GetLabels()
}

// conflictMessage says who holds the per-region object live, which d does not control.
func conflictMessage(obj, live *unstructured.Unstructured, keys shard.Keys) string {
	what := fmt.Sprintf("%s %s/%s", shard.KindName(obj.GroupVersionKind()), obj.GetNamespace(), obj.GetName())
	if holder := live.GetLabels()[keys.Distribution]; holder != "" {
		return fmt.Sprintf("%s is held by Distribution %s (label %s=%s), which controls it; it is never taken over", what, holder, keys.Distribution, holder)
	}
	return fmt.Sprintf("%s exists and is not this Distribution's (label %s=%q); it is never taken over", what, keys.Distribution, "")
}

// perRegionRequests maps a per-region object's change to its Distribution and, as the object may
// have been released, to the Distributions waiting for it (a Conflict on it).
func (r *DistributionReconciler) perRegionRequests(_ context.Context, o client.Object) []ctrl.Request {
	var out []ctrl.Request
	if name := o.GetLabels()[r.Keys.Distribution]; name != "" {
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range r.waiting[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] {
		out = append(out, ctrl.Request{NamespacedName: d})
	}
	return out
}

// wait records that Distribution d waits for the per-region object obj (a Conflict), or no longer
// does.
func (r *DistributionReconciler) wait(d, obj types.NamespacedName, waits bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting == nil {
		r.waiting = map[types.NamespacedName]map[types.NamespacedName]bool{}
	}
	switch {
	case waits && !r.waiting[obj][d]:
		if r.waiting[obj] == nil {
			r.waiting[obj] = map[types.NamespacedName]bool{}
		}
		r.waiting[obj][d] = true
	case !waits && r.waiting[obj][d]:
		delete(r.waiting[obj], d)
		if len(r.waiting[obj]) == 0 {
			delete(r.waiting, obj)
		}
	}
}

// forgetWaits drops what a deleted Distribution waited for.
func (r *DistributionReconciler) forgetWaits(d types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for obj, ds := range r.waiting {
		delete(ds, d)
		if len(ds) == 0 {
			delete(r.waiting, obj)
		}
	}
}
