package hub

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
)

// PreviewRequest is a Distribution, or a source object, as it would be, and where to read the
// rest. A preview writes nothing: every write it needs is a server-side dry run.
type PreviewRequest struct {
	// Client reads management as the caller: the Distribution as it is, the Regions, the
	// per-region objects, the other Distributions of the namespace. The Distribution as it
	// would be is sent to it as a dry run, so the API server defaults and validates it (its
	// schema, its CEL rules, the admission policies) as it would the real write.
	Client client.Client
	// Writers act as the Distribution's ServiceAccount, as the hub does: the source objects are
	// read, and each per-region object applied with dryRun=All, through them (so a preview
	// refuses what the hub's write would).
	Writers *Writers
	// Keys are the fleet's keys (the hub's annotation domain).
	Keys shard.Keys
	// DefaultServiceAccountName and AllowSecrets are the hub configuration's.
	DefaultServiceAccountName string
	AllowSecrets              bool
	// Distribution is the Distribution as it would be.
	Distribution *regionsyncv1alpha1.Distribution
	// Source, when set, is one of the Distribution's source objects as it would be: it stands
	// in for the one on management (a source edited locally).
	Source *unstructured.Unstructured
	// Guard judges the removals (its memory read, never written); nil: a guard whose windows
	// are empty.
	Guard *ShrinkGuard
	// Now is the clock the guard's windows are judged against.
	Now time.Time
}

// Change is what a preview says the hub would do to one per-region object.
type Change string

// The changes of a preview.
const (
	// ChangeCreate: the object does not exist; the hub would create it.
	ChangeCreate Change = "Create"
	// ChangeUpdate: the hub would change the object.
	ChangeUpdate Change = "Update"
	// ChangeNone: the object is as the hub would write it.
	ChangeNone Change = "None"
	// ChangeRemove: the hub would remove the object (its region left the placement, its source
	// is gone, or its kind changed).
	ChangeRemove Change = "Remove"
	// ChangeRemoveHeld: the hub would want to remove the object, and the shrink guard would
	// hold the removal.
	ChangeRemoveHeld Change = "RemoveHeld"
	// ChangeNotPlaced: nothing is written for the region (Unplaceable, Failed or Conflict,
	// as State says); what it has stays.
	ChangeNotPlaced Change = "NotPlaced"
)

// Preview is what a Distribution as given would do, region by region, computed by the hub's own
// rules (the selection, Place, Render, the rollout's waves, the shrink guard) with its writes
// sent as dry runs.
type Preview struct {
	// Distribution names it.
	Distribution types.NamespacedName
	// New: the Distribution does not exist yet.
	New bool
	// Kind is the apiVersion/kind placed.
	Kind string
	// Revision is the revision the per-region objects would carry (D/revision).
	Revision string
	// Strategy is spec.strategy.type; Waves the waves of a Progressive rollout, in order.
	Strategy regionsyncv1alpha1.RolloutStrategyType
	Waves    []Wave
	// Invalid says why the spec cannot be placed: the hub would change nothing.
	Invalid string
	// Note says that the source named does not exist (yet) or the selector matches nothing.
	Note string
	// Regions are the selected regions and those that would lose objects, wave by wave (those in
	// no wave last), then by name.
	Regions []RegionPreview
	// Held and HeldWhy: the shrink guard would hold the removals, and why.
	Held    bool
	HeldWhy string
	// GuardNote says the shrink guard's memory could not be read (the removals were judged
	// without it).
	GuardNote string
}

// RegionPreview is one region of a Preview.
type RegionPreview struct {
	// Region is the Region's name.
	Region string
	// Wave is the region's wave in a Progressive rollout, from 1 (0: not in a rollout); WaveName
	// names it.
	Wave     int
	WaveName string
	// Objects are the region's per-region objects the preview is about.
	Objects []ObjectPreview
}

