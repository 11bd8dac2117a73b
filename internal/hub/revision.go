package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/jsonvalue"
	"github.com/regionsync/regionsync/internal/shard"
)

// RevisionHistoryLimit is how many revisions of a Distribution are kept (as ControllerRevisions);
// the stable and the update revision, and every revision a region still runs, are kept beyond it.
const RevisionHistoryLimit = 10

// RevisionContent is what a revision holds: everything that decides the per-region objects'
// content (the template, or the source objects as placed, and the overrides). The placement is
// not part of it: where an object goes is decided at once, what it holds is rolled out.
type RevisionContent struct {
	// Template is spec.template (empty for a source revision).
	Template runtime.RawExtension `json:"template"`
	// Source: the revision is of spec.source; Objects are then the source objects as they are
	// placed (sorted by name; none when the source selects nothing).
	Source  bool           `json:"source,omitempty"`
	Objects []SourceObject `json:"objects,omitempty"`
	// Overrides are spec.overrides.
	Overrides []regionsyncv1alpha1.Override `json:"overrides,omitempty"`
	// Redacted: the template (or a source object) is a Secret whose data and stringData are
	// stored as hashes only (a revision never holds secret data); such a revision cannot be
	// rendered again.
	Redacted bool `json:"redacted,omitempty"`
}

// SourceObject is one source object in a revision: its name (the per-region objects' base name)
// and the object as placed (apiVersion, kind, labels, annotations and content).
type SourceObject struct {
	Name   string               `json:"name"`
	Object runtime.RawExtension `json:"object"`
}

// secretFields are the fields of a Secret a stored revision holds as hashes only.
var secretFields = []string{"data", "stringData"}

// redactSecret returns raw with a Secret's data and stringData replaced by their hashes, and
// whether raw is a Secret (ok false: raw is returned as it is).
func redactSecret(raw []byte) (out []byte, secret, ok bool) {
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return raw, false, true
	}
	u := unstructured.Unstructured{Object: obj}
	if u.GetAPIVersion() != "v1" || u.GetKind() != "Secret" {
		return raw, false, true
	}
	for _, f := range secretFields {
		if v, ok := obj[f]; ok {
			obj[f] = map[string]any{"sha256": jsonvalue.Hash(v)}
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, true, false
	}
	return out, true, true
}

// Stored is the content as a ControllerRevision holds it: a Secret's data and stringData
// replaced by their hashes (in the template, or in every source object).
func (c RevisionContent) Stored() RevisionContent {
	if c.Source {
		out := RevisionContent{Source: true, Objects: make([]SourceObject, 0, len(c.Objects)), Overrides: c.Overrides}
		for _, o := range c.Objects {
			raw, secret, ok := redactSecret(o.Object.Raw)
			if !ok {
				return RevisionContent{Source: true, Redacted: true}
			}
			out.Redacted = out.Redacted || secret
			out.Objects = append(out.Objects, SourceObject{Name: o.Name, Object: runtime.RawExtension{Raw: raw}})
		}
		if out.Redacted {
			out.Overrides = nil // a patch may carry secret data too
		}
		return out
	}
	raw, secret, ok := redactSecret(c.Template.Raw)
	switch {
	case !ok:
		return RevisionContent{Redacted: true}
	case !secret:
		return c
	}
	// No overrides either: a patch may carry secret data too.
	return RevisionContent{Template: runtime.RawExtension{Raw: raw}, Redacted: true}
}

