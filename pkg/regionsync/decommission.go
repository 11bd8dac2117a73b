package regionsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/internal/syncer"
)

// ErrShardHeld is returned by Decommission when a live replica (one whose Lease has not
// expired) holds the region's shard Lease on management: the agent is still running and would
// claim the objects again. Stop it first, or pass DecommissionOptions.Force.
var ErrShardHeld = errors.New("regionsync: the region's shard Lease is held by a live replica")

// DefaultDecommissionTimeout bounds how long Decommission waits for deleted local copies to be
// gone when DecommissionOptions.Timeout is zero.
const DefaultDecommissionTimeout = 2 * time.Minute

// DecommissionOptions say what Decommission does.
type DecommissionOptions struct {
	// DeleteCopies deletes the local copies first (only copies carrying this region's mark; the
	// namespace the agent created for an object when nothing else it manages lives there, as the
	// agent's own deletion does) and releases an object's finalizer only once its copy is gone.
	// It needs the local client.
	DeleteCopies bool
	// DryRun reads everything and reports what would be done, writing nothing.
	DryRun bool
	// Force proceeds although a live replica holds the region's shard Lease.
	Force bool
	// OutOfShardOnly handles only the objects that left the shard (relabelled, suffix changed)
	// and keeps the shard Lease: the region keeps running. It may run while the agent runs,
	// which never writes objects outside its shard. It needs the local client.
	OutOfShardOnly bool
	// Timeout bounds the wait for deleted copies to be gone (default
	// DefaultDecommissionTimeout). An object whose copy is still there keeps its finalizer.
	Timeout time.Duration
	// Logger logs every action (default: discard).
	Logger logr.Logger
}

// ReleasedObject is one management object Decommission released (or, in DryRun, would
// release), or skipped.
type ReleasedObject struct {
	// Resource is the kind's dotted name ("Tenant.demo.regionsync.dev").
	Resource string
	// Remote is the object's key on management.
	Remote types.NamespacedName
	// Local is its copy's key in the region (zero when it has none or the region was not read).
	Local types.NamespacedName
	// OutOfShard: the object left the shard; it was found through its copy's remote UID.
	OutOfShard bool
	// Deleted says what was deleted in the region: "copy", "namespace <name>", or "".
	Deleted string
	// Reason says why a skipped object was skipped.
	Reason string
}

// DecommissionReport says what Decommission did (or, in DryRun, would do).
type DecommissionReport struct {
	// DryRun: nothing was written.
	DryRun bool
	// Released are the objects whose finalizer was removed.
	Released []ReleasedObject
	// Skipped are objects of the region that keep their finalizer, with the reason (paused,
	// claimed by another region's shard, copy not gone in time).
	Skipped []ReleasedObject
	// CopiesDeleted and NamespacesDeleted count local deletions.
	CopiesDeleted, NamespacesDeleted int
	// LeaseDeleted: the region's shard Lease was deleted (its reservation ended).
	LeaseDeleted bool
	// LeaseHolder is who held the Lease when Decommission looked ("" when released or absent).
	LeaseHolder string
	// LeaseNamespace is the management namespace of the region's shard Lease (Options'
	// Management.Namespace, defaulted).
	LeaseNamespace string
}

// Write prints the report for a person, one line per object then a summary: what was (or, in
// a dry run, would be) released or kept, the local deletions, and the shard Lease
// leaseNamespace/region-<region>. The agent's decommission command and kubectl regionsync print
// it alike.
func (r DecommissionReport) Write(w io.Writer, region, leaseNamespace string) {
	verb, deleted := "released", "deleted"
	if r.DryRun {
		verb, deleted = "would release", "would be deleted"
		fmt.Fprintf(w, "region %s: dry run, nothing written\n", region)
	}
	describe := func(o ReleasedObject) string {
		s := o.Resource + " " + o.Remote.String()
		if o.OutOfShard {
			s += " (left the shard)"
		}
		if o.Deleted != "" {
			s += fmt.Sprintf(": local %s of %s %s", o.Deleted, o.Local, deleted)
		}
		return s
	}
	for _, o := range r.Released {
		fmt.Fprintf(w, "%s %s\n", verb, describe(o))
	}
	for _, o := range r.Skipped {
		fmt.Fprintf(w, "kept    %s: %s\n", describe(o), o.Reason)
	}
	lease := "kept"
	if r.LeaseDeleted {
		lease = deleted
	}
	fmt.Fprintf(w, "region %s: %d object(s) %s, %d kept; %d local copies and %d namespaces %s; shard Lease %s/%s %s\n",
		region, len(r.Released), verb, len(r.Skipped), r.CopiesDeleted, r.NamespacesDeleted, deleted, leaseNamespace, claim.LeaseName(region), lease)
}