// ObjectPreview is one per-region object of a Preview.
type ObjectPreview struct {
	// Name is the per-region object's name ("" when none renders).
	Name string
	// Change is what the hub would do.
	Change Change
	// State, Reason and Message are the region's status entry when nothing is written
	// (Unplaceable, Failed, Conflict) or a removal is held.
	State           regionsyncv1alpha1.PlacementState
	Reason, Message string
	// Live is the object on management now (nil: none); Result the object the hub's write
	// would leave (the API server's answer to the dry run; nil: none). Both as Comparable.
	Live, Result *unstructured.Unstructured
}

// Changed reports whether the preview changes anything.
func (p *Preview) Changed() bool {
	for _, r := range p.Regions {
		for _, o := range r.Objects {
			if o.Change != ChangeNone && o.Change != ChangeNotPlaced {
				return true
			}
		}
	}
	return false
}

// Comparable is a per-region object without what the API server or a trace writes on it
// (status, managedFields, uid, resourceVersion, generation, creationTimestamp, D/traceparent):
// what a preview compares and shows.
func Comparable(u *unstructured.Unstructured, keys shard.Keys) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	c := u.DeepCopy()
	delete(c.Object, "status")
	for _, f := range []string{"managedFields", "uid", "resourceVersion", "generation", "creationTimestamp", "selfLink"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	if a := c.GetAnnotations(); a != nil {
		delete(a, keys.TraceParent)
		if len(a) == 0 {
			a = nil
		}
		c.SetAnnotations(a)
	}
	return c
}

// DistributionsOfSource lists the Distributions of src's namespace whose spec.source selects
// src, as given or as it is on management (so that a change that unselects it shows as the
// removal it is).
func DistributionsOfSource(ctx context.Context, c client.Client, src *unstructured.Unstructured) ([]regionsyncv1alpha1.Distribution, error) {
	gvk := src.GroupVersionKind()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	err := c.Get(ctx, client.ObjectKeyFromObject(src), live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, fmt.Errorf("reading %s %s/%s on management: %w", shard.KindName(gvk), src.GetNamespace(), src.GetName(), err)
	}
	var list regionsyncv1alpha1.DistributionList
	if err := c.List(ctx, &list, client.InNamespace(src.GetNamespace())); err != nil {
		return nil, fmt.Errorf("listing the Distributions of namespace %s: %w", src.GetNamespace(), err)
	}
	var out []regionsyncv1alpha1.Distribution
	for _, d := range list.Items {
		if sourceSelects(&d, gvk, src.GetName(), src.GetLabels()) || (live != nil && sourceSelects(&d, gvk, live.GetName(), live.GetLabels())) {
			out = append(out, d)
		}
	}
	return out, nil
}

