package hub

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
)

// Target is one region a Distribution is placed in, with its rendered per-region object, or why
// the region cannot take it.
type Target struct {
	// Region is the Region's name.
	Region string
	// Object is the rendered per-region object (nil when the region is unplaceable or the
	// rendering failed).
	Object *unstructured.Unstructured
	// State is "" for a placeable region, else Unplaceable or Failed, with Reason and Message.
	State           regionsyncv1alpha1.PlacementState
	Reason, Message string
	// item is what the object is rendered from (a source object's template for spec.source);
	// nil: the Distribution's one item.
	item *Template
}

// Selected returns the names of the regions a placement selects, sorted: the named ones (which
// need not exist) and those whose labels match the selector. An invalid selector is an error
// naming spec.placement.regionSelector.
func Selected(p regionsyncv1alpha1.Placement, regions []regionsyncv1alpha1.Region) ([]string, error) {
	names := slices.Clone(p.Regions)
	if p.RegionSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.RegionSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.placement.regionSelector: %w", err)
		}
		for i := range regions {
			if sel.Matches(labels.Set(regions[i].Labels)) {
				names = append(names, regions[i].Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Place decides, for every selected region, whether the Distribution can be placed there and
// renders its object: a region is placeable only by its operator-registered spec.shard, in the
// hub's annotation domain, syncing the template's kind, with the Distribution's namespace inside
// its shard (the agent's own mapping decides), and the rendered object matching its selector.
func Place(rd Rendering, t *Template, selected []string, regions []regionsyncv1alpha1.Region, keys shard.Keys) []Target {
	byName := make(map[string]*regionsyncv1alpha1.Region, len(regions))
	for i := range regions {
		byName[regions[i].Name] = &regions[i]
	}
	kind := shard.KindName(t.GVK)
	out := make([]Target, 0, len(selected))
	for _, name := range selected {
		tg := Target{Region: name}
		unplaceable := func(reason, format string, args ...any) {
			tg.State, tg.Reason, tg.Message = regionsyncv1alpha1.PlacementUnplaceable, reason, fmt.Sprintf(format, args...)
		}
		r := byName[name]
		switch {
		case r == nil:
			unplaceable(regionsyncv1alpha1.ReasonRegionNotFound, "spec.placement.regions names Region %s, which does not exist", name)
		case r.Spec.Shard == nil:
			unplaceable(regionsyncv1alpha1.ReasonNoShard, "Region %s has no spec.shard: the operator registers it (docs/design/hub.md#hub-and-distribution) before the hub places objects there", name)
		case cmp.Or(r.Spec.Shard.AnnotationDomain, fleetspec.DefaultAnnotationDomain) != keys.Domain:
			unplaceable(regionsyncv1alpha1.ReasonOtherAnnotationDomain, "Region %s uses the annotation domain %s, the hub %s", name, r.Spec.Shard.AnnotationDomain, keys.Domain)
		case !slices.Contains(r.Spec.Shard.Kinds, kind):
			unplaceable(regionsyncv1alpha1.ReasonKindNotSynced, "Region %s does not sync %s (%s.kind; it syncs %v)", name, kind, t.field(), r.Spec.Shard.Kinds)
		default:
			placeIn(&tg, rd, t, r, keys)
		}
		tg.item = t
		out = append(out, tg)
	}
	return out
}

// placeIn renders the Distribution's object for region r and checks it against r's shard with the agent's own
// mapping and selector.
func placeIn(tg *Target, rd Rendering, t *Template, r *regionsyncv1alpha1.Region, keys shard.Keys) {
	rs := r.Spec.Shard
	unplaceable := func(reason, format string, args ...any) {
		tg.State, tg.Reason, tg.Message = regionsyncv1alpha1.PlacementUnplaceable, reason, fmt.Sprintf(format, args...)
	}
	m, err := shard.NewMapper(fleetspec.Shard{
		NamespacePrefix: rs.NamespacePrefix, RemoteResourceSuffix: rs.RemoteResourceSuffix,
		RemoteNamespaceSuffix: rs.RemoteNamespaceSuffix, LocalNamespaceSuffix: rs.LocalNamespaceSuffix,
		LabelSelector: rs.LabelSelector,
	})
	if err != nil {
		unplaceable(regionsyncv1alpha1.ReasonInvalidShard, "Region %s: spec.%v", r.Name, err)
		return
	}
	key := types.NamespacedName{Namespace: rd.Namespace, Name: ObjectName(t.baseName(rd.Name), rs)}
	if t.Name != "" && rs.RemoteResourceSuffix == "" {
		unplaceable(regionsyncv1alpha1.ReasonInvalidName, "Region %s has no remoteResourceSuffix: the per-region object of source %s would be the source itself", r.Name, t.Name)
		return
	}
	if msgs := validation.IsDNS1123Subdomain(key.Name); len(msgs) > 0 {
		unplaceable(regionsyncv1alpha1.ReasonInvalidName, "the per-region name %q for Region %s is not a valid name: %s", key.Name, r.Name, strings.Join(msgs, "; "))
		return
	}
	local, err := m.ToLocal(key)
	switch {
	case errors.Is(err, shard.ErrNotInShard):
		unplaceable(regionsyncv1alpha1.ReasonNamespaceOutOfScope, "namespace %s is outside Region %s's shard (namespaces %s*%s)", rd.Namespace, r.Name, rs.NamespacePrefix, rs.RemoteNamespaceSuffix)
		return
	case err != nil:
		unplaceable(regionsyncv1alpha1.ReasonInvalidName, "%v", err)
		return
	case slices.Contains(fleetspec.ProtectedNamespaces(fleetspec.DefaultLeaderNamespace, nil), local.Namespace):
		unplaceable(regionsyncv1alpha1.ReasonNamespaceOutOfScope, "namespace %s maps to %s, a system namespace of Region %s", rd.Namespace, local.Namespace, r.Name)
		return
	}
	obj, err := Render(rd, t, r, keys)
	if err != nil {
		tg.State, tg.Reason, tg.Message = regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.ReasonInvalidSpec, err.Error()
		return
	}
	if !m.MatchesLabels(obj.GetLabels()) {
		unplaceable(regionsyncv1alpha1.ReasonSelectorMismatch, "the object for Region %s would not match its shard selector %q", r.Name, rs.LabelSelector)
		return
	}
	tg.Object = obj
}
