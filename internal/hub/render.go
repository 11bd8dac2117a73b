package hub

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/jsonvalue"
	"github.com/regionsync/regionsync/internal/shard"
)

// templateMetadata are the metadata fields a template may set: everything else (name,
// namespace, finalizers, owner references, ...) is the hub's to decide or nobody's.
var templateMetadata = []string{"labels", "annotations"}

// Template is a Distribution's validated template: the object every region's copy is rendered
// from.
type Template struct {
	// GVK is the template's kind.
	GVK schema.GroupVersionKind
	// Object is the template as written (apiVersion, kind, metadata.labels/annotations, content).
	Object map[string]any
	// Name is the base of the per-region names: the source object's name for spec.source, empty
	// for spec.template (the Distribution's name).
	Name string
	// Field is the spec field the template comes from, for messages: spec.template or spec.source.
	Field string
}

// baseName is the per-region objects' name before the region's suffix (distribution: the
// Distribution's name).
func (t *Template) baseName(distribution string) string {
	if t.Name != "" {
		return t.Name
	}
	return distribution
}

// Rendering is what, beside a template and a region, renders a Distribution's per-region
// objects: the Distribution's namespace and name, the overrides of the revision rendered (the
// spec's, or a stored revision's), and the namespace fan-out it asks for. A revision renders from
// its own content, never through a copy of the Distribution.
type Rendering struct {
	// Namespace and Name are the Distribution's.
	Namespace, Name string
	// Overrides are applied in order to the regions they select.
	Overrides []regionsyncv1alpha1.Override
	// FanOutNamespaces is spec.namespaces ("": no namespace fan-out).
	FanOutNamespaces string
}

// RenderingOf is the rendering of d's spec as it is now.
func RenderingOf(d *regionsyncv1alpha1.Distribution) Rendering {
	return Rendering{Namespace: d.Namespace, Name: d.Name, Overrides: d.Spec.Overrides, FanOutNamespaces: d.Spec.Namespaces}
}

// field is the spec field t comes from.
func (t *Template) field() string {
	if t.Field != "" {
		return t.Field
	}
	return "spec.template"
}

// ParseTemplate decodes and validates spec.template. The error names the offending field; a
// Distribution with an invalid template changes nothing already placed.
func ParseTemplate(raw []byte, keys shard.Keys) (*Template, error) {
	p := field.NewPath("spec", "template")
	if len(raw) == 0 {
		return nil, field.Required(p, "the object to place")
	}
	obj := map[string]any{}
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, field.Invalid(p, "", "not a JSON object: "+err.Error())
	}
	u := &unstructured.Unstructured{Object: obj}
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	switch {
	case u.GetAPIVersion() == "":
		return nil, field.Required(p.Child("apiVersion"), "")
	case err != nil:
		return nil, field.Invalid(p.Child("apiVersion"), u.GetAPIVersion(), err.Error())
	case u.GetKind() == "":
		return nil, field.Required(p.Child("kind"), "")
	}
	gvk := gv.WithKind(u.GetKind())
	if _, ok := obj["status"]; ok {
		return nil, field.Forbidden(p.Child("status"), "the status of a per-region object comes from its region")
	}
	if md, ok := obj["metadata"]; ok {
		m, ok := md.(map[string]any)
		if !ok {
			return nil, field.Invalid(p.Child("metadata"), md, "must be an object")
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(templateMetadata, k) {
				return nil, field.Forbidden(p.Child("metadata", k), "a template sets only metadata.labels and metadata.annotations; the name is the Distribution's plus each region's suffix, the namespace the Distribution's")
			}
		}
		if _, _, err := unstructured.NestedStringMap(obj, "metadata", "labels"); err != nil {
			return nil, field.Invalid(p.Child("metadata", "labels"), "", err.Error())
		}
		if _, _, err := unstructured.NestedStringMap(obj, "metadata", "annotations"); err != nil {
			return nil, field.Invalid(p.Child("metadata", "annotations"), "", err.Error())
		}
	}
	if errs := validateKeys(p.Child("metadata"), u.GetLabels(), u.GetAnnotations(), keys); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return &Template{GVK: gvk, Object: obj}, nil
}

// validateKeys checks the labels and annotations a template or override sets: valid keys and
// label values, none of regionsync's own keys (D/…, the region label) but D/traceparent.
func validateKeys(p *field.Path, lbls, annotations map[string]string, keys shard.Keys) field.ErrorList {
	var errs field.ErrorList
	domain := keys.Domain + "/"
	for _, k := range slices.Sorted(maps.Keys(lbls)) {
		lp := p.Child("labels").Key(k)
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(lp, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(lbls[k]) {
			errs = append(errs, field.Invalid(lp, lbls[k], msg))
		}
		if k == regionsyncv1alpha1.RegionLabel || strings.HasPrefix(k, domain) {
			errs = append(errs, field.Forbidden(lp, "regionsync's own label: the hub sets "+regionsyncv1alpha1.RegionLabel+" and "+keys.Distribution))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		ap := p.Child("annotations").Key(k)
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(ap, k, msg))
		}
		if strings.HasPrefix(k, domain) && k != keys.TraceParent {
			errs = append(errs, field.Forbidden(ap, "regionsync's own annotation: templates and overrides may set none under "+domain+" but "+keys.TraceParent))
		}
	}
	return errs
}

