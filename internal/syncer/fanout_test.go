//go:build integration

package syncer_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/internal/telemetry"
	"github.com/regionsync/regionsync/internal/telemetry/tracer"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// fanOut is one test's view of namespace fan-out: the label its namespaces are selected by.
type fanOut struct {
	*env
	label string
}

// namespace creates (or relabels) a local namespace of the test with labels.
func (f *fanOut) namespace(name string, labels map[string]string) {
	f.t.Helper()
	ns := &corev1.Namespace{}
	err := f.local.Get(f.ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		err = f.local.Create(f.ctx, ns)
	case err == nil:
		ns.Labels = labels
		err = f.local.Update(f.ctx, ns)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// relabel sets (value non-empty) or removes the test's label on an existing namespace.
func (f *fanOut) relabel(name, value string) {
	f.t.Helper()
	ns := &corev1.Namespace{}
	if err := f.local.Get(f.ctx, client.ObjectKey{Name: name}, ns); err != nil {
		f.t.Fatal(err)
	}
	before := ns.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	if value == "" {
		delete(ns.Labels, f.label)
	} else {
		ns.Labels[f.label] = value
	}
	if err := f.local.Patch(f.ctx, ns, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

// copyIn returns the ConfigMap name in namespace ns of the region (nil when there is none).
func (f *fanOut) copyIn(ns, name string) *corev1.ConfigMap {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	err := f.local.Get(f.ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return cm
}

// waitCopies waits until exactly the namespaces in want (of those in all) hold a current copy of
// source named name, with data, the region's mark and the source's identity.
func (f *fanOut) waitCopies(source types.NamespacedName, name string, data map[string]string, all, want []string) {
	f.t.Helper()
	f.eventually(fmt.Sprintf("copies of %s in exactly %v", source, want), func() error {
		for _, ns := range all {
			cm := f.copyIn(ns, name)
			if !slices.Contains(want, ns) {
				if cm != nil && cm.Labels[f.keys.Region] == f.opts.Region {
					return fmt.Errorf("a copy in %s", ns)
				}
				continue
			}
			switch {
			case cm == nil:
				return fmt.Errorf("no copy in %s", ns)
			case !maps.Equal(cm.Data, data):
				return fmt.Errorf("copy in %s has data %v", ns, cm.Data)
			case cm.Labels[f.keys.Region] != f.opts.Region || cm.Annotations[f.keys.FanOutSourceKey] != source.String() || cm.Labels[f.keys.FanOutSource] == "":
				return fmt.Errorf("copy in %s is not marked as the region's copy of %s: labels %v annotations %v", ns, source, cm.Labels, cm.Annotations)
			}
		}
		return nil
	})
}

// report reads the fan-out report on a management object.
func (f *fanOut) report(key types.NamespacedName) (matching, current int, failed []string, err error) {
	cm := &corev1.ConfigMap{}
	if err := f.mgmt.Get(f.ctx, key, cm); err != nil {
		return 0, 0, nil, err
	}
	var r struct {
		Matching, Current int
		Failed            []string
	}
	v, ok := cm.Annotations[f.keys.FanOutReport]
	if !ok {
		return 0, 0, nil, fmt.Errorf("no report on %s", key)
	}
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return 0, 0, nil, fmt.Errorf("report %q: %w", v, err)
	}
	return r.Matching, r.Current, r.Failed, nil
}

// setAnnotation sets the fan-out annotation on a management ConfigMap.
func (f *fanOut) setAnnotation(key types.NamespacedName, value string) {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := f.mgmt.Get(f.ctx, key, cm); err != nil {
		f.t.Fatal(err)
	}
	before := cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[f.keys.FanOutNamespaces] = value
	if err := f.mgmt.Patch(f.ctx, cm, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

// caSource creates the test's CA ConfigMap on management, in its namespace "src", fanned out to
// the namespaces labelled with the test's label, and returns its key and data (its copies are
// named "ca").
func (f *fanOut) caSource() (types.NamespacedName, map[string]string) {
	f.t.Helper()
	key := types.NamespacedName{Namespace: f.remoteNamespace("src"), Name: "ca" + f.suffix}
	data := map[string]string{"ca.crt": "one"}
	if err := f.mgmt.Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Annotations: map[string]string{f.keys.FanOutNamespaces: f.label + "=yes"}}, Data: data}); err != nil {
		f.t.Fatal(err)
	}
	return key, data
}

// TestFanOutBySelector fans a ConfigMap out by label selector to the matching namespaces of the
// region and follows every change: a namespace created or labelled later, a label removed, a
// drifted or deleted copy, an unmarked object in the way, kube-system and namespaces outside the
// scope labelled alike, an empty selector, a selector change beyond the deletion budget, and
// the source's deletion.
func TestFanOutBySelector(t *testing.T) {
	t.Parallel()
	var wide string
	e := newEnv(t, withStartLater(), withOptions(func(o *regionsync.Options) {
		o.Shard.NamespacePrefix = o.Region[len("region-"):] + "-"
		wide = o.Region[len("region-"):] + "-wide"
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}),
			FanOut: &regionsync.FanOut{Enabled: true, WideSourceNamespaces: []string{wide}}}}
		// Two removals at once are routine; five within the window are not.
		o.DeletionBudget = regionsync.DeletionBudget{MinObjects: ptr.To(3), MaxFraction: ptr.To(0.1)}
	}))
	f := &fanOut{env: e, label: "fanout-" + e.name}
	sel := map[string]string{f.label: "yes"}
	a, b, c, d, later, taken := e.ns("a"), e.ns("b"), e.ns("c"), e.ns("d"), e.ns("later"), e.ns("taken")
	outside := "other-" + e.name // not in the shard's namespace scope (prefix)
	for _, ns := range []string{a, b, c, outside} {
		f.namespace(ns, sel)
	}
	f.namespace(d, nil)
	f.relabel("kube-system", "yes")
	t.Cleanup(func() { f.relabel("kube-system", "") })
	all := []string{a, b, c, d, later, taken, outside, "kube-system", "default"}

	// A tenant's source fans out within the shard's scope; a source of the wide namespace
	// everywhere but the protected namespaces.
	src := e.remoteNamespace("src")
	e.remoteNamespace("wide")
	tenant := types.NamespacedName{Namespace: src, Name: "ca" + e.suffix}
	platform := types.NamespacedName{Namespace: wide, Name: "platform" + e.suffix}
	data := map[string]string{"ca.crt": "one"}
	for _, key := range []types.NamespacedName{tenant, platform} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Annotations: map[string]string{e.keys.FanOutNamespaces: f.label + "=yes"}}, Data: data}
		if err := e.mgmt.Create(e.ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	e.start()
	f.waitCopies(tenant, "ca", data, all, []string{a, b, c})
	f.waitCopies(platform, "platform", data, all, []string{a, b, c, outside})
	e.eventually("the finalizer and a full report on the tenant source", func() error {
		cm := &corev1.ConfigMap{}
		if err := e.mgmt.Get(e.ctx, tenant, cm); err != nil {
			return err
		}
		if !slices.Contains(cm.Finalizers, e.keys.Finalizer) {
			return fmt.Errorf("finalizers %v", cm.Finalizers)
		}
		if m, cur, failed, err := f.report(tenant); err != nil || m != 3 || cur != 3 || len(failed) > 0 {
			return fmt.Errorf("report matching %d current %d failed %v (%v)", m, cur, failed, err)
		}
		return nil
	})
	if err := e.local.Get(e.ctx, client.ObjectKey{Name: src}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a namespace was created for the fan-out object (its mapped namespace %s): %v", src, err)
	}
	e.eventually("the kind's fan-out counts (the Region's, the metric's)", func() error {
		for _, st := range e.syncer.Stats() {
			if st.Resource == "ConfigMap" && st.FanOutMatching == 7 && st.FanOutCurrent == 7 && st.FanOutFailed == 0 && st.Counts["synced"] == 2 {
				return nil
			}
		}
		return fmt.Errorf("stats %+v", e.syncer.Stats())
	})

	// An ordinary object whose mapped name a fan-out copy holds does not overwrite it.
	e.remoteNamespace("a")
	ordinary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "ca" + e.suffix}, Data: map[string]string{"other": "object"}}
	if err := e.mgmt.Create(e.ctx, ordinary); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(e.mgmt, a, ordinary.Name, syncer.ReasonFanOutCollision)
	if err := e.mgmt.Delete(e.ctx, ordinary); err != nil {
		t.Fatal(err)
	}
	e.eventually("the ordinary object released", func() error {
		if err := e.mgmt.Get(e.ctx, client.ObjectKeyFromObject(ordinary), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	f.waitCopies(tenant, "ca", data, all, []string{a, b, c})

	// A namespace created with the label gets its copy; a label removed loses it.
	f.namespace(later, sel)
	f.waitCopies(tenant, "ca", data, all, []string{a, b, c, later})
	f.relabel(b, "")
	f.waitCopies(tenant, "ca", data, all, []string{a, c, later})

	// A drifted copy is reverted, a deleted one recreated.
	drifted := f.copyIn(a, "ca")
	drifted.Data = map[string]string{"ca.crt": "local edit"}
	if err := e.local.Update(e.ctx, drifted); err != nil {
		t.Fatal(err)
	}
	if err := e.local.Delete(e.ctx, f.copyIn(c, "ca")); err != nil {
		t.Fatal(err)
	}
	f.waitCopies(tenant, "ca", data, all, []string{a, c, later})

	// An unmarked object in the way is never adopted: left alone, reported, counted as failed.
	f.namespace(taken, nil)
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "ca"}, Data: map[string]string{"mine": "yes"}}
	if err := e.local.Create(e.ctx, mine); err != nil {
		t.Fatal(err)
	}
	f.relabel(taken, "yes")
	e.waitEvent(e.mgmt, src, tenant.Name, syncer.ReasonAdoptionRefused)
	e.eventually("the refused namespace in the report", func() error {
		if m, cur, failed, err := f.report(tenant); err != nil || m != 4 || cur != 3 || !slices.Equal(failed, []string{taken}) {
			return fmt.Errorf("report matching %d current %d failed %v (%v)", m, cur, failed, err)
		}
		return nil
	})
	if got := f.copyIn(taken, "ca"); !maps.Equal(got.Data, mine.Data) || got.Labels[e.keys.Region] != "" {
		t.Fatalf("the unmarked object was changed: %v %v", got.Labels, got.Data)
	}

	// An empty selector is invalid: reported, and nothing is created or deleted.
	empty := types.NamespacedName{Namespace: src, Name: "empty" + e.suffix}
	if err := e.mgmt.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: empty.Namespace, Name: empty.Name,
		Annotations: map[string]string{e.keys.FanOutNamespaces: ""}}, Data: data}); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(e.mgmt, src, empty.Name, syncer.ReasonInvalidFanOut)

	// A selector that would remove every copy at once is held by the deletion budget.
	f.setAnnotation(tenant, f.label+"=typo")
	e.never("a copy removed by a selector typo", 8*time.Second, func() bool {
		return f.copyIn(a, "ca") == nil || f.copyIn(c, "ca") == nil || f.copyIn(later, "ca") == nil
	})
	e.waitEvent(e.local, a, "ca", syncer.ReasonDeletionHeld)
	// The region's release on one copy lets that deletion through, and only that one.
	held := f.copyIn(later, "ca")
	held.Annotations[e.keys.ReleaseDeletion] = "true"
	if err := e.local.Update(e.ctx, held); err != nil {
		t.Fatal(err)
	}
	e.eventually("the released copy deleted", func() error {
		if f.copyIn(later, "ca") != nil {
			return fmt.Errorf("the released copy in %s is still there", later)
		}
		return nil
	})
	if f.copyIn(a, "ca") == nil || f.copyIn(c, "ca") == nil {
		t.Fatal("a held copy was deleted with the released one")
	}
	f.setAnnotation(tenant, f.label+"=yes")
	f.waitCopies(tenant, "ca", data, all, []string{a, c, later})
	// The selector restored, nothing is doomed any more: the hold ends by itself.
	e.eventually("the hold over", func() error {
		for _, st := range e.syncer.Stats() {
			if st.Resource == "ConfigMap" && st.DeletionsHeld == 0 {
				return nil
			}
		}
		return fmt.Errorf("stats %+v", e.syncer.Stats())
	})

	// Deleting the source deletes every copy, then releases the finalizer; the unmarked object
	// stays.
	if err := e.mgmt.Delete(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Namespace, Name: tenant.Name}}); err != nil {
		t.Fatal(err)
	}
	f.waitCopies(tenant, "ca", data, []string{a, b, c, d, later, outside}, nil)
	e.eventually("the source gone", func() error {
		if err := e.mgmt.Get(e.ctx, tenant, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("source still there: %v", err)
		}
		return nil
	})
	if got := f.copyIn(taken, "ca"); got == nil || !maps.Equal(got.Data, mine.Data) {
		t.Fatal("the unmarked object was deleted or changed")
	}
	// The other source's copies are untouched.
	f.waitCopies(platform, "platform", data, all, []string{a, c, later, taken, outside})
}

