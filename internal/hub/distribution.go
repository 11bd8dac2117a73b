package hub

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/jsonvalue"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// FieldManager is the hub's field manager: it owns, on every per-region object, exactly the
// fields it renders, so the agents' finalizer, generation annotations and status are never
// touched by its writes.
const FieldManager = "regionsync-hub"

// Event reasons of the hub (on Distributions).
const (
	EventConflict     = "Conflict"
	EventRemovalHeld  = "RemovalHeld"
	EventInvalidSpec  = "InvalidSpec"
	EventRemoved      = "Removed"
	EventOrphaned     = "Orphaned"
	eventActionPlace  = "Place"
	eventActionRemove = "Remove"
)

// errNotSynced: a cache of per-region objects has not synced yet; nothing is removed until it has.
var errNotSynced = errors.New("the per-region objects' cache has not synced yet")

// DistributionReconciler places Distributions: per placed region it writes the per-region object
// by server-side apply, removes the objects of regions that left the placement (through the
// shrink guard), honours deletionPolicy through its finalizer, and reports one status.
// Reconcile runs its phases in order (finalize, add finalizer, deploy, status), the status
// written once at the end.
type DistributionReconciler struct {
	// Client is the manager's client (Distributions and Regions from its cache).
	Client client.Client
	// APIReader reads from the API server: whether a per-region name is taken by an object
	// this Distribution does not control.
	APIReader client.Reader
	// Objects caches the per-region objects (only those labelled D/distribution).
	Objects cache.Cache
	// Keys are the fleet's keys (annotation domain D).
	Keys shard.Keys
	// Recorder posts Events on Distributions.
	Recorder events.EventRecorder
	// Guard is the shrink guard.
	Guard *ShrinkGuard
	// Tracer traces every reconcile (a no-op tracer when tracing is off).
	Tracer trace.Tracer
	// Concurrency is the number of workers.
	Concurrency int
	// Now is the clock (time.Now).
	Now func() time.Time
	// Writers write the per-region objects (apply, delete, orphan) as the Distribution's
	// ServiceAccount; reads stay on the hub's own identity and caches.
	Writers *Writers
	// DefaultServiceAccountName is written as for a Distribution naming none ("" : such a
	// Distribution places nothing).
	DefaultServiceAccountName string
	// Sources caches the metadata of source objects (spec.source), whose changes wake the
	// Distributions selecting them.
	Sources cache.Cache
	// AllowSecrets lets Distributions place Secrets (the hub configuration's allowSecrets).
	AllowSecrets bool

	// reader, when set, reads the per-region objects instead of Objects (a Preview, which has
	// no cache, reads the API server).
	reader client.Reader

	ctrl controller.Controller
	// watchErrs are the per-region objects' cache's errors by kind (nil: not recorded).
	watchErrs *watchErrors
	mu        sync.Mutex
	watched   map[schema.GroupVersionKind]bool
	// indexed are the kinds whose per-region objects are indexed by Distribution (once each: an
	// informer refuses a second index of one name).
	indexed map[schema.GroupVersionKind]bool
	// sourceWatched are the source kinds watched.
	sourceWatched map[schema.GroupVersionKind]bool
	// waiting: per per-region object, the Distributions reporting a Conflict on it, woken when it
	// changes (it may have been released).
	waiting    map[types.NamespacedName]map[types.NamespacedName]bool
	applied    map[appliedKey]appliedDigest // per object: what the hub last applied
	lastStatus map[types.NamespacedName]time.Time
	totals     distributionTotals
	health     healthRules
	// rolloutPosted dedupes the rollout's Events, haltsWritten remembers the halts written
	// until the cache shows them (the rollout phase, rolloutTargets).
	rolloutPosted map[types.NamespacedName]postedEvents
	haltsWritten  map[types.NamespacedName]writtenHalt
}

// SetupWithManager registers the controller (named regionsync-hub-distribution): Distributions,
// Regions (spec and label changes only) and, added as they are first placed, each kind of
// per-region object.
func (r *DistributionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.watched, r.indexed, r.applied, r.lastStatus = map[schema.GroupVersionKind]bool{}, map[schema.GroupVersionKind]bool{}, map[appliedKey]appliedDigest{}, map[types.NamespacedName]time.Time{}
	if r.Now == nil {
		r.Now = time.Now
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&regionsyncv1alpha1.Distribution{}).
		Watches(&regionsyncv1alpha1.Region{}, handler.EnqueueRequestsFromMapFunc(r.everyDistribution), builderRegionPredicates()).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Concurrency}).
		Named("regionsync-hub-distribution").
		Build(r)
	if err != nil {
		return err
	}
	r.ctrl = c
	return nil
}

