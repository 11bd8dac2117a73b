//go:build integration

package syncer_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// tenants creates n Tenants named <stem>NN, one namespace each (the demo operator keeps one
// tenant-token per namespace), waits until all are synced and returns their namespaces by name.
func (e *env) tenants(stem string, n int) (names []string, nss map[string]string) {
	e.t.Helper()
	nss = map[string]string{}
	for i := range n {
		name := fmt.Sprintf("%s%02d", stem, i)
		names = append(names, name)
		nss[name] = e.remoteNamespace(name)
		e.tenant(nss[name], name, name)
	}
	for _, name := range names {
		e.waitSynced(nss[name], name)
	}
	return names, nss
}

// vanish makes remote objects disappear without passing through the finalizer (a restore from
// an old backup, a force-removed finalizer).
func (e *env) vanish(nss map[string]string, names ...string) {
	e.t.Helper()
	for _, n := range names {
		e.setRemote(nss[n], n, func(o *demov1alpha1.Tenant) { o.Finalizers = nil })
		o, err := e.getRemote(nss[n], n)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := e.mgmt.Delete(e.ctx, o); err != nil {
			e.t.Fatal(err)
		}
		e.eventually("remote "+n+" gone", func() error {
			if _, err := e.getRemote(nss[n], n); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
	}
}

// kept fails when any of the copies is deleted or terminating.
func (e *env) kept(nss map[string]string, names ...string) error {
	for _, n := range names {
		l, err := e.getLocal(nss[n], n)
		if err != nil {
			return fmt.Errorf("copy %s: %w", n, err)
		}
		if !l.DeletionTimestamp.IsZero() {
			return fmt.Errorf("copy %s is being deleted", n)
		}
	}
	return nil
}

// waitDeleted waits (up to timeout) until the copies are gone or terminating.
func (e *env) waitDeleted(timeout time.Duration, nss map[string]string, names ...string) {
	e.t.Helper()
	testenv.Eventually(e.t, fmt.Sprintf("copies %v deleted", names), timeout, func() error {
		for _, n := range names {
			l, err := e.getLocal(nss[n], n)
			if err == nil && l.DeletionTimestamp.IsZero() {
				return fmt.Errorf("copy %s still there", n)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
}

// regionObject creates the test's Region on management (the operator's part when adding a region).
func (e *env) regionObject() {
	e.t.Helper()
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: e.opts.Region}}
	if err := e.mgmt.Create(e.ctx, r); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.mgmt.Delete(e.ctx, r) })
}

// releaseBefore sets the Region's release-deletions-before annotation to t.
func (e *env) releaseBefore(t time.Time) {
	e.t.Helper()
	e.eventually("annotate the Region", func() error {
		r := &regionsyncv1alpha1.Region{}
		if err := e.mgmt.Get(e.ctx, client.ObjectKey{Name: e.opts.Region}, r); err != nil {
			return err
		}
		if r.Annotations == nil {
			r.Annotations = map[string]string{}
		}
		r.Annotations[e.keys.ReleaseDeletionsBefore] = t.UTC().Format(time.RFC3339)
		return e.mgmt.Update(e.ctx, r)
	})
}

// A partial restore never drains a hold: 20 copies lose their remote objects while the agent is
// stopped; 12 come back and sync, the 8 others stay held (a minute later too) until released, per
// copy and from the Region.
func TestPartialRestoreKeepsHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.regionObject()
	names, nss := e.tenants("pr", 20)
	e.stop()
	e.vanish(nss, names...)
	e.start()
	e.waitEvent(e.local, nss[names[0]], names[0], syncer.ReasonDeletionHeld)
	if err := e.kept(nss, names...); err != nil {
		t.Fatal(err)
	}
	restored, held := names[:12], names[12:]
	for _, n := range restored {
		e.tenant(nss[n], n, n+" restored")
	}
	for _, n := range restored {
		_, local := e.waitSynced(nss[n], n)
		if local.Spec.DisplayName != n+" restored" {
			t.Fatalf("restored %s not synced: %q", n, local.Spec.DisplayName)
		}
	}
	e.never("a held copy deleted after the partial restore", 60*time.Second, func() bool { return e.kept(nss, held...) != nil })

	// Released per copy: that one goes, the others stay.
	e.setLocal(nss[held[0]], held[0], annotate(e.keys.ReleaseDeletion, "true"))
	e.waitDeleted(60*time.Second, nss, held[0])
	if err := e.kept(nss, held[1:]...); err != nil {
		t.Fatalf("release of one copy deleted another: %v", err)
	}
	// Released from management: every hold that started before now.
	e.releaseBefore(time.Now().Add(time.Second))
	e.waitDeleted(90*time.Second, nss, held[1:]...)
	if err := e.kept(nss, restored...); err != nil {
		t.Fatalf("restored copies deleted: %v", err)
	}
}

// A kind with fewer copies than minObjects is still protected: all 4 remote objects vanishing
// (management pointed at an empty cluster) deletes nothing.
func TestSmallKindVanishingHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // the default budget: minObjects 10
	names, nss := e.tenants("sk", 4)
	e.stop()
	e.vanish(nss, names...)
	e.start()
	e.waitEvent(e.local, nss[names[0]], names[0], syncer.ReasonDeletionHeld)
	e.never("a copy of the vanished kind deleted", 10*time.Second, func() bool { return e.kept(nss, names...) != nil })
}