// TestFanOutSingleCluster is k8s-object-syncer's job in one cluster: management and the region
// are the same cluster; a per-region object (as the hub writes for a Distribution with
// spec.source and spec.namespaces "*") is copied into every namespace in the agent's scope, a new
// namespace gets it, and neither the source object nor the per-region object is ever
// overwritten. Deleting the per-region object removes every copy.
func TestFanOutSingleCluster(t *testing.T) {
	t.Parallel()
	needFleet(t)
	e := newEnv(t, withStartLater(), withManagementConfig(region.Config), withOptions(func(o *regionsync.Options) {
		o.Shard.NamespacePrefix = o.Region[len("region-"):] + "-"
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}), FanOut: &regionsync.FanOut{Enabled: true}}}
	}))
	e.mgmt = region.Client // one cluster
	f := &fanOut{env: e}
	team, a, b, later := e.ns("team"), e.ns("a"), e.ns("b"), e.ns("later")
	for _, ns := range []string{team, a, b} {
		f.namespace(ns, nil)
	}
	// The source the Distribution names, and the per-region object the hub renders from it.
	source := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "pull"}, Data: map[string]string{"v": "source"}}
	perRegion := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "pull" + e.suffix,
		Annotations: map[string]string{e.keys.FanOutNamespaces: "*"}}, Data: map[string]string{"v": "source"}}
	for _, o := range []*corev1.ConfigMap{source, perRegion} {
		if err := e.local.Create(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	e.start()
	key := client.ObjectKeyFromObject(perRegion)
	f.waitCopies(key, "pull", source.Data, []string{a, b, "kube-system", "default"}, []string{a, b})
	f.namespace(later, nil)
	f.waitCopies(key, "pull", source.Data, []string{a, b, later}, []string{a, b, later})
	e.settle(3 * time.Second)
	got := f.copyIn(team, "pull")
	if got.Labels[e.keys.Region] != "" || !maps.Equal(got.Data, source.Data) || got.ResourceVersion != source.ResourceVersion {
		t.Fatalf("the source object was written: labels %v data %v", got.Labels, got.Data)
	}
	if reasons, err := events(e.ctx, e.local, team, "pull"+e.suffix); err != nil || slices.Contains(reasons, syncer.ReasonAdoptionRefused) {
		t.Fatalf("the source namespace was not skipped: events %v (%v)", reasons, err)
	}
	if err := e.local.Delete(e.ctx, perRegion); err != nil {
		t.Fatal(err)
	}
	f.waitCopies(key, "pull", source.Data, []string{a, b, later}, nil)
	e.eventually("the per-region object gone", func() error {
		if err := e.local.Get(e.ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	if f.copyIn(team, "pull") == nil {
		t.Fatal("the source object was deleted")
	}
}

// TestFanOutTurnedOnAndOff: an object with an ordinary copy that starts asking for fan-out turns
// that copy into the fan-out copy of its namespace (no second object) and gets copies in the
// other matching namespaces; when it stops asking, every fan-out copy goes and its ordinary copy
// comes back, with its generation annotations.
func TestFanOutTurnedOnAndOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Shard.NamespacePrefix = o.Region[len("region-"):] + "-"
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}), FanOut: &regionsync.FanOut{Enabled: true}}}
	}))
	f := &fanOut{env: e, label: "fanout-" + e.name}
	src, other := e.remoteNamespace("src"), e.ns("other")
	f.namespace(other, map[string]string{f.label: "yes"})
	key := types.NamespacedName{Namespace: src, Name: "x" + e.suffix}
	data := map[string]string{"k": "v"}
	if err := e.mgmt.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: data}); err != nil {
		t.Fatal(err)
	}
	var ordinaryUID types.UID
	e.eventually("the ordinary copy", func() error {
		cm := f.copyIn(src, "x")
		if cm == nil || cm.Labels[e.keys.Region] != e.opts.Region {
			return fmt.Errorf("no copy in %s", src)
		}
		ordinaryUID = cm.UID
		return nil
	})
	f.relabel(src, "yes")
	f.setAnnotation(key, f.label+"=yes")
	f.waitCopies(key, "x", data, []string{src, other}, []string{src, other})
	if got := f.copyIn(src, "x"); got.UID != ordinaryUID {
		t.Fatalf("the ordinary copy was replaced (uid %s, was %s), not taken over as the fan-out copy", got.UID, ordinaryUID)
	}

	// Stop asking: the fan-out copies go, the ordinary copy comes back.
	cm := &corev1.ConfigMap{}
	if err := e.mgmt.Get(e.ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	before := cm.DeepCopy()
	delete(cm.Annotations, e.keys.FanOutNamespaces)
	if err := e.mgmt.Patch(e.ctx, cm, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	e.eventually("only the ordinary copy, current", func() error {
		if f.copyIn(other, "x") != nil {
			return fmt.Errorf("a copy is left in %s", other)
		}
		local := f.copyIn(src, "x")
		if local == nil || local.Labels[e.keys.FanOutSource] != "" || local.Labels[e.keys.Region] != e.opts.Region {
			return fmt.Errorf("no ordinary copy in %s: %v", src, local)
		}
		remote := &corev1.ConfigMap{}
		if err := e.mgmt.Get(e.ctx, key, remote); err != nil {
			return err
		}
		if remote.Annotations[e.keys.RemoteGeneration] == "" {
			return fmt.Errorf("no generation annotations: %v", remote.Annotations)
		}
		return nil
	})
}

// TestFanOutApply: with strategy Apply a copy is written by server-side apply, fields another
// writer owns survive, and an unmarked object in the way is looked at first, never applied over.
func TestFanOutApply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Shard.NamespacePrefix = o.Region[len("region-"):] + "-"
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}), Strategy: regionsync.StrategyApply,
			FanOut: &regionsync.FanOut{Enabled: true}}}
	}))
	f := &fanOut{env: e, label: "fanout-" + e.name}
	a, taken := e.ns("a"), e.ns("taken")
	f.namespace(a, map[string]string{f.label: "yes"})
	f.namespace(taken, nil)
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "ca"}, Data: map[string]string{"mine": "yes"}}
	if err := e.local.Create(e.ctx, mine); err != nil {
		t.Fatal(err)
	}
	f.relabel(taken, "yes")
	key, data := f.caSource()
	f.waitCopies(key, "ca", data, []string{a}, []string{a})
	e.waitEvent(e.mgmt, key.Namespace, key.Name, syncer.ReasonAdoptionRefused)
	if got := f.copyIn(taken, "ca"); !maps.Equal(got.Data, mine.Data) || got.Labels[e.keys.Region] != "" {
		t.Fatalf("the unmarked object was applied over: labels %v data %v", got.Labels, got.Data)
	}
	// A field another writer adds survives; a field the source owns is re-applied.
	cm := f.copyIn(a, "ca")
	before := cm.DeepCopy()
	cm.Data["local"] = "kept"
	cm.Data["ca.crt"] = "drift"
	if err := e.local.Patch(e.ctx, cm, client.MergeFrom(before), client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	e.eventually("the source's field re-applied, the local one kept", func() error {
		got := f.copyIn(a, "ca")
		if got.Data["ca.crt"] != "one" || got.Data["local"] != "kept" {
			return fmt.Errorf("data %v", got.Data)
		}
		return nil
	})
}

