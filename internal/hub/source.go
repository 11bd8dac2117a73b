package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
)

// lastApplied is kubectl's annotation; it describes the source, not a per-region object, and is
// not copied.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// reasonError is an error that carries the condition reason it is reported with.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// conditionReason is the reason an error carries, else def.
func conditionReason(err error, def string) string {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	return def
}

// SpecKind is the kind a Distribution places: its template's, or its source's. The error names
// the field; Secrets are refused unless allowSecrets (the hub's configuration) is set.
func SpecKind(d *regionsyncv1alpha1.Distribution, keys shard.Keys, allowSecrets bool) (schema.GroupVersionKind, error) {
	var gvk schema.GroupVersionKind
	p := field.NewPath("spec", "template")
	switch s := d.Spec.Source; {
	case s != nil && len(d.Spec.Template.Raw) > 0:
		return gvk, field.Invalid(field.NewPath("spec"), "", "exactly one of spec.template and spec.source")
	case s != nil:
		p = field.NewPath("spec", "source")
		gv, err := schema.ParseGroupVersion(s.APIVersion)
		switch {
		case s.APIVersion == "":
			return gvk, field.Required(p.Child("apiVersion"), "")
		case err != nil:
			return gvk, field.Invalid(p.Child("apiVersion"), s.APIVersion, err.Error())
		case s.Kind == "":
			return gvk, field.Required(p.Child("kind"), "")
		case (s.Name == "") == (s.LabelSelector == nil):
			return gvk, field.Invalid(p, "", "exactly one of name and labelSelector")
		}
		if s.LabelSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(s.LabelSelector); err != nil {
				return gvk, field.Invalid(p.Child("labelSelector"), "", err.Error())
			}
		}
		gvk = gv.WithKind(s.Kind)
	default:
		t, err := ParseTemplate(d.Spec.Template.Raw, keys)
		if err != nil {
			return gvk, err
		}
		gvk = t.GVK
	}
	if gvk.Group == "" && gvk.Kind == "Secret" && !allowSecrets {
		return gvk, field.Forbidden(p.Child("kind"), "Secrets are placed only where the hub's configuration allows them (allowSecrets: true)")
	}
	return gvk, nil
}

// resolve returns what d places, one Template per per-region object base name: its template, or
// one per source object read as the Distribution's ServiceAccount (so a Distribution places only
// what that ServiceAccount may read). specErr means nothing may change (a refused read, a source
// named that may not be a source); note says the source named does not exist (yet) or the
// selector matches nothing (the objects of sources that are gone are removed through the shrink
// guard).
func (r *DistributionReconciler) resolve(ctx context.Context, d *regionsyncv1alpha1.Distribution, gvk schema.GroupVersionKind, w writer, regions []regionsyncv1alpha1.Region) (items []*Template, note, specErr error) {
	s := d.Spec.Source
	if s == nil {
		t, err := ParseTemplate(d.Spec.Template.Raw, r.Keys)
		if err != nil {
			return nil, nil, err
		}
		return []*Template{t}, nil, nil
	}
	kind := shard.KindName(gvk)
	shards := shardMappers(regions)
	if s.Name != "" {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		err := w.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: s.Name}, u)
		switch {
		case apierrors.IsNotFound(err):
			// Not yet, or deleted: its objects, if any, are removed through the shrink guard.
			return nil, &reasonError{regionsyncv1alpha1.ReasonSourceNotFound, fmt.Errorf(
				"spec.source.name: %s %s/%s does not exist (yet); it is placed when it appears", kind, d.Namespace, s.Name)}, nil
		case err != nil:
			return nil, nil, fmt.Errorf("spec.source: reading %s %s/%s as %s: %w", kind, d.Namespace, s.Name, w, err)
		}
		if why := r.notASource(u, shards); why != "" {
			return nil, nil, fmt.Errorf("spec.source.name: %s %s/%s is not a source: %s", kind, d.Namespace, s.Name, why)
		}
		return []*Template{fromSource(u)}, nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
	if err != nil {
		return nil, nil, field.Invalid(field.NewPath("spec", "source", "labelSelector"), "", err.Error())
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(shard.ListGVK(gvk))
	if err := w.List(ctx, list, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, nil, fmt.Errorf("spec.source: listing %s in namespace %s as %s: %w", kind, d.Namespace, w, err)
	}
	for i := range list.Items {
		if r.notASource(&list.Items[i], shards) == "" {
			items = append(items, fromSource(&list.Items[i]))
		}
	}
	slices.SortFunc(items, func(a, b *Template) int { return strings.Compare(a.Name, b.Name) })
	if len(items) == 0 {
		note = &reasonError{regionsyncv1alpha1.ReasonSourceNotFound, fmt.Errorf(
			"spec.source.labelSelector %q matches no %s in namespace %s (yet); those that appear are placed", sel, kind, d.Namespace)}
	}
	return items, note, nil
}