// Items are the templates a revision renders: its template, or one per source object (kind
// and name as stored). The error names what does not parse.
func (c RevisionContent) Items(keys shard.Keys) ([]*Template, error) {
	if !c.Source {
		t, err := ParseTemplate(c.Template.Raw, keys)
		if err != nil {
			return nil, err
		}
		return []*Template{t}, nil
	}
	out := make([]*Template, 0, len(c.Objects))
	for _, o := range c.Objects {
		obj := map[string]any{}
		if err := utiljson.Unmarshal(o.Object.Raw, &obj); err != nil {
			return nil, fmt.Errorf("source object %s of the revision: %w", o.Name, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		if err != nil || u.GetKind() == "" || o.Name == "" {
			return nil, fmt.Errorf("source object %q of the revision has no valid apiVersion, kind and name", o.Name)
		}
		out = append(out, &Template{GVK: gv.WithKind(u.GetKind()), Object: obj, Name: o.Name, Field: "spec.source"})
	}
	return out, nil
}

// Revision is one revision of a Distribution: its name (the ControllerRevision's, written as
// D/revision on every per-region object rendered from it), its number and its content.
type Revision struct {
	Name    string
	Number  int64
	Content RevisionContent
}

// contentOf is the revision content of a Distribution as it is now: its template and overrides,
// or, with spec.source, the source objects as placed (items, sorted by name) and the overrides.
// The error says a source object cannot be encoded.
func contentOf(d *regionsyncv1alpha1.Distribution, items []*Template) (RevisionContent, error) {
	if d.Spec.Source == nil {
		return RevisionContent{Template: *d.Spec.Template.DeepCopy(), Overrides: d.Spec.Overrides}, nil
	}
	c := RevisionContent{Source: true, Overrides: d.Spec.Overrides, Objects: make([]SourceObject, 0, len(items))}
	for _, t := range items {
		raw, err := json.Marshal(t.Object)
		if err != nil {
			return c, fmt.Errorf("encoding source object %s: %w", t.Name, err)
		}
		c.Objects = append(c.Objects, SourceObject{Name: t.Name, Object: runtime.RawExtension{Raw: raw}})
	}
	slices.SortFunc(c.Objects, func(a, b SourceObject) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

// RevisionName is the name of the revision of content for Distribution name: the name and a hash
// of the content, so that the same content is always the same revision.
func RevisionName(name string, c RevisionContent) string {
	var v any
	raw, err := json.Marshal(c)
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	if err != nil {
		return name + "-unhashable"
	}
	return name + "-" + jsonvalue.Hash(v)[:10]
}

// rendering is what renders this revision for d: d's identity and fan-out with the revision's
// overrides (its template or source objects are its Items).
func (c RevisionContent) rendering(d *regionsyncv1alpha1.Distribution) Rendering {
	rd := RenderingOf(d)
	rd.Overrides = c.Overrides
	return rd
}

// revisions lists a Distribution's stored revisions by name (from the hub's cache of objects
// labelled D/distribution; only those the Distribution owns).
func (r *DistributionReconciler) revisions(ctx context.Context, d *regionsyncv1alpha1.Distribution) (map[string]Revision, error) {
	var list appsv1.ControllerRevisionList
	if err := r.Objects.List(ctx, &list, client.InNamespace(d.Namespace), client.MatchingLabels{r.Keys.Distribution: d.Name}); err != nil {
		return nil, fmt.Errorf("listing the revisions of Distribution %s: %w", client.ObjectKeyFromObject(d), err)
	}
	out := make(map[string]Revision, len(list.Items))
	for i := range list.Items {
		cr := &list.Items[i]
		if !metav1.IsControlledBy(cr, d) {
			continue
		}
		var c RevisionContent
		if err := json.Unmarshal(cr.Data.Raw, &c); err != nil {
			continue // not one of ours: never used, never deleted by content
		}
		out[cr.Name] = Revision{Name: cr.Name, Number: cr.Revision, Content: c}
	}
	return out, nil
}

// ensureRevision stores the revision of content c (contentOf d as it is now) as a
// ControllerRevision owned by d, numbered after every other (an old revision that comes back is
// renumbered), and returns it.
func (r *DistributionReconciler) ensureRevision(ctx context.Context, d *regionsyncv1alpha1.Distribution, have map[string]Revision, c RevisionContent) (Revision, error) {
	name := RevisionName(d.Name, c)
	var highest int64
	for _, rev := range have {
		highest = max(highest, rev.Number)
	}
	if rev, ok := have[name]; ok {
		if rev.Number == highest {
			return rev, nil
		}
		patch := []byte(`{"revision":` + strconv.FormatInt(highest+1, 10) + `}`)
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: name}}
		if err := r.Client.Patch(ctx, cr, client.RawPatch("application/merge-patch+json", patch), client.FieldOwner(FieldManager)); err != nil {
			return rev, fmt.Errorf("renumbering revision %s/%s: %w", d.Namespace, name, err)
		}
		rev.Number = highest + 1
		have[name] = rev
		return rev, nil
	}
	raw, err := json.Marshal(c.Stored())
	if err != nil {
		return Revision{}, fmt.Errorf("encoding the revision of Distribution %s: %w", client.ObjectKeyFromObject(d), err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: d.Namespace, Name: name,
			Labels: map[string]string{r.Keys.Distribution: d.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: regionsyncv1alpha1.GroupVersion.String(), Kind: "Distribution",
				Name: d.Name, UID: d.UID, Controller: ptr.To(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: highest + 1,
	}
	if err := r.Client.Create(ctx, cr, client.FieldOwner(FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return Revision{}, fmt.Errorf("storing revision %s/%s: %w", d.Namespace, name, err)
	}
	rev := Revision{Name: name, Number: highest + 1, Content: c}
	have[name] = rev
	return rev, nil
}

// pruneRevisions deletes the oldest revisions beyond RevisionHistoryLimit, never one in use.
func (r *DistributionReconciler) pruneRevisions(ctx context.Context, d *regionsyncv1alpha1.Distribution, have map[string]Revision, inUse map[string]bool) error {
	victims := revisionsToPrune(have, inUse, RevisionHistoryLimit)
	for _, name := range victims {
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: name}}
		if err := r.Client.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("pruning revision %s/%s: %w", d.Namespace, name, err)
		}
		delete(have, name)
	}
	return nil
}

// revisionsToPrune names the revisions to delete so that at most limit are kept: the oldest
// first, never one in use.
func revisionsToPrune(have map[string]Revision, inUse map[string]bool, limit int) []string {
	if len(have) <= limit {
		return nil
	}
	all := make([]Revision, 0, len(have))
	for _, rev := range have {
		all = append(all, rev)
	}
	slices.SortFunc(all, func(a, b Revision) int {
		return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.Name, b.Name))
	})
	var out []string
	excess := len(all) - limit
	for _, rev := range all {
		if excess == 0 {
			break
		}
		if inUse[rev.Name] {
			continue
		}
		out = append(out, rev.Name)
		excess--
	}
	return out
}