// Decommission releases this region's claim on management, for a region that is being removed
// (docs/operations/regions.md#decommissioning-a-region): for every configured kind, each object of the
// shard that carries the finalizer "<D>/sync-local", and each object that left the shard but
// still has a copy of this region (found through the copy's remote UID), gets its finalizer
// removed (an optimistic-lock merge patch that keeps every other finalizer), so that deleting it
// on management completes. With DeleteCopies, its local copy is deleted first and the finalizer
// is released only once the copy is gone. Finally the region's shard Lease "region-<region>" is
// deleted, which ends the shard's reservation against overlapping shards.
//
// local is a client of the regional cluster that reads from the API server (not a cache); it may
// be nil when the region is gone and DeleteCopies and OutOfShardOnly are false (objects that
// left the shard cannot be found then). Decommission refuses with ErrShardHeld while a live
// replica holds the shard Lease, unless d.Force. It is idempotent: run again, it finishes what a
// previous run left (a copy not gone in time, a conflict) and releases nothing twice.
func Decommission(ctx context.Context, opts Options, local client.Client, d DecommissionOptions) (DecommissionReport, error) {
	report := DecommissionReport{DryRun: d.DryRun}
	sch := scheme.New()
	if local != nil {
		sch = local.Scheme()
	}
	opts, cfg, _, err := opts.complete(sch) // the management client below included (its User-Agent)
	if err != nil {
		return report, err
	}
	report.LeaseNamespace = opts.Management.Namespace
	if local == nil && (d.DeleteCopies || d.OutOfShardOnly) {
		return report, fmt.Errorf("%w: deleting copies and finding objects that left the shard need the regional cluster's client", ErrInvalidOptions)
	}
	mapper, err := shard.NewMapper(cfg.Shard)
	if err != nil {
		return report, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	remote, err := client.New(opts.Management.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return report, fmt.Errorf("management client: %w", err)
	}
	if d.Timeout <= 0 {
		d.Timeout = DefaultDecommissionTimeout
	}
	log := d.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	dc := &decommissioner{cfg: cfg, d: d, keys: shard.NewKeys(cfg.AnnotationDomain), mapper: mapper, remote: remote, local: local, log: log, report: &report}

	if !d.OutOfShardOnly {
		holder, live, err := dc.leaseHolder(ctx)
		if err != nil {
			return report, err
		}
		report.LeaseHolder = holder
		if live && !d.Force {
			return report, fmt.Errorf("%w: Lease %s/%s is held by %s and has not expired; stop the region's agents first (or force)",
				ErrShardHeld, cfg.ManagementNamespace, claim.LeaseName(cfg.Region), holder)
		}
	}
	var targets []*target
	for _, r := range cfg.Resources {
		gvk := r.GroupVersionKind()
		ts, err := dc.targets(ctx, gvk, r.DeletePropagation)
		if err != nil {
			return report, err
		}
		targets = append(targets, ts...)
	}
	var errs []error
	if d.DeleteCopies {
		errs = append(errs, dc.deleteCopies(ctx, targets)...)
	}
	for _, t := range targets {
		if t.skip != "" {
			report.Skipped = append(report.Skipped, t.result(t.skip))
			continue
		}
		if err := dc.release(ctx, t); err != nil {
			errs = append(errs, err)
			report.Skipped = append(report.Skipped, t.result(err.Error()))
			continue
		}
		report.Released = append(report.Released, t.result(""))
	}
	if len(errs) > 0 {
		return report, fmt.Errorf("decommissioning region %s (run again to finish; the shard Lease is kept): %w", cfg.Region, errors.Join(errs...))
	}
	if !d.OutOfShardOnly {
		if err := dc.deleteLease(ctx); err != nil {
			return report, err
		}
	}
	return report, nil
}

// decommissioner holds what one Decommission run reads and writes.
type decommissioner struct {
	cfg    *syncer.Settings
	d      DecommissionOptions
	keys   shard.Keys
	mapper *shard.Mapper
	remote client.Client
	local  client.Client
	log    logr.Logger
	report *DecommissionReport
	// others are the shard definitions recorded on the other regions' Leases, read once.
	others *[]shard.Definition
}

// target is one management object of the region that carries the finalizer.
type target struct {
	gvk         schema.GroupVersionKind
	propagation metav1.DeletionPropagation
	obj         *unstructured.Unstructured
	localKey    types.NamespacedName // zero: no valid local name
	copy        *unstructured.Unstructured
	outOfShard  bool
	deleted     string
	skip        string
}

func (t *target) result(reason string) ReleasedObject {
	r := ReleasedObject{Resource: shard.KindName(t.gvk), Remote: keyOf(t.obj), OutOfShard: t.outOfShard, Deleted: t.deleted, Reason: reason}
	if t.copy != nil {
		r.Local = t.localKey
	}
	return r
}

func keyOf(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

func newList(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(shard.ListGVK(gvk))
	return l
}

func newObject(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// listPaged lists a kind in pages of 500 and calls each for every item.
func listPaged(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, each func(*unstructured.Unstructured), opts ...client.ListOption) error {
	cont := ""
	for {
		list := newList(gvk)
		if err := c.List(ctx, list, append(slices.Clone(opts), client.Limit(500), client.Continue(cont))...); err != nil {
			return err
		}
		for i := range list.Items {
			each(&list.Items[i])
		}
		if cont = list.GetContinue(); cont == "" {
			return nil
		}
	}
}

// targets finds the kind's objects of this region that carry the finalizer: those in the shard
// (label selector server-side, then the name mapping), and, when the region is read, those that
// left it but still have a marked copy whose remote UID names them.
func (dc *decommissioner) targets(ctx context.Context, gvk schema.GroupVersionKind, propagation metav1.DeletionPropagation) ([]*target, error) {
	var out []*target
	inShard := map[types.UID]bool{}
	if !dc.d.OutOfShardOnly {
		err := listPaged(ctx, dc.remote, gvk, func(o *unstructured.Unstructured) {
			localKey, err := dc.mapper.ToLocal(keyOf(o))
			if errors.Is(err, shard.ErrNotInShard) || !controllerutil.ContainsFinalizer(o, dc.keys.Finalizer) {
				return
			}
			inShard[o.GetUID()] = true
			t := &target{gvk: gvk, propagation: propagation, obj: o.DeepCopy()}
			if err == nil { // an invalid mapping has no copy, only a finalizer to release
				t.localKey = localKey
			}
			out = append(out, t)
		}, client.MatchingLabelsSelector{Selector: dc.mapper.Selector()})
		if err != nil {
			return nil, fmt.Errorf("listing %s on management: %w", shard.KindName(gvk), err)
		}
	}
	if dc.local == nil {
		return out, dc.readCopies(ctx, out)
	}
	// Objects that left the shard are found through the region's copies (the remote UID each
	// carries), wherever their name or labels went.
	copiesByUID := map[types.UID]*unstructured.Unstructured{}
	err := listPaged(ctx, dc.local, gvk, func(o *unstructured.Unstructured) {
		if uid := types.UID(o.GetAnnotations()[dc.keys.RemoteUID]); uid != "" && !inShard[uid] {
			copiesByUID[uid] = o.DeepCopy()
		}
	}, client.MatchingLabels{dc.keys.Region: dc.cfg.Region})
	if err != nil {
		return nil, fmt.Errorf("listing local %s copies: %w", shard.KindName(gvk), err)
	}
	var left []*target
	if len(copiesByUID) > 0 {
		err = listPaged(ctx, dc.remote, gvk, func(o *unstructured.Unstructured) {
			c, ok := copiesByUID[o.GetUID()]
			if !ok || !controllerutil.ContainsFinalizer(o, dc.keys.Finalizer) || dc.inOwnShard(o) {
				return
			}
			left = append(left, &target{gvk: gvk, propagation: propagation, obj: o.DeepCopy(), localKey: keyOf(c), outOfShard: true})
		})
		if err != nil {
			return nil, fmt.Errorf("listing %s on management: %w", shard.KindName(gvk), err)
		}
	}
	for _, t := range left {
		region, err := dc.otherShardOf(ctx, t)
		if err != nil {
			return nil, err
		}
		if region != "" {
			t.skip = "left the shard into the shard of region " + region + ", which claims it with the same finalizer"
		}
	}
	out = append(out, left...)
	return out, dc.readCopies(ctx, out)
}

// inOwnShard reports whether an object is in this region's shard (by name and labels).
func (dc *decommissioner) inOwnShard(o *unstructured.Unstructured) bool {
	_, err := dc.mapper.ToLocal(keyOf(o))
	return !errors.Is(err, shard.ErrNotInShard) && dc.mapper.MatchesLabels(o.GetLabels())
}

// otherShardOf returns the region whose recorded shard holds t's object, or "". The finalizer
// key is shared by every region of a fleet: an object that moved into another region's shard
// is that region's to release.
func (dc *decommissioner) otherShardOf(ctx context.Context, t *target) (string, error) {
	if dc.others == nil {
		leases := &coordinationv1.LeaseList{}
		if err := dc.remote.List(ctx, leases, client.InNamespace(dc.cfg.ManagementNamespace), client.MatchingLabels{claim.LeaseLabel: "true"}); err != nil {
			return "", fmt.Errorf("listing shard Leases on management: %w", err)
		}
		var defs []shard.Definition
		for _, l := range leases.Items {
			var def shard.Definition
			if l.Name == claim.LeaseName(dc.cfg.Region) || json.Unmarshal([]byte(l.Annotations[claim.DefinitionAnnotation]), &def) != nil {
				continue
			}
			defs = append(defs, def)
		}
		dc.others = &defs
	}
	for _, def := range *dc.others {
		if !slices.Contains(def.Kinds, shard.KindName(t.gvk)) {
			continue
		}
		m, err := shard.NewMapper(fleetspec.Shard{NamespacePrefix: def.NamespacePrefix, RemoteNamespaceSuffix: def.RemoteNamespaceSuffix,
			RemoteResourceSuffix: def.RemoteResourceSuffix, LabelSelector: def.LabelSelector})
		if err != nil {
			return def.Region, nil // unreadable selector: assume it may hold the object
		}
		if _, err := m.ToLocal(keyOf(t.obj)); !errors.Is(err, shard.ErrNotInShard) && m.MatchesLabels(t.obj.GetLabels()) {
			return def.Region, nil
		}
	}
	return "", nil
}

// readCopies reads each target's local copy (only an object carrying this region's mark is a
// copy) and marks paused objects to be skipped: pause stops every write, this one's included.
func (dc *decommissioner) readCopies(ctx context.Context, ts []*target) error {
	for _, t := range ts {
		if t.skip != "" {
			continue
		}
		if dc.keys.IsPaused(t.obj.GetAnnotations()) {
			t.skip = "paused on management (" + dc.keys.Paused + ")"
			continue
		}
		if dc.local == nil || t.localKey == (types.NamespacedName{}) {
			continue
		}
		c := newObject(t.gvk)
		if err := dc.local.Get(ctx, t.localKey, c); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading local %s %s: %w", shard.KindName(t.gvk), t.localKey, err)
		}
		if c.GetLabels()[dc.keys.Region] != dc.cfg.Region {
			continue // not a copy: never touched
		}
		t.copy = c
		if dc.keys.IsPaused(c.GetAnnotations()) {
			t.skip = "paused in the region (" + dc.keys.Paused + ")"
		}
	}
	return nil
}

// deleteCopies deletes every target's copy (or the namespace the agent created for it), then
// waits until they are gone. A target whose copy is not gone in time is skipped: it keeps its
// finalizer.
func (dc *decommissioner) deleteCopies(ctx context.Context, ts []*target) []error {
	var errs []error
	var pending []*target
	for _, t := range ts {
		if t.skip != "" || t.copy == nil {
			continue
		}
		if err := dc.deleteCopy(ctx, t); err != nil {
			t.skip = err.Error()
			errs = append(errs, err)
			continue
		}
		pending = append(pending, t)
	}
	if dc.d.DryRun || len(pending) == 0 {
		return errs
	}
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, dc.d.Timeout, true, func(ctx context.Context) (bool, error) {
		rest := pending[:0]
		for _, t := range pending {
			c := newObject(t.gvk)
			err := dc.local.Get(ctx, t.localKey, c)
			if apierrors.IsNotFound(err) || (err == nil && c.GetUID() != t.copy.GetUID()) {
				continue
			}
			rest = append(rest, t)
		}
		pending = rest
		return len(pending) == 0, nil
	})
	for _, t := range pending {
		t.skip = fmt.Sprintf("local copy %s still there after %s; finalizer kept", t.localKey, dc.d.Timeout)
		errs = append(errs, fmt.Errorf("%s %s: %s", shard.KindName(t.gvk), keyOf(t.obj), t.skip))
	}
	return errs
}

// deleteCopy mirrors the agent's own deletion (docs/design/sync-rules.md#deletion): the namespace the agent
// created for this object when nothing else it manages lives there, otherwise the copy; both with
// a UID precondition; nothing in a protected namespace.
func (dc *decommissioner) deleteCopy(ctx context.Context, t *target) error {
	if dc.cfg.IsProtectedNamespace(t.localKey.Namespace) {
		return fmt.Errorf("local copy %s is in a protected namespace; not deleted", t.localKey)
	}
	ns := &corev1.Namespace{}
	if err := dc.local.Get(ctx, types.NamespacedName{Name: t.localKey.Namespace}, ns); err != nil {
		return fmt.Errorf("reading local namespace %s: %w", t.localKey.Namespace, err)
	}
	var victim client.Object = t.copy
	what := "copy"
	opts := make([]client.DeleteOption, 0, 2) // a propagation policy (not for a namespace) and the UID precondition
	opts = append(opts, client.PropagationPolicy(t.propagation))
	if dc.ownsNamespace(ns, t) {
		alone, err := dc.aloneInNamespace(ctx, t)
		if err != nil {
			return err
		}
		if alone {
			victim, what, opts = ns, "namespace "+ns.Name, opts[:0]
		}
	}
	t.deleted = what
	if !victim.GetDeletionTimestamp().IsZero() {
		return nil // already going
	}
	dc.log.Info("deleting local "+what, "resource", shard.KindName(t.gvk), "remote", keyOf(t.obj), "local", t.localKey, "dryRun", dc.d.DryRun)
	if what == "copy" {
		dc.report.CopiesDeleted++
	} else {
		dc.report.NamespacesDeleted++
	}
	if dc.d.DryRun {
		return nil
	}
	uid := victim.GetUID()
	err := dc.local.Delete(ctx, victim, append(opts, client.Preconditions{UID: &uid})...)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting local %s of %s %s: %w", what, shard.KindName(t.gvk), keyOf(t.obj), err)
	}
	return nil
}