// shippedAgentRBAC applies, in the region, the RBAC of the shipped agent directories under
// deploy/kustomize, and returns a configuration acting as the agent's ServiceAccount.
func shippedAgentRBAC(t *testing.T, dirs ...string) *rest.Config {
	t.Helper()
	needFleet(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, dir := range dirs {
		rendered, err := deploy.Render(filepath.Join(root, "deploy", "kustomize", dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rendered {
			switch o.GetKind() {
			case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
				objs = append(objs, o)
			}
		}
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"} {
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			o = o.DeepCopy()
			if err := region.Client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("fanout-test"), client.ForceOwnership); err != nil {
				t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
	agent := rest.CopyConfig(region.Config)
	agent.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:regionsync-system:regionsync-agent",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:regionsync-system", "system:authenticated"}}
	return agent
}

// TestFanOutShippedRBAC runs a fan-out agent in the region as the agent's ServiceAccount with
// exactly the shipped base RBAC (deploy/kustomize/agent) plus the fan-out add-on
// (deploy/kustomize/agent-fanout): enough to fan a ConfigMap out, present and future namespaces.
func TestFanOutShippedRBAC(t *testing.T) {
	t.Parallel()
	agent := shippedAgentRBAC(t, "agent", "agent-fanout")
	e := newEnv(t, withLocalConfig(agent), withOptions(func(o *regionsync.Options) {
		o.Shard.NamespacePrefix = o.Region[len("region-"):] + "-"
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}), FanOut: &regionsync.FanOut{Enabled: true}}}
	}))
	f := &fanOut{env: e, label: "fanout-" + e.name}
	a, later := e.ns("a"), e.ns("later")
	f.namespace(a, map[string]string{f.label: "yes"})
	key, data := f.caSource()
	f.waitCopies(key, "ca", data, []string{a}, []string{a})
	f.namespace(later, map[string]string{f.label: "yes"})
	f.waitCopies(key, "ca", data, []string{a, later}, []string{a, later})
}