// PreviewDistribution previews req.Distribution (with req.Source in place of its source object
// of that name). An error means the preview could not be computed (a read failed, or the API
// server refuses the Distribution itself, naming the field); a spec the hub would refuse to
// place is Invalid in the Preview.
func PreviewDistribution(ctx context.Context, req PreviewRequest) (*Preview, error) {
	d, isNew, err := dryRunDistribution(ctx, req.Client, req.Distribution)
	if err != nil {
		return nil, err
	}
	p := &Preview{Distribution: client.ObjectKeyFromObject(d), New: isNew, Strategy: d.Spec.Strategy.Type}
	guard := req.Guard
	if guard == nil {
		guard = &ShrinkGuard{Window: DefaultShrinkWindow}
	}
	r := &DistributionReconciler{
		Client: req.Client, APIReader: req.Client, reader: req.Client, Keys: req.Keys, Writers: req.Writers, Guard: guard,
		DefaultServiceAccountName: req.DefaultServiceAccountName, AllowSecrets: req.AllowSecrets,
		Now: func() time.Time { return req.Now },
	}
	var regions regionsyncv1alpha1.RegionList
	if err := req.Client.List(ctx, &regions); err != nil {
		return nil, fmt.Errorf("listing Regions: %w", err)
	}
	var wrap func(client.Client) client.Client
	if req.Source != nil {
		wrap = func(c client.Client) client.Client { return &sourceOverlay{Client: c, obj: req.Source} }
	}
	sp, specErr, err := r.resolveSpec(ctx, d, regions.Items, wrap)
	if err != nil {
		return nil, err
	}
	gvk, w, items, selected, note := sp.gvk, sp.w, sp.items, sp.selected, sp.note
	var content RevisionContent
	if specErr == nil {
		content, specErr = contentOf(d, items)
	}
	if specErr != nil {
		p.Invalid = specErr.Error()
		return p, nil
	}
	if note != nil {
		p.Note = note.Error()
	}
	p.Kind = gvk.GroupVersion().String() + "/" + gvk.Kind
	p.Revision = RevisionName(d.Name, content)
	existing := map[schema.GroupVersionKind]map[string]*unstructured.Unstructured{}
	for _, k := range placedKinds(d, gvk) {
		objs, err := previewOwned(ctx, req.Client, d, k, r.Keys)
		if err != nil {
			return nil, err
		}
		existing[k] = objs
	}
	byRegion := map[string]*regionsyncv1alpha1.Region{}
	for i := range regions.Items {
		byRegion[regions.Items[i].Name] = &regions.Items[i]
	}
	placed := placeAll(RenderingOf(d), items, selected, regions.Items, r.Keys)
	waveOf, err := p.assignWaves(d, placed, byRegion)
	if err != nil {
		p.Invalid = err.Error()
		return p, nil
	}
	out := map[string]*RegionPreview{}
	regionOf := func(name string) *RegionPreview {
		if out[name] == nil {
			out[name] = &RegionPreview{Region: name}
			if i, ok := waveOf[name]; ok {
				out[name].Wave, out[name].WaveName = i+1, p.Waves[i].Name
			}
		}
		return out[name]
	}
	kept := newKeeping(d, gvk, items, existing[gvk], byRegion)
	for _, tg := range placed {
		kept.note(tg)
		rp := regionOf(tg.Region)
		if tg.Object == nil {
			rp.Objects = append(rp.Objects, ObjectPreview{Change: ChangeNotPlaced, State: tg.State, Reason: tg.Reason, Message: tg.Message})
			continue
		}
		markRevision(tg.Object, r.Keys.Revision, p.Revision)
		rp.Objects = append(rp.Objects, r.previewApply(ctx, d, w, kept.item(tg), tg, existing[gvk][tg.Object.GetName()], regions.Items))
	}
	if err := r.previewRemovals(ctx, d, p, existing, kept, byRegion, regionOf); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		p.Regions = append(p.Regions, *out[name])
	}
	// In the order the rollout reaches them: wave by wave, then by name (the regions in no wave
	// last).
	slices.SortStableFunc(p.Regions, func(a, b RegionPreview) int {
		wa, wb := a.Wave, b.Wave
		if wa == 0 {
			wa = math.MaxInt
		}
		if wb == 0 {
			wb = math.MaxInt
		}
		return cmp.Compare(wa, wb)
	})
	return p, nil
}

// dryRunDistribution sends d to the API server as a dry run (a create, or an update of the one
// that exists) and returns it as the server would store it: defaulted, validated, with the
// existing one's identity and status. isNew: none exists yet.
func dryRunDistribution(ctx context.Context, c client.Client, d *regionsyncv1alpha1.Distribution) (_ *regionsyncv1alpha1.Distribution, isNew bool, _ error) {
	key := client.ObjectKeyFromObject(d)
	live := &regionsyncv1alpha1.Distribution{}
	err := c.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		isNew, live = true, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading Distribution %s: %w", key, err)
	}
	out := d.DeepCopy()
	out.SetGroupVersionKind(regionsyncv1alpha1.GroupVersion.WithKind("Distribution"))
	if isNew {
		out.ResourceVersion = ""
		err = c.Create(ctx, out, client.DryRunAll)
	} else {
		out.ResourceVersion = live.ResourceVersion
		out.Finalizers = live.Finalizers
		err = c.Update(ctx, out, client.DryRunAll)
	}
	if err != nil {
		return nil, false, fmt.Errorf("the API server refuses Distribution %s as given: %w", key, err)
	}
	if live != nil {
		out.Status = live.Status
	}
	return out, isNew, nil
}