// ownsNamespace reports whether the agent created ns for this copy (sync-controller's namespaces
// carry only the owner name, which is accepted).
func (dc *decommissioner) ownsNamespace(ns *corev1.Namespace, t *target) bool {
	return dc.keys.OwnsNamespace(ns.Annotations, t.copy.GetName(), shard.KindName(t.gvk))
}

// aloneInNamespace reports whether no other object of any configured kind carries this region's
// mark in the copy's namespace.
func (dc *decommissioner) aloneInNamespace(ctx context.Context, t *target) (bool, error) {
	for _, r := range dc.cfg.Resources {
		gvk := r.GroupVersionKind()
		list := newList(gvk)
		err := dc.local.List(ctx, list, client.InNamespace(t.localKey.Namespace), client.MatchingLabels{dc.keys.Region: dc.cfg.Region}, client.Limit(2))
		switch {
		case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
			continue // the region does not serve the kind: none of it can be there
		case err != nil:
			return false, fmt.Errorf("listing local %s in %s: %w", shard.KindName(gvk), t.localKey.Namespace, err)
		}
		for i := range list.Items {
			if list.Items[i].GetUID() != t.copy.GetUID() {
				return false, nil
			}
		}
	}
	return true, nil
}

// release removes this region's finalizer from the object with an optimistic-lock merge patch
// (the list written is the list read, so no other finalizer is lost), re-reading on conflict.
func (dc *decommissioner) release(ctx context.Context, t *target) error {
	dc.log.Info("releasing finalizer", "resource", shard.KindName(t.gvk), "remote", keyOf(t.obj), "outOfShard", t.outOfShard, "dryRun", dc.d.DryRun)
	if dc.d.DryRun {
		return nil
	}
	obj := t.obj
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if obj == nil || !controllerutil.ContainsFinalizer(obj, dc.keys.Finalizer) {
			return nil // released, or replaced by another object: nothing of ours left
		}
		before := obj.DeepCopy()
		controllerutil.RemoveFinalizer(obj, dc.keys.Finalizer)
		err := dc.remote.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) {
			return client.IgnoreNotFound(err)
		}
		fresh := newObject(t.gvk)
		if err := dc.remote.Get(ctx, keyOf(t.obj), fresh); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("re-reading %s %s: %w", shard.KindName(t.gvk), keyOf(t.obj), err))
		}
		obj = nil
		if fresh.GetUID() == t.obj.GetUID() {
			obj = fresh
		}
		return err // the conflict: retried with the fresh object
	})
	if err != nil {
		return fmt.Errorf("releasing the finalizer of %s %s: %w", shard.KindName(t.gvk), keyOf(t.obj), err)
	}
	return nil
}