// Mass termination is budgeted: 4 of 6 remote objects deleted at once (beyond a budget of 3)
// keep their copies and stay Terminating with the finalizer, the Region says DeletionsHeld;
// released from the Region, every deletion completes.
func TestMassTerminationBudgeted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.DeletionBudget = regionsync.DeletionBudget{MaxFraction: ptr.To(0.5), MinObjects: ptr.To(0)}
	}))
	e.regionObject()
	names, nss := e.tenants("mt", 6)
	doomed, untouched := names[:4], names[4:]
	for _, n := range doomed {
		o, err := e.getRemote(nss[n], n)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.mgmt.Delete(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	e.waitEvent(e.local, nss[doomed[0]], doomed[0], syncer.ReasonDeletionHeld)
	e.waitDeletionsHeld(30 * time.Second)
	e.never("a held copy deleted", 5*time.Second, func() bool { return e.kept(nss, names...) != nil })
	for _, n := range doomed {
		o, err := e.getRemote(nss[n], n)
		if err != nil {
			t.Fatalf("held remote %s: %v", n, err)
		}
		if o.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(o, e.keys.Finalizer) {
			t.Fatalf("held remote %s: deletion %v, finalizers %v", n, o.DeletionTimestamp, o.Finalizers)
		}
	}
	e.releaseBefore(time.Now().Add(time.Second))
	testenv.Eventually(t, "released deletions complete", 90*time.Second, func() error {
		for _, n := range doomed {
			if _, err := e.getRemote(nss[n], n); !apierrors.IsNotFound(err) {
				return fmt.Errorf("remote %s still there: %v", n, err)
			}
		}
		return nil
	})
	if err := e.kept(nss, untouched...); err != nil {
		t.Fatal(err)
	}
}

// Held orphans cost a bounded number of events, not one per copy per look: 1,000 held copies of a
// kind looked at again every 30 s for 70 s make at most 2 DeletionHeld events, and the agent
// makes no write on management.
func TestHeldOrphansBoundedEvents(t *testing.T) {
	t.Parallel()
	const n = 1000
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})}}
	}))
	ns := e.remoteNamespace("bounded")
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c%03d%s", i, e.suffix)}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if err := e.mgmt.Create(e.ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	list := func(c client.Client, opts ...client.ListOption) []corev1.ConfigMap {
		l := &corev1.ConfigMapList{}
		if err := c.List(e.ctx, l, append(opts, client.InNamespace(ns))...); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	testenv.Eventually(t, "every copy synced", 120*time.Second, func() error {
		if got := len(list(e.local, client.MatchingLabels{e.keys.Region: e.opts.Region})); got != n {
			return fmt.Errorf("%d copies", got)
		}
		return nil
	})
	e.stop()
	for _, cm := range list(e.mgmt) {
		if !slices.Contains(cm.Finalizers, e.keys.Finalizer) {
			continue
		}
		cm.Finalizers = nil
		if err := e.mgmt.Update(e.ctx, &cm); err != nil {
			t.Fatal(err)
		}
		if err := e.mgmt.Delete(e.ctx, &cm); err != nil {
			t.Fatal(err)
		}
	}
	e.remoteWrites.take()
	e.start()
	heldEvents := func() int {
		l := &eventsv1.EventList{}
		if err := e.local.List(e.ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		count := 0
		for _, ev := range l.Items {
			if ev.Reason == syncer.ReasonDeletionHeld {
				count += 1 + int(ptr.Deref(ev.Series, eventsv1.EventSeries{}).Count)
			}
		}
		return count
	}
	testenv.Eventually(t, "the hold reported", 30*time.Second, func() error {
		if heldEvents() == 0 {
			return fmt.Errorf("no DeletionHeld event")
		}
		return nil
	})
	// Over 70 s every held copy is looked at again twice: still one report, no copy gone, no write.
	testenv.Consistently(t, "held copies stay held, reported once, with no management write", 70*time.Second, func() error {
		if got := heldEvents(); got > 2 {
			return fmt.Errorf("%d DeletionHeld events for %d held copies", got, n)
		}
		if got := len(list(e.local, client.MatchingLabels{e.keys.Region: e.opts.Region})); got != n {
			return fmt.Errorf("%d of %d held copies left", got, n)
		}
		if w := e.remoteWrites.take(); len(w) > 0 {
			return fmt.Errorf("writes on management while holding: %v", w)
		}
		return nil
	})
}