// previewOwned lists d's per-region objects of kind gvk, by name (none when the kind is not
// served any more).
func previewOwned(ctx context.Context, c client.Reader, d *regionsyncv1alpha1.Distribution, gvk schema.GroupVersionKind, keys shard.Keys) (map[string]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(shard.ListGVK(gvk))
	err := c.List(ctx, list, client.InNamespace(d.Namespace), client.MatchingLabels{keys.Distribution: d.Name})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s of Distribution %s: %w", shard.KindName(gvk), client.ObjectKeyFromObject(d), err)
	}
	out := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out, nil
}

// assignWaves sets p.Waves for a Progressive rollout (the hub's AssignWaves over the placeable
// regions, as regionViews takes them) and returns each region's wave index.
func (p *Preview) assignWaves(d *regionsyncv1alpha1.Distribution, placed []Target, byRegion map[string]*regionsyncv1alpha1.Region) (map[string]int, error) {
	if d.Spec.Strategy.Type != regionsyncv1alpha1.RolloutProgressive {
		return nil, nil
	}
	placeable := map[string]bool{}
	for _, tg := range placed {
		if byRegion[tg.Region] != nil && (tg.Object != nil || tg.State == regionsyncv1alpha1.PlacementFailed) {
			placeable[tg.Region] = true
		}
	}
	views := make([]RegionView, 0, len(placeable))
	for _, name := range slices.Sorted(maps.Keys(placeable)) {
		views = append(views, RegionView{Name: name, Labels: byRegion[name].Labels})
	}
	waves, err := AssignWaves(d.Spec.Strategy, views)
	if err != nil {
		return nil, err
	}
	p.Waves = waves
	out := map[string]int{}
	for i, w := range waves {
		for _, region := range w.Regions {
			out[region] = i
		}
	}
	return out, nil
}

// previewApply is apply as a dry run: the same conflict rules, then the server-side apply the hub
// would send (its field manager, as the Distribution's ServiceAccount) with dryRun=All.
func (r *DistributionReconciler) previewApply(ctx context.Context, d *regionsyncv1alpha1.Distribution, w writer, t *Template, tg Target, existing *unstructured.Unstructured, regions []regionsyncv1alpha1.Region) ObjectPreview {
	obj := tg.Object
	op := ObjectPreview{Name: obj.GetName()}
	notPlaced := func(state regionsyncv1alpha1.PlacementState, reason, msg string) ObjectPreview {
		op.Change, op.State, op.Reason, op.Message = ChangeNotPlaced, state, reason, msg
		return op
	}
	if existing == nil {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), live)
		switch {
		case err == nil && live.GetLabels()[r.Keys.Distribution] != d.Name:
			return notPlaced(regionsyncv1alpha1.PlacementConflict, regionsyncv1alpha1.ReasonConflict, conflictMessage(obj, live, r.Keys))
		case err == nil:
			existing = live
		case !apierrors.IsNotFound(err):
			return notPlaced(regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.ReasonApplyFailed, err.Error())
		default:
			if o := r.olderWanting(ctx, d, t, tg.Region, regions); o != nil {
				return notPlaced(regionsyncv1alpha1.PlacementConflict, regionsyncv1alpha1.ReasonConflict, fmt.Sprintf(
					"%s %s/%s is wanted also by Distribution %s, older, which places it", shard.KindName(obj.GroupVersionKind()), obj.GetNamespace(), obj.GetName(), o.Name))
			}
		}
	}
	result := obj.DeepCopy()
	if err := w.Apply(ctx, client.ApplyConfigurationFromUnstructured(result), client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
		return notPlaced(regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.ReasonApplyFailed,
			fmt.Sprintf("writing %s %s/%s as %s: %v", shard.KindName(obj.GroupVersionKind()), obj.GetNamespace(), obj.GetName(), w, err))
	}
	op.Live, op.Result = Comparable(existing, r.Keys), Comparable(result, r.Keys)
	switch {
	case existing == nil:
		op.Change = ChangeCreate
	case equality.Semantic.DeepEqual(op.Live.Object, op.Result.Object):
		op.Change = ChangeNone
	default:
		op.Change = ChangeUpdate
	}
	return op
}