// fromSource is the template of a source object: its apiVersion, kind, labels, annotations (but
// kubectl's last-applied-configuration) and every top-level field but metadata and status.
func fromSource(u *unstructured.Unstructured) *Template {
	obj := map[string]any{}
	for k, v := range u.Object {
		if k != "metadata" && k != "status" {
			obj[k] = v
		}
	}
	md := map[string]any{}
	if l := u.GetLabels(); len(l) > 0 {
		md["labels"] = toAny(l)
	}
	if a := u.GetAnnotations(); len(a) > 0 {
		a = maps.Clone(a)
		delete(a, lastApplied)
		if len(a) > 0 {
			md["annotations"] = toAny(a)
		}
	}
	if len(md) > 0 {
		obj["metadata"] = md
	}
	return &Template{GVK: u.GroupVersionKind(), Object: obj, Name: u.GetName(), Field: "spec.source"}
}

// shardMapper is a placeable region's name mapping.
type shardMapper struct {
	region string
	suffix string
	m      *shard.Mapper
}

// shardMappers are the name mappings of the Regions that have a spec.shard.
func shardMappers(regions []regionsyncv1alpha1.Region) []shardMapper {
	var out []shardMapper
	for i := range regions {
		rs := regions[i].Spec.Shard
		if rs == nil {
			continue
		}
		m, err := shard.NewMapper(fleetspec.Shard{
			NamespacePrefix: rs.NamespacePrefix, RemoteResourceSuffix: rs.RemoteResourceSuffix,
			RemoteNamespaceSuffix: rs.RemoteNamespaceSuffix, LocalNamespaceSuffix: rs.LocalNamespaceSuffix,
			LabelSelector: rs.LabelSelector,
		})
		if err == nil {
			out = append(out, shardMapper{region: regions[i].Name, suffix: rs.RemoteResourceSuffix, m: m})
		}
	}
	return out
}

// notASource says why an object may not be a source ("" when it may): objects the hub or an
// agent wrote carry the region label or one of regionsync's own keys (per-region objects,
// uploaded Secrets, objects the agents sync), and a name inside a region's shard is that
// region's object already.
func (r *DistributionReconciler) notASource(u *unstructured.Unstructured, shards []shardMapper) string {
	domain := r.Keys.Domain + "/"
	for _, k := range slices.Sorted(maps.Keys(u.GetLabels())) {
		if k == regionsyncv1alpha1.RegionLabel || strings.HasPrefix(k, domain) {
			return fmt.Sprintf("it carries the label %s (written by the hub or an agent)", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(u.GetAnnotations())) {
		if strings.HasPrefix(k, domain) && k != r.Keys.TraceParent {
			return fmt.Sprintf("it carries the annotation %s (written by the hub or an agent)", k)
		}
	}
	for _, f := range u.GetFinalizers() {
		if strings.HasPrefix(f, domain) {
			return fmt.Sprintf("it carries the finalizer %s (an agent syncs it)", f)
		}
	}
	key := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
	for _, s := range shards {
		inside := false
		if s.suffix != "" {
			_, err := s.m.ToLocal(key)
			inside = err == nil
		} else {
			inside = s.m.MatchesLabels(u.GetLabels()) && !s.m.Selector().Empty()
		}
		if inside {
			return fmt.Sprintf("its name is inside Region %s's shard (suffix %q)", s.region, s.suffix)
		}
	}
	return ""
}

// ensureSourceWatch watches, by metadata only, the objects of a source kind (once per kind):
// their changes wake the Distributions selecting them. Their content is read when placing, as
// the Distribution's ServiceAccount.
func (r *DistributionReconciler) ensureSourceWatch(gvk schema.GroupVersionKind) error {
	if r.Sources == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sourceWatched == nil {
		r.sourceWatched = map[schema.GroupVersionKind]bool{}
	}
	if r.sourceWatched[gvk] {
		return nil
	}
	if err := r.ctrl.Watch(source.Kind[client.Object](r.Sources, client.Object(sourceMetadata(gvk)), handler.EnqueueRequestsFromMapFunc(r.selecting(gvk)))); err != nil {
		return fmt.Errorf("watching the sources %s: %w", shard.KindName(gvk), err)
	}
	r.sourceWatched[gvk] = true
	return nil
}

// sourceMetadata is the metadata-only object of a source kind (what the sources' cache holds).
func sourceMetadata(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// selecting maps a change of an object of kind gvk to the Distributions of its namespace whose
// source selects it (by name, or by labels: old and new labels are both mapped on an update).
func (r *DistributionReconciler) selecting(gvk schema.GroupVersionKind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		var list regionsyncv1alpha1.DistributionList
		if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		var out []ctrl.Request
		for i := range list.Items {
			d := &list.Items[i]
			if sourceSelects(d, gvk, o.GetName(), o.GetLabels()) {
				out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(d)})
			}
		}
		return out
	}
}