// TestFanOutNamespaceEventCost: a namespace event costs one namespace, whatever the number the
// object fans out to. With 30 namespaces holding copies, the pass that gives a namespace created
// later its copy, and the pass that removes it when its label goes, each look at that one
// namespace (the sync span's regionsync.fanout.namespaces); the full pass that follows recounts
// the report.
func TestFanOutNamespaceEventCost(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp, _, err := tracer.NewTestTracerProvider(rec, tracer.Identity{Region: "region"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withStartLater(), withTracerProvider(tp), withOptions(func(o *regionsync.Options) {
		o.Shard.NamespacePrefix = o.Region[len("region-"):] + "-"
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}),
			FanOut: &regionsync.FanOut{Enabled: true}}}
	}))
	f := &fanOut{env: e, label: "fanout-" + e.name}
	sel := map[string]string{f.label: "yes"}
	const n = 30
	nss := make([]string, 0, n)
	for i := range n {
		nss = append(nss, e.ns(fmt.Sprintf("n%02d", i)))
		f.namespace(nss[i], sel)
	}
	key, data := f.caSource()
	e.start()
	later := e.ns("later")
	all := append(slices.Clone(nss), later)
	f.waitCopies(key, "ca", data, all, nss)
	if examined := passExamining(t, rec, key, "create local", nss[0]+"/ca"); examined < n {
		t.Fatalf("the first pass looked at %d namespaces, want every one (≥ %d)", examined, n)
	}

	// A narrow pass looks at the namespaces whose events it was woken for: this one, and any
	// namespace other tests sharing the regional API server changed meanwhile.
	const narrowWant = "1, plus the namespaces other tests changed meanwhile; a full pass looks at every one"
	f.namespace(later, sel)
	f.waitCopies(key, "ca", data, all, all)
	if examined := passExamining(t, rec, key, "create local", later+"/ca"); examined >= n {
		t.Errorf("the pass that copied into the new namespace looked at %d namespaces, want a narrow pass (%s)", examined, narrowWant)
	}
	f.relabel(later, "")
	f.waitCopies(key, "ca", data, all, nss)
	if examined := passExamining(t, rec, key, "delete local", later+"/ca"); examined >= n {
		t.Errorf("the pass that removed the copy of the unlabelled namespace looked at %d namespaces, want a narrow pass (%s)", examined, narrowWant)
	}
	e.eventually("the report recounted by the full pass after the narrow ones", func() error {
		if m, cur, failed, err := f.report(key); err != nil || m != n || cur != n || len(failed) > 0 {
			return fmt.Errorf("report matching %d current %d failed %v (%v)", m, cur, failed, err)
		}
		return nil
	})
}

// passExamining returns the regionsync.fanout.namespaces of the sync span of remote whose child
// write span did verb on object (namespace/name); the test fails when there is none.
func passExamining(t *testing.T, rec *tracetest.SpanRecorder, remote types.NamespacedName, verb, object string) int {
	t.Helper()
	spans := rec.Ended()
	for _, w := range spans {
		if w.Name() != verb || !slices.Contains(w.Attributes(), telemetry.AttrWriteObject.String(object)) {
			continue
		}
		for _, p := range spans {
			if p.SpanContext().SpanID() != w.Parent().SpanID() || !slices.Contains(p.Attributes(), telemetry.AttrRemote.String(remote.String())) {
				continue
			}
			for _, kv := range p.Attributes() {
				if kv.Key == telemetry.AttrFanOutNamespaces {
					return int(kv.Value.AsInt64())
				}
			}
			t.Fatalf("the sync span of %s that did %s %s has no %s", remote, verb, object, telemetry.AttrFanOutNamespaces)
		}
	}
	t.Fatalf("no sync span of %s did %s %s", remote, verb, object)
	return 0
}