// previewRemovals adds the objects the hub would remove, and whether the shrink guard would hold
// them: the guard's rule over its memory as it is, each region's size counted over every kind a
// Distribution places, as the hub counts it.
func (r *DistributionReconciler) previewRemovals(ctx context.Context, d *regionsyncv1alpha1.Distribution, p *Preview, existing map[schema.GroupVersionKind]map[string]*unstructured.Unstructured,
	kept *keeping, byRegion map[string]*regionsyncv1alpha1.Region, regionOf func(string) *RegionPreview,
) error {
	remove, _, removal := leaving(existing, kept.keeps, byRegion)
	if len(remove) == 0 {
		return nil
	}
	slices.SortFunc(remove, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	var all regionsyncv1alpha1.DistributionList
	if err := r.Client.List(ctx, &all); err != nil {
		return fmt.Errorf("listing Distributions (the kinds they place): %w", err)
	}
	r.watched = map[schema.GroupVersionKind]bool{kept.gvk: true}
	for _, o := range all.Items {
		if gvk, err := placedGVK(o.Status.PlacedKind); err == nil && !gvk.Empty() {
			r.watched[gvk] = true
		}
	}
	removal, err := r.removalOf(ctx, d, remove, removal)
	if err != nil {
		return err
	}
	dec, err := r.Guard.Judge(ctx, client.ObjectKeyFromObject(d), r.Now(), removal)
	if err != nil {
		// The guard's memory is the hub's: a caller who may not read it still sees the budgets.
		p.GuardNote = fmt.Sprintf("%v; judged as if no removal had been counted within the window and nothing held", err)
		if dec, err = (&ShrinkGuard{Window: DefaultShrinkWindow}).Judge(ctx, client.ObjectKeyFromObject(d), r.Now(), removal); err != nil {
			return err
		}
	}
	p.Held, p.HeldWhy = !dec.Allowed, dec.Why
	for _, o := range remove {
		op := ObjectPreview{Name: o.GetName(), Change: ChangeRemove, Live: Comparable(o, r.Keys)}
		if p.Held {
			op.Change, op.State, op.Reason, op.Message = ChangeRemoveHeld, regionsyncv1alpha1.PlacementRemovalHeld, regionsyncv1alpha1.ReasonHeld, "the removal would be held by the shrink guard: "+dec.Why
		}
		rp := regionOf(o.GetLabels()[regionsyncv1alpha1.RegionLabel])
		rp.Objects = append(rp.Objects, op)
	}
	return nil
}

// sourceOverlay reads management with one source object as it would be in place of the one
// stored: a Get of its name returns it, a List of its kind and namespace has it instead (or
// without it, when it no longer matches the list's selector).
type sourceOverlay struct {
	client.Client
	obj *unstructured.Unstructured
}

func (s *sourceOverlay) is(gvk schema.GroupVersionKind, namespace string) bool {
	o := s.obj.GroupVersionKind()
	return gvk.Group == o.Group && gvk.Kind == o.Kind && namespace == s.obj.GetNamespace()
}

// Get returns the overlaid object for its name.
func (s *sourceOverlay) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if u, ok := obj.(*unstructured.Unstructured); ok && s.is(u.GroupVersionKind(), key.Namespace) && key.Name == s.obj.GetName() {
		s.obj.DeepCopyInto(u)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// List lists and puts the overlaid object in place of the stored one.
func (s *sourceOverlay) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ul, ok := list.(*unstructured.UnstructuredList)
	if !ok {
		return s.Client.List(ctx, list, opts...)
	}
	gvk := ul.GroupVersionKind()
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	if err := s.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	if !s.is(gvk, lo.Namespace) {
		return nil
	}
	ul.Items = slices.DeleteFunc(ul.Items, func(u unstructured.Unstructured) bool { return u.GetName() == s.obj.GetName() })
	if lo.LabelSelector == nil || lo.LabelSelector.Matches(labels.Set(s.obj.GetLabels())) {
		ul.Items = append(ul.Items, *s.obj.DeepCopy())
	}
	return nil
}