// gadgetCRD is a per-test custom resource kind (a kind of its own, so that deleting its CRD
// touches no other test).
func gadgetCRD(group string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gadgets." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
}

// The kind's CRD deleted on management: every object terminates at once; the copies are kept,
// the remote objects stay Terminating with the finalizer and the Region says DeletionsHeld;
// released from the Region, every deletion completes and the CRD goes.
func TestCRDDeletionHeld(t *testing.T) {
	t.Parallel()
	needFleet(t)
	group := fmt.Sprintf("crd%d.budget.example.com", testSeq.Load()+1000)
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Gadget"}
	ctx := context.Background()
	for _, c := range []client.Client{management.Client, region.Client} {
		crd := gadgetCRD(group)
		if err := c.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(ctx, gadgetCRD(group)) })
		testenv.Eventually(t, "CRD served", 30*time.Second, func() error {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk.GroupVersion().WithKind("GadgetList"))
			return c.List(ctx, l)
		})
	}
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Gadget"})}}
	}))
	e.regionObject()
	ns := e.remoteNamespace("crd")
	gadget := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	names := []string{"g0", "g1", "g2", "g3"}
	for i, n := range names {
		g := gadget(n + e.suffix)
		g.Object["spec"] = map[string]any{"size": int64(i)}
		if err := e.mgmt.Create(e.ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	kept := func() error {
		for _, n := range names {
			g := gadget(n)
			if err := e.local.Get(e.ctx, client.ObjectKeyFromObject(g), g); err != nil {
				return fmt.Errorf("copy %s: %w", n, err)
			}
			if g.GetDeletionTimestamp() != nil {
				return fmt.Errorf("copy %s is being deleted", n)
			}
		}
		return nil
	}
	testenv.Eventually(t, "copies synced", 60*time.Second, kept)
	crd := gadgetCRD(group)
	if err := e.mgmt.Delete(e.ctx, crd); err != nil {
		t.Fatal(err)
	}
	e.waitDeletionsHeld(60 * time.Second)
	e.never("a copy deleted while held", 5*time.Second, func() bool { return kept() != nil })
	for _, n := range names {
		g := gadget(n + e.suffix)
		if err := e.mgmt.Get(e.ctx, client.ObjectKeyFromObject(g), g); err != nil {
			t.Fatalf("held remote %s: %v", n, err)
		}
		if g.GetDeletionTimestamp() == nil || !controllerutil.ContainsFinalizer(g, e.keys.Finalizer) {
			t.Fatalf("held remote %s: deletion %v, finalizers %v", n, g.GetDeletionTimestamp(), g.GetFinalizers())
		}
	}
	e.releaseBefore(time.Now().Add(time.Second))
	testenv.Eventually(t, "released deletions complete and the CRD goes", 120*time.Second, func() error {
		err := e.mgmt.Get(e.ctx, client.ObjectKeyFromObject(crd), crd)
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("CRD still there: %v", err)
		}
		return nil
	})
	for _, n := range names {
		g := gadget(n)
		if err := e.local.Get(e.ctx, client.ObjectKeyFromObject(g), g); err == nil && g.GetDeletionTimestamp() == nil {
			t.Fatalf("copy %s kept after its release", n)
		}
	}
}

// waitDeletionsHeld waits until the agent's Region says DeletionsHeld=True.
func (e *env) waitDeletionsHeld(timeout time.Duration) {
	e.t.Helper()
	testenv.Eventually(e.t, "Region condition DeletionsHeld=True", timeout, func() error {
		r := &regionsyncv1alpha1.Region{}
		if err := e.mgmt.Get(e.ctx, client.ObjectKey{Name: e.opts.Region}, r); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(r.Status.Conditions, regionsyncv1alpha1.ConditionDeletionsHeld) {
			return fmt.Errorf("conditions %+v", r.Status.Conditions)
		}
		return nil
	})
}