// ObjectName is the per-region object's name: the base name (the Distribution's for a template,
// the source object's for a source) and the region's suffix.
func ObjectName(base string, rs *regionsyncv1alpha1.RegionShard) string {
	return base + rs.RemoteResourceSuffix
}

// Render builds the per-region object of a Distribution (rd) for a region (its name, its registered
// shard, its labels for the overrides' selectors): the template, named ObjectName in d's
// namespace, labelled for the region and the Distribution, then every override that selects the
// region, in order. A patch may not change the name, the namespace, the hub's labels or set
// regionsync's keys; the error names the override.
func Render(rd Rendering, t *Template, region *regionsyncv1alpha1.Region, keys shard.Keys) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: jsonvalue.DeepCopy(t.Object).(map[string]any)}
	name := ObjectName(t.baseName(rd.Name), region.Spec.Shard)
	u.SetName(name)
	u.SetNamespace(rd.Namespace)
	lbls := u.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[regionsyncv1alpha1.RegionLabel] = region.Name
	lbls[keys.Distribution] = rd.Name
	u.SetLabels(lbls)
	fixed := func(o *unstructured.Unstructured) bool {
		return o.GetName() == name && o.GetNamespace() == rd.Namespace &&
			o.GetLabels()[regionsyncv1alpha1.RegionLabel] == region.Name && o.GetLabels()[keys.Distribution] == rd.Name &&
			o.GetAPIVersion() == u.GetAPIVersion() && o.GetKind() == u.GetKind()
	}
	for i, o := range rd.Overrides {
		p := field.NewPath("spec", "overrides").Index(i)
		selects, err := overrideSelects(o, region)
		if err != nil {
			return nil, field.Invalid(p.Child("regionSelector"), "", err.Error())
		}
		if !selects {
			continue
		}
		patched, err := applyOverride(u, o, p)
		if err != nil {
			return nil, err
		}
		if !fixed(patched) {
			return nil, field.Forbidden(p, "a patch may not change the apiVersion, kind, name, namespace, or the labels "+regionsyncv1alpha1.RegionLabel+" and "+keys.Distribution)
		}
		if _, ok := patched.Object["status"]; ok {
			return nil, field.Forbidden(p, "a patch may not set status")
		}
		own := maps.Clone(patched.GetLabels())
		delete(own, regionsyncv1alpha1.RegionLabel)
		delete(own, keys.Distribution)
		if errs := validateKeys(p, own, patched.GetAnnotations(), keys); len(errs) > 0 {
			return nil, errs.ToAggregate()
		}
		if md, _ := patched.Object["metadata"].(map[string]any); md != nil {
			for _, k := range slices.Sorted(maps.Keys(md)) {
				if k != "name" && k != "namespace" && !slices.Contains(templateMetadata, k) {
					return nil, field.Forbidden(p, "a patch may set only metadata.labels and metadata.annotations, not metadata."+k)
				}
			}
		}
		u = patched
	}
	if rd.FanOutNamespaces != "" {
		// Namespace fan-out is asked of the region's agent; overrides may not set it (a
		// regionsync key), so every placed region fans out alike.
		annotations := u.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[keys.FanOutNamespaces] = rd.FanOutNamespaces
		u.SetAnnotations(annotations)
	}
	return u, nil
}

// overrideSelects reports whether an override applies to a region (by name, or by labels).
func overrideSelects(o regionsyncv1alpha1.Override, region *regionsyncv1alpha1.Region) (bool, error) {
	if slices.Contains(o.Regions, region.Name) {
		return true, nil
	}
	if o.RegionSelector == nil {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(o.RegionSelector)
	if err != nil {
		return false, err
	}
	return sel.Matches(labels.Set(region.Labels)), nil
}

// applyOverride applies one override's patch to u.
func applyOverride(u *unstructured.Unstructured, o regionsyncv1alpha1.Override, p *field.Path) (*unstructured.Unstructured, error) {
	doc, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	var out []byte
	switch {
	case o.JSONPatch != nil:
		ops, err := json.Marshal(o.JSONPatch)
		if err != nil {
			return nil, field.Invalid(p.Child("jsonPatch"), "", err.Error())
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			return nil, field.Invalid(p.Child("jsonPatch"), "", err.Error())
		}
		if out, err = patch.Apply(doc); err != nil {
			return nil, field.Invalid(p.Child("jsonPatch"), "", "does not apply: "+err.Error())
		}
	case o.MergePatch != nil:
		if out, err = jsonpatch.MergePatch(doc, o.MergePatch.Raw); err != nil {
			return nil, field.Invalid(p.Child("mergePatch"), "", "does not apply: "+err.Error())
		}
	default:
		return nil, field.Required(p, "one of jsonPatch and mergePatch")
	}
	obj := map[string]any{}
	if err := utiljson.Unmarshal(out, &obj); err != nil {
		return nil, field.Invalid(p, "", "the patched object is not a JSON object: "+err.Error())
	}
	return &unstructured.Unstructured{Object: obj}, nil
}