// everyDistribution maps a Region change to every Distribution: any may select it.
func (r *DistributionReconciler) everyDistribution(ctx context.Context, _ client.Object) []ctrl.Request {
	var list regionsyncv1alpha1.DistributionList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// ensureWatch watches the per-region objects of kind gvk (once per kind) and reports whether
// their cache has synced.
func (r *DistributionReconciler) ensureWatch(ctx context.Context, gvk schema.GroupVersionKind) (bool, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	r.mu.Lock()
	if !r.indexed[gvk] {
		// Indexed by Distribution: a Distribution's objects are found among every Distribution's
		// (tens of thousands in one namespace) without a scan.
		if err := r.Objects.IndexField(ctx, u, distributionIndex, r.distributionOf); err != nil {
			r.mu.Unlock()
			return false, fmt.Errorf("indexing %s by Distribution: %w", shard.KindName(gvk), err)
		}
		r.indexed[gvk] = true
	}
	if !r.watched[gvk] {
		toDistribution := handler.EnqueueRequestsFromMapFunc(r.perRegionRequests)
		if err := r.ctrl.Watch(source.Kind[client.Object](r.Objects, u, toDistribution)); err != nil {
			r.mu.Unlock()
			return false, fmt.Errorf("watching %s: %w", shard.KindName(gvk), err)
		}
		r.watched[gvk] = true
	}
	r.mu.Unlock()
	inf, err := r.Objects.GetInformer(ctx, u, cache.BlockUntilSynced(false))
	if err != nil {
		return false, fmt.Errorf("watching %s: %w", shard.KindName(gvk), err)
	}
	return inf.HasSynced(), nil
}

// distributionIndex is the per-region objects' index by the Distribution they are labelled for
// (D/distribution).
const distributionIndex = "regionsync.distribution"

// objects reads the per-region objects: the cache, or a Preview's reader.
func (r *DistributionReconciler) objects() client.Reader {
	if r.reader != nil {
		return r.reader
	}
	return r.Objects
}

// distributionOf is distributionIndex's value of a per-region object.
func (r *DistributionReconciler) distributionOf(o client.Object) []string {
	if name := o.GetLabels()[r.Keys.Distribution]; name != "" {
		return []string{name}
	}
	return nil
}

// owned lists a Distribution's per-region objects of one kind, by name.
func (r *DistributionReconciler) owned(ctx context.Context, d *regionsyncv1alpha1.Distribution, gvk schema.GroupVersionKind) (map[string]*unstructured.Unstructured, error) {
	synced, err := r.ensureWatch(ctx, gvk)
	if err != nil {
		return nil, err
	}
	if !synced {
		return nil, &kindNotSynced{gvk: gvk} // reported by waitForKind
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(shard.ListGVK(gvk))
	if err := r.Objects.List(ctx, list, client.InNamespace(d.Namespace), client.MatchingFields{distributionIndex: d.Name},
		client.MatchingLabels{r.Keys.Distribution: d.Name}); err != nil {
		return nil, fmt.Errorf("listing %s of Distribution %s: %w", shard.KindName(gvk), client.ObjectKeyFromObject(d), err)
	}
	out := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out, nil
}

// Reconcile runs the phases over one Distribution.
func (r *DistributionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	d := &regionsyncv1alpha1.Distribution{}
	if err := r.Client.Get(ctx, req.NamespacedName, d); err != nil {
		if apierrors.IsNotFound(err) {
			if err := r.Guard.Forget(ctx, req.NamespacedName); err != nil {
				log.Error(err, "forgetting the shrink guard's record of a deleted Distribution", "distribution", req)
			}
			r.totals.forget(req.NamespacedName)
			r.forgetWaits(req.NamespacedName)
			r.mu.Lock()
			delete(r.lastStatus, req.NamespacedName)
			delete(r.rolloutPosted, req.NamespacedName)
			delete(r.haltsWritten, req.NamespacedName)
			r.mu.Unlock()
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	ctx = telemetry.ContextFromTraceparent(ctx, d.Annotations[r.Keys.TraceParent])
	ctx, span := r.Tracer.Start(ctx, "Distribution.Reconcile", trace.WithAttributes(attribute.String("regionsync.distribution", req.String())))
	defer span.End()

	if d.DeletionTimestamp != nil {
		return r.finalize(ctx, d)
	}
	if !controllerutil.ContainsFinalizer(d, r.Keys.HubFinalizer) {
		orig := d.DeepCopy()
		controllerutil.AddFinalizer(d, r.Keys.HubFinalizer)
		if err := r.Client.Patch(ctx, d, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer to Distribution %s: %w", req, err)
		}
	}
	in, err := r.deploy(ctx, d)
	if errors.Is(err, errNotSynced) {
		log.V(1).Info("waiting for the per-region objects' cache", "distribution", req, "reason", err.Error())
		return r.waitForKind(ctx, d, err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	st := ComputeStatus(d, in, r.Now())
	setRolloutStatus(&st, d, in.Rollout)
	r.totals.set(req.NamespacedName, st.Counts)
	after, err := r.writeStatus(ctx, d, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	if in.Rollout != nil {
		after = minPositive(after, in.Rollout.RequeueAfter)
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// deploy renders and writes every placed region's objects and removes the objects of regions
// that left the placement, of sources that are gone and of a previous kind, through the shrink
// guard. A spec that cannot be rendered changes nothing.
func (r *DistributionReconciler) deploy(ctx context.Context, d *regionsyncv1alpha1.Distribution) (StatusInput, error) {
	in := StatusInput{PlacedKind: d.Status.PlacedKind, ConfirmKey: r.Keys.ConfirmRemovalsBefore}
	rule, ruleErr := r.health.get(d.Spec.Health)
	in.InvalidHealthRule = ruleErr
	var regions regionsyncv1alpha1.RegionList
	if err := r.Client.List(ctx, &regions); err != nil {
		return in, fmt.Errorf("listing Regions: %w", err)
	}
	sp, specErr, err := r.resolveSpec(ctx, d, regions.Items, nil)
	if err != nil {
		return in, err
	}
	gvk, w, items, selected := sp.gvk, sp.w, sp.items, sp.selected
	in.NotApplied = sp.note
	// The objects this Distribution has, of its kind and of the kind it placed before.
	existing := map[schema.GroupVersionKind]map[string]*unstructured.Unstructured{}
	for _, k := range placedKinds(d, gvk) {
		objs, err := r.owned(ctx, d, k)
		if err != nil {
			return in, err
		}
		existing[k] = objs
	}
	if specErr != nil {
		in.InvalidSpec = specErr
		if !isConditionMessage(d, regionsyncv1alpha1.DistributionApplied, specErr.Error()) {
			r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, EventInvalidSpec, eventActionPlace, "%v; nothing placed was changed", specErr)
		}
		for _, objs := range existing {
			for _, o := range objs {
				in.Entries = append(in.Entries, entryFor(o, o.GetLabels()[regionsyncv1alpha1.RegionLabel], r.Keys, rule))
			}
		}
		in.Entries = regionEntries(in.Entries)
		return in, nil
	}
	in.Selected = len(selected)
	in.PlacedKind = gvk.GroupVersion().String() + "/" + gvk.Kind
	byRegion := map[string]*regionsyncv1alpha1.Region{}
	for i := range regions.Items {
		byRegion[regions.Items[i].Name] = &regions.Items[i]
	}
	kept := newKeeping(d, gvk, items, existing[gvk], byRegion)
	// The rollout decides which revision each region gets (rolloutTargets): of the template,
	// or of the source objects as a whole.
	targets, rollout, err := r.rolloutTargets(ctx, d, gvk, items, selected, regions.Items, existing[gvk])
	if err != nil {
		return in, err
	}
	in.Rollout = rollout
	for _, tg := range targets {
		kept.note(tg)
		if tg.Object == nil {
			in.Entries = append(in.Entries, regionsyncv1alpha1.DistributionRegionStatus{Region: tg.Region, State: tg.State, Reason: tg.Reason, Message: tg.Message})
			continue
		}
		in.Entries = append(in.Entries, r.apply(ctx, d, w, kept.item(tg), tg, existing[gvk][tg.Object.GetName()], regions.Items))
	}
	return r.removeLeft(ctx, d, w, in, existing, kept.keeps, byRegion, rule)
}

// keeping decides which of a Distribution's per-region objects stay: those its targets write,
// and, for a target that writes nothing, what its region has (a region still selected keeps what
// it has: nothing is lost to a failed rendering, an unplaceable region, a region waiting for its
// wave). Everything else, and every object of another kind, leaves (through the shrink guard).
// deploy and Preview decide with it alike.
type keeping struct {
	d          *regionsyncv1alpha1.Distribution
	gvk        schema.GroupVersionKind
	items      []*Template
	byRegion   map[string]*regionsyncv1alpha1.Region
	hasObjects map[string]bool
	names      map[string]bool
	regions    map[string]bool
}

// newKeeping starts the decision for d placing items of kind gvk, with existing its per-region
// objects of that kind.
func newKeeping(d *regionsyncv1alpha1.Distribution, gvk schema.GroupVersionKind, items []*Template, existing map[string]*unstructured.Unstructured, byRegion map[string]*regionsyncv1alpha1.Region) *keeping {
	k := &keeping{d: d, gvk: gvk, items: items, byRegion: byRegion, hasObjects: map[string]bool{}, names: map[string]bool{}, regions: map[string]bool{}}
	for _, o := range existing {
		k.hasObjects[o.GetLabels()[regionsyncv1alpha1.RegionLabel]] = true
	}
	return k
}

// item is what tg is rendered from (the Distribution's one item when tg does not say).
func (k *keeping) item(tg Target) *Template {
	if tg.item == nil && len(k.items) > 0 {
		return k.items[0]
	}
	return tg.item
}

// note records what target tg keeps.
func (k *keeping) note(tg Target) {
	if tg.Object != nil {
		k.names[tg.Object.GetName()] = true
		return
	}
	t := k.item(tg)
	if rg := k.byRegion[tg.Region]; tg.State != regionsyncv1alpha1.PlacementPending && t != nil && rg != nil && rg.Spec.Shard != nil {
		k.names[ObjectName(t.baseName(k.d.Name), rg.Spec.Shard)] = true
	} else if tg.Reason != regionsyncv1alpha1.ReasonRegionNotFound || k.hasObjects[tg.Region] {
		k.regions[tg.Region] = true
	}
}

// keeps reports whether the object name of kind gk in region stays.
func (k *keeping) keeps(gvk schema.GroupVersionKind, name, region string) bool {
	return gvk == k.gvk && (k.names[name] || k.regions[region])
}

// specPlacing is what a Distribution's spec places: its kind, the writer acting as its
// ServiceAccount, its items (its template, or its source objects) and the regions it selects;
// note says the source named does not exist (yet) or the selector matches nothing.
type specPlacing struct {
	gvk      schema.GroupVersionKind
	w        writer
	items    []*Template
	selected []string
	note     error
}

// resolveSpec validates and resolves d's spec against regions, as deploy and PreviewDistribution
// both do: the kind, the strategy, the writer (wrap, when set, wraps its client: a preview's
// source overlay), the items, the selection. specErr means nothing may change (its message
// names the field; the kind is left empty when it is the kind that is refused, so that it is
// not read either); err, that the sources of the kind could not be watched.
func (r *DistributionReconciler) resolveSpec(ctx context.Context, d *regionsyncv1alpha1.Distribution, regions []regionsyncv1alpha1.Region,
	wrap func(client.Client) client.Client,
) (sp specPlacing, specErr, err error) {
	if sp.gvk, specErr = SpecKind(d, r.Keys, r.AllowSecrets); specErr != nil {
		return specPlacing{}, specErr, nil
	}
	if specErr = ValidateStrategy(d.Spec.Strategy); specErr != nil {
		return sp, specErr, nil
	}
	if sp.w, specErr = r.writer(d); specErr != nil {
		return sp, specErr, nil
	}
	if wrap != nil {
		sp.w.Client = wrap(sp.w.Client)
	}
	if d.Spec.Source != nil {
		if err := r.ensureSourceWatch(sp.gvk); err != nil {
			return sp, nil, err
		}
	}
	if sp.items, sp.note, specErr = r.resolve(ctx, d, sp.gvk, sp.w, regions); specErr != nil {
		return sp, specErr, nil
	}
	sp.selected, specErr = Selected(d.Spec.Placement, regions)
	return sp, specErr, nil
}

// removeLeft removes, through the shrink guard, the objects that are not kept: of regions that
// left the placement, of sources that are gone, and every object of another kind.
func (r *DistributionReconciler) removeLeft(ctx context.Context, d *regionsyncv1alpha1.Distribution, w writer, in StatusInput,
	existing map[schema.GroupVersionKind]map[string]*unstructured.Unstructured, keep func(k schema.GroupVersionKind, name, region string) bool,
	byRegion map[string]*regionsyncv1alpha1.Region, rule *HealthRule,
) (StatusInput, error) {
	remove, terminating, removal := leaving(existing, keep, byRegion)
	for _, o := range terminating {
		in.Entries = append(in.Entries, entryFor(o, o.GetLabels()[regionsyncv1alpha1.RegionLabel], r.Keys, rule))
	}
	return r.removeGuarded(ctx, d, w, in, remove, removal, rule)
}

// leaving sorts out the objects keep does not keep: those to remove, those already terminating,
// and the removal for the shrink guard (the Distribution's total, a Region gone), its wanted
// counts left to removeGuarded.
func leaving(existing map[schema.GroupVersionKind]map[string]*unstructured.Unstructured, keep func(k schema.GroupVersionKind, name, region string) bool,
	byRegion map[string]*regionsyncv1alpha1.Region,
) (remove, terminating []*unstructured.Unstructured, removal Removal) {
	for k, objs := range existing {
		for name, o := range objs {
			region := o.GetLabels()[regionsyncv1alpha1.RegionLabel]
			if o.GetDeletionTimestamp() == nil {
				removal.Total++
			}
			if keep(k, name, region) {
				continue
			}
			if o.GetDeletionTimestamp() != nil {
				terminating = append(terminating, o)
				continue
			}
			remove = append(remove, o)
			if byRegion[region] == nil && removal.RegionGone == "" {
				removal.RegionGone = region
			}
		}
	}
	return remove, terminating, removal
}

// removeGuarded asks the shrink guard about removing objects (removal says how many the
// Distribution has, and whether it is being deleted) and removes them when it allows; when it
// holds them, they are listed RemovalHeld, with one Event as the hold begins.
func (r *DistributionReconciler) removeGuarded(ctx context.Context, d *regionsyncv1alpha1.Distribution, w writer, in StatusInput,
	remove []*unstructured.Unstructured, removal Removal, rule *HealthRule,
) (StatusInput, error) {
	removal, err := r.removalOf(ctx, d, remove, removal)
	if err != nil {
		return in, err
	}
	dec, err := r.Guard.Decide(ctx, client.ObjectKeyFromObject(d), r.Now(), removal)
	if err != nil {
		return in, err
	}
	if !dec.Allowed {
		in.Held, in.HeldSince = true, dec.HeldSince
		in.HeldMessage = heldMessage(d, r.Keys, len(remove), dec.HeldSince, dec.Why)
		if !isConditionTrue(d, regionsyncv1alpha1.DistributionRemovalHeld) {
			r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, EventRemovalHeld, eventActionRemove, "%s", in.HeldMessage)
		}
		for _, o := range remove {
			e := entryFor(o, o.GetLabels()[regionsyncv1alpha1.RegionLabel], r.Keys, rule)
			e.State, e.Reason, e.Message = regionsyncv1alpha1.PlacementRemovalHeld, regionsyncv1alpha1.ReasonHeld, "the removal is held by the shrink guard: "+dec.Why
			in.Entries = append(in.Entries, e)
		}
		in.Entries = regionEntries(in.Entries)
		return in, nil
	}
	removed := 0
	for _, o := range remove {
		e := entryFor(o, o.GetLabels()[regionsyncv1alpha1.RegionLabel], r.Keys, rule)
		e.State = regionsyncv1alpha1.PlacementRemoving
		switch err := r.delete(ctx, w, o); {
		case err == nil:
			removed++
		case removal.Deleting:
			// Deleting the Distribution: a removal that fails is what stands in its way.
			e.State, e.Reason, e.Message = regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.ReasonApplyFailed, err.Error()
		default:
			e.Message = err.Error()
		}
		in.Entries = append(in.Entries, e)
	}
	if removed > 0 && !removal.Deleting {
		r.Recorder.Eventf(d, nil, corev1.EventTypeNormal, EventRemoved, eventActionRemove, "removed %d per-region objects (regions that left the placement, sources that are gone, or a previous kind)", removed)
	}
	in.Entries = regionEntries(in.Entries)
	return in, nil
}

// removalOf completes what the shrink guard is asked about removing objects remove: how many, the
// confirmation on d, and per region the wanted removals and the region's size.
func (r *DistributionReconciler) removalOf(ctx context.Context, d *regionsyncv1alpha1.Distribution, remove []*unstructured.Unstructured, removal Removal) (Removal, error) {
	removal.Wanted, removal.ConfirmedBefore, removal.Regions = len(remove), confirmedBefore(d, r.Keys), map[string]RegionRemoval{}
	for _, o := range remove {
		region := o.GetLabels()[regionsyncv1alpha1.RegionLabel]
		rr := removal.Regions[region]
		rr.Wanted++
		removal.Regions[region] = rr
	}
	for region, rr := range removal.Regions {
		n, err := r.regionObjects(ctx, region)
		if err != nil {
			return removal, err
		}
		rr.Total = n
		removal.Regions[region] = rr
	}
	return removal, nil
}

// heldMessage is the RemovalHeld condition's and Event's message: what is held, since when (whole
// seconds), why, and the exact command that confirms it (a time after the hold began), plus what
// is wrong with a confirmation that does not parse.
func heldMessage(d *regionsyncv1alpha1.Distribution, keys shard.Keys, n int, since time.Time, why string) string {
	since = since.UTC()
	after := since.Truncate(time.Second).Add(time.Second).Format(time.RFC3339)
	msg := fmt.Sprintf("removing %d per-region objects is held by the shrink guard since %s: %s; if the removals are meant, confirm them: kubectl -n %s annotate distribution %s %s=%s --overwrite",
		n, since.Format(time.RFC3339), why, d.Namespace, d.Name, keys.ConfirmRemovalsBefore, after)
	if v, ok := d.Annotations[keys.ConfirmRemovalsBefore]; ok {
		if _, err := time.Parse(time.RFC3339, v); err != nil {
			msg += fmt.Sprintf(" (the annotation %s=%q is not an RFC 3339 time)", keys.ConfirmRemovalsBefore, v)
		}
	}
	return msg
}

// regionObjects counts a region's per-region objects across all Distributions and every kind
// placed (from the per-region objects' cache).
func (r *DistributionReconciler) regionObjects(ctx context.Context, region string) (int, error) {
	r.mu.Lock()
	kinds := slices.Collect(maps.Keys(r.watched))
	r.mu.Unlock()
	n := 0
	for _, gvk := range kinds {
		ul := &unstructured.UnstructuredList{}
		ul.SetGroupVersionKind(shard.ListGVK(gvk))
		if err := r.objects().List(ctx, ul, client.MatchingLabels{regionsyncv1alpha1.RegionLabel: region}); err != nil {
			return 0, fmt.Errorf("counting Region %s's per-region objects of %s: %w", region, shard.KindName(gvk), err)
		}
		for i := range ul.Items {
			if ul.Items[i].GetDeletionTimestamp() == nil {
				n++
			}
		}
	}
	return n, nil
}

// apply writes one region's object unless it is already as rendered, after making sure the name
// is not taken by an object this Distribution does not control.
func (r *DistributionReconciler) apply(ctx context.Context, d *regionsyncv1alpha1.Distribution, w writer, t *Template, tg Target, existing *unstructured.Unstructured, regions []regionsyncv1alpha1.Region) regionsyncv1alpha1.DistributionRegionStatus {
	obj := tg.Object
	e := regionsyncv1alpha1.DistributionRegionStatus{Region: tg.Region, Name: obj.GetName(), State: regionsyncv1alpha1.PlacementApplied}
	key := appliedKeyOf(obj)
	digest, hashed := digestOf(obj.Object)
	rule, _ := r.health.get(d.Spec.Health) // compiled once; deploy reports an error
	if existing == nil {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), live)
		conflict := ""
		switch {
		case err == nil && live.GetLabels()[r.Keys.Distribution] != d.Name:
			conflict = conflictMessage(obj, live, r.Keys)
		case err == nil:
			existing = live // ours, not yet in the cache
		case !apierrors.IsNotFound(err):
			e.State, e.Reason, e.Message = regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.ReasonApplyFailed, err.Error()
			return e
		default:
			if o := r.olderWanting(ctx, d, t, tg.Region, regions); o != nil {
				conflict = fmt.Sprintf("%s %s/%s is wanted also by Distribution %s, older, which places it", shard.KindName(obj.GroupVersionKind()), obj.GetNamespace(), obj.GetName(), o.Name)
			}
		}
		r.wait(client.ObjectKeyFromObject(d), client.ObjectKeyFromObject(obj), conflict != "")
		if conflict != "" {
			e.State, e.Reason, e.Message = regionsyncv1alpha1.PlacementConflict, regionsyncv1alpha1.ReasonConflict, conflict
			if !hasEntryState(d, tg.Region, regionsyncv1alpha1.PlacementConflict) {
				r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, EventConflict, eventActionPlace, "%s", e.Message)
			}
			return e
		}
	}
	r.mu.Lock()
	last, ok := r.applied[keyDigest(key)]
	same := ok && hashed && last == digest
	r.mu.Unlock()
	if existing != nil && same && inSync(obj, existing) {
		Observe(existing, r.Keys, rule).into(&e)
		return e
	}
	ctx, span := r.Tracer.Start(ctx, "apply", trace.WithAttributes(attribute.String("regionsync.object", key)))
	defer span.End()
	if tp := telemetry.Traceparent(ctx); tp != "" && obj.GetAnnotations()[r.Keys.TraceParent] == "" {
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[r.Keys.TraceParent] = tp
		obj.SetAnnotations(a)
	}
	written := obj.DeepCopy()
	if err := w.Apply(ctx, client.ApplyConfigurationFromUnstructured(written), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		ApplyErrors.WithLabelValues("apply").Inc()
		e.State, e.Reason, e.Message = regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.ReasonApplyFailed,
			fmt.Sprintf("writing %s %s/%s as %s: %v", shard.KindName(obj.GroupVersionKind()), obj.GetNamespace(), obj.GetName(), w, err)
		return e
	}
	if hashed {
		r.mu.Lock()
		r.applied[keyDigest(key)] = digest
		r.mu.Unlock()
	}
	Observe(written, r.Keys, rule).into(&e)
	return e
}

// delete deletes a per-region object (UID precondition) as the Distribution's ServiceAccount;
// the region's agent deletes its copy through its finalizer.
func (r *DistributionReconciler) delete(ctx context.Context, w writer, o *unstructured.Unstructured) error {
	uid := o.GetUID()
	err := w.Delete(ctx, o, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) {
		ApplyErrors.WithLabelValues("delete").Inc()
		return fmt.Errorf("deleting %s/%s as %s: %w", o.GetNamespace(), o.GetName(), w, err)
	}
	// Deleted: what was applied to it is no longer worth remembering (the record would otherwise
	// grow with every object ever placed and removed).
	r.mu.Lock()
	delete(r.applied, keyDigest(appliedKeyOf(o)))
	r.mu.Unlock()
	return nil
}

// appliedKeyOf is the key of a per-region object in the record of what the hub applied: its kind,
// namespace and name.
func appliedKeyOf(obj *unstructured.Unstructured) string {
	return obj.GroupVersionKind().String() + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// writer is the client acting as a Distribution's ServiceAccount, and which one it is.
type writer struct {
	client.Client
	sa string // "ServiceAccount <ns>/<name> (spec.serviceAccountName)"
}

// String names the ServiceAccount, and the field it comes from, in messages.
func (w writer) String() string { return w.sa }

// writer returns the client that writes d's per-region objects: as the ServiceAccount
// spec.serviceAccountName names, or the configured default; an error naming the field when
// neither is set.
func (r *DistributionReconciler) writer(d *regionsyncv1alpha1.Distribution) (writer, error) {
	sa, err := ServiceAccountName(d, r.DefaultServiceAccountName)
	if err != nil {
		return writer{}, err
	}
	from := "spec.serviceAccountName"
	if d.Spec.ServiceAccountName == "" {
		from = "the hub's defaultServiceAccountName"
	}
	c, err := r.Writers.For(d.Namespace, sa)
	if err != nil {
		return writer{}, err
	}
	return writer{Client: c, sa: fmt.Sprintf("ServiceAccount %s/%s (%s)", d.Namespace, sa, from)}, nil
}

// finalize honours deletionPolicy: Delete removes every per-region object, through the shrink
// guard's per-region budget (many Distributions deleted at once must not empty a region), and
// waits until the regions' agents released them (those stuck terminating are reported
// WaitingForRegion); Orphan removes the Distribution's label from them. Then it removes the hub's
// finalizer: a Distribution whose removals are held stays until they are confirmed.
func (r *DistributionReconciler) finalize(ctx context.Context, d *regionsyncv1alpha1.Distribution) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(d, r.Keys.HubFinalizer) {
		return ctrl.Result{}, nil
	}
	var gvk schema.GroupVersionKind
	if k, err := SpecKind(d, r.Keys, true); err == nil {
		gvk = k
	}
	kinds := placedKinds(d, gvk)
	in := StatusInput{PlacedKind: d.Status.PlacedKind, ConfirmKey: r.Keys.ConfirmRemovalsBefore, Deleting: true}
	w, saErr := r.writer(d)
	in.InvalidSpec = saErr
	rule, _ := r.health.get(d.Spec.Health)
	var remove []*unstructured.Unstructured
	for _, gvk := range kinds {
		objs, err := r.owned(ctx, d, gvk)
		if errors.Is(err, errNotSynced) {
			return r.waitForKind(ctx, d, err)
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		for _, o := range objs {
			e := entryFor(o, o.GetLabels()[regionsyncv1alpha1.RegionLabel], r.Keys, rule)
			switch {
			case saErr != nil:
				// Nothing can be written: the status says why (naming the field) and lists what is left.
			case d.Spec.DeletionPolicy == regionsyncv1alpha1.DeletionPolicyOrphan:
				patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, r.Keys.Distribution))
				err := w.Patch(ctx, o, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
				if err == nil || apierrors.IsNotFound(err) {
					continue
				}
				ApplyErrors.WithLabelValues("orphan").Inc()
				e.State, e.Reason = regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.ReasonApplyFailed
				e.Message = fmt.Sprintf("orphaning %s/%s as %s: %v", o.GetNamespace(), o.GetName(), w, err)
			case o.GetDeletionTimestamp() == nil:
				remove = append(remove, o) // through the shrink guard, below
				continue
			}
			in.Entries = append(in.Entries, e)
		}
	}
	if len(remove) > 0 {
		var err error
		if in, err = r.removeGuarded(ctx, d, w, in, remove, Removal{Total: len(remove), Deleting: true}, rule); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(in.Entries) > 0 {
		in.Entries = regionEntries(in.Entries)
		st := ComputeStatus(d, in, r.Now())
		r.totals.set(client.ObjectKeyFromObject(d), st.Counts)
		after, err := r.writeStatus(ctx, d, st)
		if err != nil {
			return ctrl.Result{}, err
		}
		if in.Held {
			// A hold is latched until confirmed: the annotation's update wakes the Distribution.
			return ctrl.Result{RequeueAfter: after}, nil
		}
		return ctrl.Result{RequeueAfter: minPositive(after, 2*time.Second)}, nil
	}
	if d.Spec.DeletionPolicy == regionsyncv1alpha1.DeletionPolicyOrphan {
		r.Recorder.Eventf(d, nil, corev1.EventTypeNormal, EventOrphaned, eventActionRemove, "per-region objects left in place (deletionPolicy Orphan)")
	}
	orig := d.DeepCopy()
	controllerutil.RemoveFinalizer(d, r.Keys.HubFinalizer)
	if err := r.Client.Patch(ctx, d, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer of Distribution %s: %w", client.ObjectKeyFromObject(d), err)
	}
	r.totals.forget(client.ObjectKeyFromObject(d))
	return ctrl.Result{}, nil
}

// writeStatus writes the status when it changed, at most once per StatusInterval per
// Distribution; it returns how long to wait before writing a change it held back.
func (r *DistributionReconciler) writeStatus(ctx context.Context, d *regionsyncv1alpha1.Distribution, st regionsyncv1alpha1.DistributionStatus) (time.Duration, error) {
	if !statusChanged(&d.Status, &st) {
		return 0, nil
	}
	key := client.ObjectKeyFromObject(d)
	now := r.Now()
	r.mu.Lock()
	last := r.lastStatus[key]
	r.mu.Unlock()
	if wait := StatusInterval - now.Sub(last); wait > 0 && !rolloutMilestone(&d.Status, &st) {
		return wait, nil
	}
	orig := d.DeepCopy()
	d.Status = st
	if err := r.Client.Status().Patch(ctx, d, client.MergeFrom(orig), client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("writing the status of Distribution %s: %w", key, err)
	}
	r.mu.Lock()
	r.lastStatus[key] = now
	r.mu.Unlock()
	return 0, nil
}

// entryFor is the status entry of an existing per-region object.
func entryFor(o *unstructured.Unstructured, region string, keys shard.Keys, rule *HealthRule) regionsyncv1alpha1.DistributionRegionStatus {
	e := regionsyncv1alpha1.DistributionRegionStatus{Region: region, Name: o.GetName(), State: regionsyncv1alpha1.PlacementApplied}
	Observe(o, keys, rule).into(&e)
	if o.GetDeletionTimestamp() != nil {
		e.State = regionsyncv1alpha1.PlacementRemoving
		if len(o.GetFinalizers()) > 0 {
			e.State = regionsyncv1alpha1.PlacementWaitingForRegion
			e.Message = fmt.Sprintf("terminating since %s; waiting for the region's agent to delete its copy and release %v", o.GetDeletionTimestamp().UTC().Format(time.RFC3339), o.GetFinalizers())
		}
	}
	return e
}

// inSync reports whether live holds every field of the rendered object (content, labels,
// annotations) with the same value.
func inSync(rendered, live *unstructured.Unstructured) bool {
	for k, v := range rendered.Object {
		if k == "metadata" || k == "apiVersion" || k == "kind" {
			continue
		}
		if !jsonvalue.IsSubset(v, live.Object[k]) {
			return false
		}
	}
	return jsonvalue.IsSubset(toAny(rendered.GetLabels()), toAny(live.GetLabels())) && jsonvalue.IsSubset(toAny(rendered.GetAnnotations()), toAny(live.GetAnnotations()))
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// placedKinds are the kinds of a Distribution's per-region objects: its template's (t, when it
// parses) and the one it placed before (status.placedKind).
func placedKinds(d *regionsyncv1alpha1.Distribution, gvk schema.GroupVersionKind) []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	if !gvk.Empty() {
		kinds = append(kinds, gvk)
	}
	if prev, err := placedGVK(d.Status.PlacedKind); err == nil && !slices.Contains(kinds, prev) {
		kinds = append(kinds, prev)
	}
	return kinds
}

// placedGVK parses status.placedKind ("group/version/Kind" or "version/Kind").
func placedGVK(s string) (schema.GroupVersionKind, error) {
	i := len(s) - 1
	for i >= 0 && s[i] != '/' {
		i--
	}
	if i <= 0 || i == len(s)-1 {
		return schema.GroupVersionKind{}, fmt.Errorf("no kind in %q", s)
	}
	gv, err := schema.ParseGroupVersion(s[:i])
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gv.WithKind(s[i+1:]), nil
}

// confirmedBefore reads D/confirm-removals-before (zero when absent or not RFC 3339).
func confirmedBefore(d *regionsyncv1alpha1.Distribution, keys shard.Keys) time.Time {
	t, err := time.Parse(time.RFC3339, d.Annotations[keys.ConfirmRemovalsBefore])
	if err != nil {
		return time.Time{}
	}
	return t
}

func isConditionTrue(d *regionsyncv1alpha1.Distribution, t string) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func isConditionMessage(d *regionsyncv1alpha1.Distribution, t, substring string) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == t {
			return len(c.Message) >= len(substring) && c.Message[:len(substring)] == substring
		}
	}
	return false
}

func hasEntryState(d *regionsyncv1alpha1.Distribution, region string, s regionsyncv1alpha1.PlacementState) bool {
	for _, e := range d.Status.Regions {
		if e.Region == region {
			return e.State == s
		}
	}
	return false
}

// minPositive is the smallest positive duration of a and b (0 when neither is).
func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// appliedKey names a per-region object (its kind, namespace and name) in the hub's record of
// what it applied, and appliedDigest is what it applied: both the first 16 bytes of a SHA-256,
// so that the record costs a few dozen bytes per object rather than the strings.
type (
	appliedKey    [16]byte
	appliedDigest [16]byte
)

// keyDigest is the appliedKey of an object's key string.
func keyDigest(key string) appliedKey {
	sum := sha256.Sum256([]byte(key))
	return appliedKey(sum[:16])
}

// digestOf hashes a rendered object (its JSON, map keys sorted); false when it does not
// marshal, which never counts as applied.
func digestOf(obj map[string]any) (appliedDigest, bool) {
	data, err := json.Marshal(obj)
	if err != nil {
		return appliedDigest{}, false
	}
	sum := sha256.Sum256(data)
	return appliedDigest(sum[:16]), true
}