// sourceSelects reports whether d's spec.source selects the object name (with labels lbls) of
// kind gvk in d's namespace.
func sourceSelects(d *regionsyncv1alpha1.Distribution, gvk schema.GroupVersionKind, name string, lbls map[string]string) bool {
	s := d.Spec.Source
	if s == nil || s.Kind != gvk.Kind {
		return false
	}
	if gv, err := schema.ParseGroupVersion(s.APIVersion); err != nil || gv.Group != gvk.Group {
		return false
	}
	if s.Name != "" {
		return s.Name == name
	}
	sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
	return err == nil && sel.Matches(labels.Set(lbls))
}

// newSourceCache is the cache of source objects' metadata (no label selector: any object of a
// watched kind may be selected).
func newSourceCache(mgr ctrl.Manager) (cache.Cache, error) {
	return cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
}

// regionEntries merges the entries of one region (several objects for a source, or an object of
// a previous kind being removed) into one, as status.regions has one entry per region: the most
// telling state, the names, current only when every placed object is, the worst health.
func regionEntries(entries []regionsyncv1alpha1.DistributionRegionStatus) []regionsyncv1alpha1.DistributionRegionStatus {
	byRegion := map[string][]regionsyncv1alpha1.DistributionRegionStatus{}
	var order []string
	for _, e := range entries {
		if _, ok := byRegion[e.Region]; !ok {
			order = append(order, e.Region)
		}
		byRegion[e.Region] = append(byRegion[e.Region], e)
	}
	out := make([]regionsyncv1alpha1.DistributionRegionStatus, 0, len(order))
	for _, region := range order {
		es := byRegion[region]
		if len(es) == 1 {
			out = append(out, es[0])
			continue
		}
		slices.SortStableFunc(es, func(a, b regionsyncv1alpha1.DistributionRegionStatus) int {
			if c := statePrecedence(a.State) - statePrecedence(b.State); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		m := es[0]
		var names, msgs []string
		for _, e := range es {
			if e.Name != "" {
				names = append(names, e.Name)
			}
			if e.State == m.State && e.Message != "" && !slices.Contains(msgs, e.Message) {
				msgs = append(msgs, e.Message)
			}
			if e.State == regionsyncv1alpha1.PlacementApplied && m.State == regionsyncv1alpha1.PlacementApplied {
				m.Current = m.Current && e.Current
				if healthPrecedence(e.Health) < healthPrecedence(m.Health) {
					m.Health = e.Health
				}
			}
		}
		slices.Sort(names)
		if len(names) > 3 {
			names = append(names[:3], fmt.Sprintf("and %d more", len(names)-3))
		}
		m.Name = strings.Join(names, ", ")
		m.Message = summary(msgs)
		out = append(out, m)
	}
	return out
}

// statePrecedence orders a region's states, the one that says most first.
func statePrecedence(s regionsyncv1alpha1.PlacementState) int {
	return slices.Index([]regionsyncv1alpha1.PlacementState{
		regionsyncv1alpha1.PlacementConflict, regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.PlacementUnplaceable,
		regionsyncv1alpha1.PlacementApplied, regionsyncv1alpha1.PlacementRemovalHeld, regionsyncv1alpha1.PlacementWaitingForRegion,
		regionsyncv1alpha1.PlacementRemoving,
	}, s)
}

// healthPrecedence orders kstatus results, the worst first.
func healthPrecedence(h string) int {
	i := slices.Index([]string{"Failed", "Terminating", "InProgress", "Unknown", "NotFound", "Current"}, h)
	if i < 0 {
		return 3
	}
	return i
}