// leaseHolder reads the region's shard Lease: who holds it and whether that holder is live (its
// lease not expired). A Lease released on a graceful shutdown has no holder.
func (dc *decommissioner) leaseHolder(ctx context.Context) (string, bool, error) {
	l := &coordinationv1.Lease{}
	err := dc.remote.Get(ctx, types.NamespacedName{Namespace: dc.cfg.ManagementNamespace, Name: claim.LeaseName(dc.cfg.Region)}, l)
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading the shard Lease on management: %w", err)
	}
	holder, live := claim.LiveHolder(l, time.Now())
	return holder, live, nil
}

// deleteLease deletes the region's shard Lease, checking again that no live replica took it
// meanwhile; the delete carries the read UID and resourceVersion.
func (dc *decommissioner) deleteLease(ctx context.Context) error {
	key := types.NamespacedName{Namespace: dc.cfg.ManagementNamespace, Name: claim.LeaseName(dc.cfg.Region)}
	l := &coordinationv1.Lease{}
	if err := dc.remote.Get(ctx, key, l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading the shard Lease %s: %w", key, err)
	}
	holder, live := claim.LiveHolder(l, time.Now())
	if live && !dc.d.Force {
		return fmt.Errorf("%w: Lease %s was taken by %s meanwhile; not deleted", ErrShardHeld, key, holder)
	}
	dc.log.Info("deleting the shard Lease", "lease", key, "dryRun", dc.d.DryRun)
	dc.report.LeaseDeleted = true
	if dc.d.DryRun {
		return nil
	}
	uid, rv := l.UID, l.ResourceVersion
	if err := dc.remote.Delete(ctx, l, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) {
		dc.report.LeaseDeleted = false
		return fmt.Errorf("deleting the shard Lease %s: %w", key, err)
	}
	return nil
}
