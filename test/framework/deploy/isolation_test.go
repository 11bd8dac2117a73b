//go:build integration

package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The management base is accepted by a real API server, and its admission policy alone (the
// caller is also in system:masters, so RBAC allows everything) keeps a region's identity to its
// own objects (and on them to what its agent writes), Lease, Region and Events (in both Event
// APIs, also where RBAC refuses the shipped identities), with the policy's own messages (an
// expression that fails to evaluate denies too, with another message), and leaves other users
// alone.
func TestIsolationPolicyOnAPIServer(t *testing.T) {
	objs, err := Render("../../../deploy/kustomize/management")
	if err != nil {
		t.Fatal(err)
	}
	cluster := testenv.StartT(t, "management").Cluster("management")
	admin := cluster.Client
	ctx := context.Background()
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue // testenv installs deploy/crds
		}
		if err := admin.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	as := func(user string) client.Client {
		c, err := client.New(cluster.ImpersonatingConfig(user, "system:masters"), client.Options{Scheme: admin.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	us, alice := as(RegionUserPrefix+"us"), as("alice")
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}); err != nil {
		t.Fatal(err)
	}
	tenant := func(name, region string) *demov1alpha1.Tenant {
		tn := &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name, Labels: map[string]string{regionsyncv1alpha1.RegionLabel: region}},
			Spec: demov1alpha1.TenantSpec{DisplayName: name, Plan: "team"}}
		if err := admin.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
		return tn
	}
	own, foreign := tenant("a-us", "us"), tenant("a-eu", "eu")
	for _, r := range []string{"us", "eu"} {
		if err := admin.Create(ctx, &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: r}}); err != nil {
			t.Fatal(err)
		}
	}
	annotate := func(c client.Client, o client.Object, v string) error {
		return c.Patch(ctx, o, merge(`{"metadata":{"annotations":{"regionsync.dev/sync-remote-generation":"`+v+`"}}}`))
	}
	denied := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+IsolationPolicy+"'") ||
			!strings.Contains(err.Error(), "denied request: region us ") {
			t.Errorf("%s: want the policy's denial, got %v", what, err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	// The policy is loaded asynchronously.
	testenv.Eventually(t, "the policy denies region us a write on region eu's object", 30*time.Second, func() error {
		if err := annotate(us, foreign.DeepCopy(), "1"); !apierrors.IsForbidden(err) {
			return fmt.Errorf("answered %v", err)
		}
		return nil
	})

	denied("annotate another region's object", annotate(us, foreign.DeepCopy(), "2"))
	allowed("annotate another region's object as another user", annotate(alice, foreign, "1"))
	st := own.DeepCopy()
	st.Status.Phase = "Ready"
	allowed("update its own object's status", us.Status().Update(ctx, st))
	fst := foreign.DeepCopy()
	fst.Status.Phase = "Ready"
	denied("update another region's status", us.Status().Update(ctx, fst))
	spec := st.DeepCopy()
	spec.Spec.Plan = "free"
	denied("change its own object's spec", us.Update(ctx, spec))
	fin := st.DeepCopy()
	fin.Finalizers = []string{"regionsync.dev/sync-local"}
	allowed("add its finalizer", us.Update(ctx, fin))
	allowed("write its generation annotations", annotate(us, fin, "1"))
	other := fin.DeepCopy()
	other.Finalizers = append(other.Finalizers, "example.com/keep")
	denied("add another finalizer", us.Update(ctx, other))
	relabel := fin.DeepCopy()
	relabel.Labels[regionsyncv1alpha1.RegionLabel] = "eu"
	denied("relabel its own object", us.Update(ctx, relabel))
	owned := fin.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "6d1f0c52-3c38-4b1a-9d2e-5a8d3c0b7e41"}}
	denied("give its own object an owner", us.Update(ctx, owned))
	foreignKey := fin.DeepCopy()
	foreignKey.Annotations["example.com/approved"] = "yes"
	denied("write another annotation on its own object", us.Update(ctx, foreignKey))
	denied("delete its own object", us.Delete(ctx, fin.DeepCopy()))

	// Events: only its own, whichever API serves them.
	event := func(name, region string) *corev1.Event {
		ev := testEvent("tenant-a", name, own)
		if region != "" {
			ev.Labels = map[string]string{regionsyncv1alpha1.RegionLabel: region}
		}
		return ev
	}
	euEvent := event("eu-warning", "eu")
	if err := admin.Create(ctx, euEvent); err != nil {
		t.Fatal(err)
	}
	denied("patch another region's Event", us.Patch(ctx, euEvent.DeepCopy(), merge(`{"type":"Normal"}`)))
	denied("annotate another region's Event through events.k8s.io", us.Patch(ctx,
		&eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: euEvent.Namespace, Name: euEvent.Name}}, merge(`{"metadata":{"annotations":{"example.com/verdict":"benign"}}}`)))
	normal := euEvent.DeepCopy()
	normal.Type = corev1.EventTypeNormal
	denied("update another region's Event", us.Update(ctx, normal))
	denied("delete another region's Event", us.Delete(ctx, euEvent.DeepCopy()))
	denied("create an Event labelled for another region", us.Create(ctx, event("forged", "eu")))
	denied("create an unlabelled Event", us.Create(ctx, event("anonymous", "")))
	ownEvent := event("us-warning", "us")
	allowed("create its own Event", us.Create(ctx, ownEvent))
	allowed("patch its own Event", us.Patch(ctx, ownEvent, merge(`{"count":2}`)))
	denied("give its own Event to another region", us.Patch(ctx, ownEvent.DeepCopy(), merge(`{"metadata":{"labels":{"`+regionsyncv1alpha1.RegionLabel+`":"eu"}}}`)))
	allowed("delete its own Event", us.Delete(ctx, ownEvent))

	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "regionsync-system", Name: name}}
	}
	denied("create another region's Lease", us.Create(ctx, lease(claim.LeaseName("eu"))))
	denied("create a Lease of another name", us.Create(ctx, lease("squatter")))
	withRegistered := lease(claim.LeaseName("us"))
	withRegistered.Annotations = map[string]string{claim.RegisteredAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}
	denied("create its Lease already registered", us.Create(ctx, withRegistered))
	ownLease := lease(claim.LeaseName("us"))
	allowed("create its own Lease", us.Create(ctx, ownLease))
	old := ownLease.DeepCopy()
	old.Annotations = map[string]string{claim.RegisteredAnnotation: "2001-01-01T00:00:00Z"}
	denied("register its Lease before it existed", us.Update(ctx, old))
	ownLease.Annotations = map[string]string{claim.RegisteredAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}
	allowed("register its Lease", us.Update(ctx, ownLease))
	moved := ownLease.DeepCopy()
	moved.Annotations[claim.RegisteredAnnotation] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	denied("change its registration", us.Update(ctx, moved))
	ownLease.Spec.HolderIdentity = ptr.To("us-replica-0")
	allowed("renew its Lease", us.Update(ctx, ownLease))

	region := func(name string) *regionsyncv1alpha1.Region {
		r := &regionsyncv1alpha1.Region{}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, r); err != nil {
			t.Fatal(err)
		}
		r.Status.Leader = "us-replica-0"
		return r
	}
	allowed("update its own Region's status", us.Status().Update(ctx, region("us")))
	denied("update another Region's status", us.Status().Update(ctx, region("eu")))
	spoofed := region("us")
	spoofed.Spec.Description = "changed"
	denied("update its own Region's spec", us.Update(ctx, spoofed))
}

func merge(patch string) client.Patch { return client.RawPatch(types.MergePatchType, []byte(patch)) }

// testEvent is a Warning Event named name about obj, as the agents write them on management.
func testEvent(namespace, name string, obj client.Object) *corev1.Event {
	now := metav1.Now()
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		InvolvedObject: corev1.ObjectReference{APIVersion: demov1alpha1.GroupVersion.String(), Kind: "Tenant",
			Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()},
		Type: corev1.EventTypeWarning, Reason: syncer.ReasonAdoptionRefused, Message: "an unmarked object is in the way",
		Source: corev1.EventSource{Component: syncer.EventSource}, ReportingController: syncer.EventSource,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
}

// mechanism is what must refuse a region's request: RBAC (the shipped roles) or the admission
// policy, each asserted so that a refusal for another reason cannot pass for isolation.
type mechanism string

const (
	byRBAC   mechanism = "RBAC"
	byPolicy mechanism = "admission policy"
)

// refusedBy reports whether err is m's Forbidden answer to region: for the policy one of its own
// messages (an expression that fails to evaluate denies too, with another message).
func refusedBy(err error, m mechanism, region string) error {
	if err == nil {
		return errors.New("allowed")
	}
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("want Forbidden by %s, got %w", m, err)
	}
	policy := strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+IsolationPolicy+"'")
	switch {
	case m == byPolicy && !strings.Contains(err.Error(), "denied request: region "+region+" "):
		return fmt.Errorf("want one of the policy's own messages, got %w", err)
	case m == byRBAC && (policy || !strings.Contains(err.Error(), " cannot ")):
		return fmt.Errorf("want an RBAC denial, got %w", err)
	}
	return nil
}

// shippedManagement starts a management cluster and applies what an operator applies: the
// management base and every shipped region's registration (deploy/regions/*/management), after
// edit (nil: as shipped) changed the rendered objects. It returns the cluster and, per region, a
// client acting as that region's identity (its ServiceAccount, impersonated with the groups a
// token of it has): RBAC and the admission policy decide as for the real credential. It returns
// once the policy is in force.
func shippedManagement(t *testing.T, edit func(objs []*unstructured.Unstructured)) (*testenv.Cluster, map[string]client.Client) {
	t.Helper()
	ctx := context.Background()
	cluster := testenv.StartT(t, "management").Cluster("management")
	objs, err := Render("../../../deploy/kustomize/management")
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]client.Client{}
	for _, r := range regions(t) {
		ro, err := Render(filepath.Join(regionsDir, r, "management"))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, ro...)
		if clients[r], err = cluster.ServiceAccountClient("regionsync-system", "region-"+r); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit(objs)
	}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue // testenv installs deploy/crds
		}
		if err := cluster.Client.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	// The policy is loaded asynchronously: a Lease of another name is refused by it.
	r := regions(t)[0]
	testenv.Eventually(t, "the admission policy in force", 30*time.Second, func() error {
		err := clients[r].Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "regionsync-system", Name: "squatter"}})
		return refusedBy(err, byPolicy, r)
	})
	return cluster, clients
}

// syncConfigMaps makes ConfigMaps a synced kind as the platform team adds one
// (docs/operations/install.md#rbac-for-namespace-fan-out): in the role every region gets, and under the admission policy.
func syncConfigMaps(objs []*unstructured.Unstructured) {
	policy := Find(objs, "ValidatingAdmissionPolicy", IsolationPolicy)
	rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConstraints", "resourceRules")
	rules = append(rules, map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"*"},
		"operations": []any{"CREATE", "UPDATE", "DELETE"}, "resources": []any{"configmaps"}})
	if err := unstructured.SetNestedSlice(policy.Object, rules, "spec", "matchConstraints", "resourceRules"); err != nil {
		panic(err)
	}
	role := Find(objs, "ClusterRole", "regionsync-region")
	roleRules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	roleRules = append(roleRules, map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"},
		"verbs": []any{"get", "list", "watch", "update", "patch"}})
	if err := unstructured.SetNestedSlice(role.Object, roleRules, "rules"); err != nil {
		panic(err)
	}
}

// fanOutSecrets gives every region what namespace fan-out of Secrets needs on management
// (docs/operations/install.md#rbac-for-namespace-fan-out): read Secrets and patch them, never update.
func fanOutSecrets(objs []*unstructured.Unstructured) {
	role := Find(objs, "ClusterRole", "regionsync-region")
	roleRules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	roleRules = append(roleRules, map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"},
		"verbs": []any{"get", "list", "watch", "patch"}})
	if err := unstructured.SetNestedSlice(role.Object, roleRules, "rules"); err != nil {
		panic(err)
	}
}

// TestRegionCredentialAllowList: as a region's real identity (the shipped overlays applied), the
// region changes on the objects labelled for it what its agent writes — its sync finalizer (added
// and removed), the generation annotations, the applied-content hash, the fan-out report (of
// the domain of its finalizer, the drop-in domain included), the status — and writes its
// uploaded Secret with a controller reference to its object; anything else is refused by the
// admission policy, also what no rule names: an owner reference (the garbage collector would
// delete the object for it), a label, generateName, any annotation of another key or domain, the
// spec, and the content of a kind without spec (a ConfigMap's data, binaryData, immutable); its
// deletion is refused by RBAC. With the rights namespace fan-out of Secrets needs, a fan-out
// source Secret is claimed and reported on alike, and its data, type, labels and owners are not
// the region's to change (policy), nor is it updated whole (RBAC). The objects are as management
// wrote them afterwards.
func TestRegionCredentialAllowList(t *testing.T) {
	cluster, regionClients := shippedManagement(t, func(objs []*unstructured.Unstructured) {
		syncConfigMaps(objs)
		fanOutSecrets(objs)
	})
	admin := cluster.Client
	ctx := context.Background()
	const region = "us-east-1"
	us := regionClients[region]
	keys := shard.NewKeys(fleetspec.DefaultAnnotationDomain)
	fanOutReport := fleetspec.DefaultAnnotationDomain + "/fan-out-report"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-acme"}}); err != nil {
		t.Fatal(err)
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "tenant-acme", Name: name + "-" + region,
			Labels: map[string]string{regionsyncv1alpha1.RegionLabel: region}, Annotations: map[string]string{"example.com/team": "payments"}}
	}
	tenant := &demov1alpha1.Tenant{ObjectMeta: meta("acme"), Spec: demov1alpha1.TenantSpec{DisplayName: "Acme", Plan: "team"}}
	dropIn := &demov1alpha1.Tenant{ObjectMeta: meta("legacy"), Spec: demov1alpha1.TenantSpec{DisplayName: "Legacy", Plan: "team"}}
	cm := &corev1.ConfigMap{ObjectMeta: meta("settings"), Data: map[string]string{"plan": "team"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-acme", Name: "tenant-token-" + region}}
	pull := &corev1.Secret{ObjectMeta: meta("pull"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"auth": []byte("registry")}}
	pull.Annotations[keys.FanOutNamespaces] = "*"
	otherPull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-acme", Name: "pull-eu-west-1",
		Labels: map[string]string{regionsyncv1alpha1.RegionLabel: "eu-west-1"}, Annotations: map[string]string{keys.FanOutNamespaces: "*"}}}
	for _, o := range []client.Object{tenant, dropIn, cm, secret, pull, otherPull} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("region %s: %s: %v", region, what, err)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if err := refusedBy(err, byPolicy, region); err != nil {
			t.Errorf("region %s: %s: %v", region, what, err)
		}
	}
	// fresh reads o as management holds it now, for a write on the current version.
	fresh := func(o client.Object) client.Object {
		t.Helper()
		c := o.DeepCopyObject().(client.Object)
		if err := admin.Get(ctx, client.ObjectKeyFromObject(o), c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// claimWith adds finalizer as the agent claims an object: a merge patch with an optimistic lock.
	claimWith := func(o client.Object, finalizer string) error {
		o = fresh(o)
		before := o.DeepCopyObject().(client.Object)
		o.SetFinalizers(append(o.GetFinalizers(), finalizer))
		return us.Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}
	// annotations writes annotations as the agent does: a merge patch carrying the UID.
	annotations := func(o client.Object, a map[string]string) error {
		patch := map[string]any{"metadata": map[string]any{"uid": fresh(o).GetUID(), "annotations": a}}
		return us.Patch(ctx, fresh(o), client.RawPatch(types.MergePatchType, mustJSON(t, patch)))
	}

	// What the agent writes.
	allowed("claim its object (its finalizer)", claimWith(tenant, keys.Finalizer))
	allowed("write the generation annotations", annotations(tenant, map[string]string{keys.RemoteGeneration: "1", keys.LocalGeneration: "1"}))
	allowed("write the applied-content hash and the fan-out report", annotations(tenant, map[string]string{keys.AppliedHash: "3f2a", fanOutReport: `{"matched":2,"current":2}`}))
	st := fresh(tenant).(*demov1alpha1.Tenant)
	st.Status.Phase = "Ready"
	allowed("upload the status", us.Status().Update(ctx, st))
	allowed("claim a ConfigMap", claimWith(cm, keys.Finalizer))
	allowed("write a ConfigMap's applied-content hash", annotations(cm, map[string]string{keys.AppliedHash: "9c1e"}))
	dropInKeys := shard.NewKeys("cloud.teleport.dev")
	allowed("claim with the drop-in domain's finalizer", claimWith(dropIn, dropInKeys.Finalizer))
	allowed("write the drop-in domain's generation annotations", annotations(dropIn, map[string]string{dropInKeys.RemoteGeneration: "1", dropInKeys.LocalGeneration: "1"}))
	upload := &corev1.Secret{}
	if err := us.Get(ctx, client.ObjectKeyFromObject(secret), upload); err != nil {
		t.Fatalf("region %s: get its Secret: %v", region, err)
	}
	upload.Data = map[string][]byte{"token": []byte("s3cr3t")}
	upload.Annotations = map[string]string{keys.LastUploadedHash: "5be1"}
	upload.OwnerReferences = []metav1.OwnerReference{{APIVersion: demov1alpha1.GroupVersion.String(), Kind: "Tenant",
		Name: tenant.Name, UID: fresh(tenant).GetUID(), Controller: ptr.To(true)}}
	allowed("upload its Secret, controlled by its object", us.Update(ctx, upload))
	allowed("claim a fan-out source Secret", claimWith(pull, keys.Finalizer))
	allowed("write a Secret's applied-content hash and fan-out report", annotations(pull, map[string]string{keys.AppliedHash: "77ab", fanOutReport: `{"matching":3,"current":3}`}))
	refused("claim another region's Secret", claimWith(otherPull, keys.Finalizer))
	if err := refusedBy(us.Update(ctx, fresh(pull)), byRBAC, region); err != nil {
		t.Errorf("region %s: update a fan-out source Secret whole: %v", region, err)
	}

	// Anything else, on the same objects.
	before := map[client.Object]client.Object{}
	for _, o := range []client.Object{tenant, dropIn, cm, pull, otherPull} {
		before[o] = fresh(o)
	}
	for _, c := range []struct {
		what string
		obj  client.Object
		do   func(o client.Object) error
	}{
		{"give its object an owner that does not exist (patch)", tenant, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"6d1f0c52-3c38-4b1a-9d2e-5a8d3c0b7e41"}]}}`))
		}},
		{"give its object an owner (update)", tenant, func(o client.Object) error {
			o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "tenant-acme", UID: "6d1f0c52-3c38-4b1a-9d2e-5a8d3c0b7e41"}})
			return us.Update(ctx, o)
		}},
		{"add another annotation", tenant, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"annotations":{"example.com/approved":"yes"}}}`))
		}},
		{"change management's annotation", tenant, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"annotations":{"example.com/team":"billing"}}}`))
		}},
		{"remove management's annotation", tenant, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"annotations":{"example.com/team":null}}}`))
		}},
		{"write a generation annotation of another domain than its finalizer's", dropIn, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"annotations":{"`+keys.RemoteGeneration+`":"1"}}}`))
		}},
		{"pause its object", tenant, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"annotations":{"`+keys.Paused+`":"true"}}}`))
		}},
		{"add a label", tenant, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"labels":{"example.com/tier":"gold"}}}`))
		}},
		{"set generateName", tenant, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"generateName":"acme-"}}`))
		}},
		{"change the spec", tenant, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"spec":{"plan":"enterprise"}}`))
		}},
		{"add another finalizer", tenant, func(o client.Object) error {
			o.SetFinalizers(append(o.GetFinalizers(), "example.com/keep"))
			return us.Update(ctx, o)
		}},
		{"change a ConfigMap's data", cm, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"data":{"plan":"enterprise"}}`))
		}},
		{"add a ConfigMap's binaryData", cm, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"binaryData":{"blob":"AAE="}}`))
		}},
		{"make a ConfigMap immutable", cm, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"immutable":true}`))
		}},
		{"change a Secret's data", pull, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"data":{"auth":"c3RvbGVu"}}`))
		}},
		{"add a Secret's stringData", pull, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"stringData":{"extra":"value"}}`))
		}},
		{"change a Secret's fan-out selector", pull, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"annotations":{"`+keys.FanOutNamespaces+`":"team=b"}}}`))
		}},
		{"label a Secret", pull, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"labels":{"example.com/tier":"gold"}}}`))
		}},
		{"give a Secret an owner", pull, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"6d1f0c52-3c38-4b1a-9d2e-5a8d3c0b7e41"}]}}`))
		}},
		{"change another region's Secret", otherPull, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"annotations":{"`+fanOutReport+`":"{}"}}}`))
		}},
		{"give a ConfigMap an owner", cm, func(o client.Object) error {
			return us.Patch(ctx, o, merge(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"6d1f0c52-3c38-4b1a-9d2e-5a8d3c0b7e41"}]}}`))
		}},
	} {
		refused(c.what, c.do(fresh(c.obj)))
	}
	if err := refusedBy(us.Delete(ctx, fresh(tenant)), byRBAC, region); err != nil {
		t.Errorf("region %s: delete its object: %v", region, err)
	}
	// A region identity writes no Distribution (it would place objects in every region): RBAC.
	dist := &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-acme", Name: "from-a-region"},
		Spec: regionsyncv1alpha1.DistributionSpec{ServiceAccountName: "default",
			Template: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"}}`)}}}
	if err := refusedBy(us.Create(ctx, dist), byRBAC, region); err != nil {
		t.Errorf("region %s: create a Distribution: %v", region, err)
	}
	if err := admin.Create(ctx, dist); err != nil {
		t.Fatal(err)
	}
	if err := refusedBy(us.Patch(ctx, fresh(dist), merge(`{"spec":{"serviceAccountName":"other"}}`)), byRBAC, region); err != nil {
		t.Errorf("region %s: change a Distribution: %v", region, err)
	}
	for o, b := range before {
		if got := fresh(o); !sameContent(got, b) {
			t.Errorf("%s changed by refused writes:\n%+v\nwas\n%+v", o.GetName(), got, b)
		}
	}

	// Deleted on management, each object waits for the region's finalizer, which the region
	// removes once its copy is gone; then the object is gone.
	for _, c := range []struct {
		obj       client.Object
		finalizer string
	}{{tenant, keys.Finalizer}, {dropIn, dropInKeys.Finalizer}, {cm, keys.Finalizer}, {pull, keys.Finalizer}} {
		if err := admin.Delete(ctx, fresh(c.obj)); err != nil {
			t.Fatal(err)
		}
		o := fresh(c.obj)
		if o.GetDeletionTimestamp() == nil {
			t.Fatalf("%s is not terminating", o.GetName())
		}
		b := o.DeepCopyObject().(client.Object)
		o.SetFinalizers(slices.DeleteFunc(o.GetFinalizers(), func(f string) bool { return f == c.finalizer }))
		allowed("remove its finalizer from terminating "+o.GetName(), us.Patch(ctx, o, client.MergeFromWithOptions(b, client.MergeFromWithOptimisticLock{})))
		if err := admin.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%s after its last finalizer was removed: want NotFound, got %v", o.GetName(), err)
		}
	}
}

// sameContent: a and b are the same object but for what the API server writes on every write.
func sameContent(a, b client.Object) bool {
	a, b = a.DeepCopyObject().(client.Object), b.DeepCopyObject().(client.Object)
	for _, o := range []client.Object{a, b} {
		o.SetResourceVersion("")
		o.SetManagedFields(nil)
		o.SetGeneration(0)
	}
	return equality.Semantic.DeepEqual(a, b)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRegionCredentialEvents: as a region's real identity (the shipped overlays applied), a
// region cannot rewrite the audit trail: it cannot patch (turn a Warning into a Normal, bump a
// count, relabel), update or delete another region's Event, nor patch an Event of another
// writer, nor create one labelled for another region or unlabelled; each refused by RBAC or the
// admission policy as asserted, and the Events are unchanged. The agents' own Events, written by
// the engine's management recorder with the shipped RBAC, still aggregate: a repeated Event is
// one Event whose count the recorder's patches bump.
func TestRegionCredentialEvents(t *testing.T) {
	cluster, regionClients := shippedManagement(t, nil)
	admin := cluster.Client
	ctx := context.Background()
	const a, b = "us-east-1", "eu-west-1"
	us := regionClients[a]
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-acme"}}); err != nil {
		t.Fatal(err)
	}
	tenants := map[string]*demov1alpha1.Tenant{}
	for _, r := range []string{a, b} {
		tenants[r] = &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-acme", Name: "acme-" + r,
			Labels: map[string]string{regionsyncv1alpha1.RegionLabel: r}}, Spec: demov1alpha1.TenantSpec{DisplayName: "Acme", Plan: "team"}}
		if err := admin.Create(ctx, tenants[r]); err != nil {
			t.Fatal(err)
		}
	}
	// recorder is region r's agent's management event recorder, as that region's identity.
	recorder := func(r string) *syncer.EventRecorder {
		cfg := cluster.ServiceAccountConfig("regionsync-system", "region-"+r)
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := syncer.NewManagementEventRecorder(cfg, hc, testenv.Scheme(), r, testr.New(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rec.Shutdown)
		return rec
	}
	// agentEvent waits for the one Event of reason about obj, labelled for region r, with count.
	agentEvent := func(r string, obj client.Object, reason string, count int32) *corev1.Event {
		t.Helper()
		var found *corev1.Event
		testenv.Eventually(t, fmt.Sprintf("%s's %s Event about %s with count %d", r, reason, obj.GetName(), count), 30*time.Second, func() error {
			list := &corev1.EventList{}
			if err := admin.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{regionsyncv1alpha1.RegionLabel: r}); err != nil {
				return err
			}
			var seen []string
			for i, ev := range list.Items {
				if ev.InvolvedObject.Name == obj.GetName() && ev.Reason == reason {
					seen = append(seen, fmt.Sprintf("%s count %d", ev.Name, ev.Count))
					found = &list.Items[i]
				}
			}
			if len(seen) != 1 || found.Count != count {
				return fmt.Errorf("events: %v", seen)
			}
			return nil
		})
		return found
	}

	// Region b's agent reports a refused adoption; another writer (no region) a Warning of its own.
	recorder(b).Eventf(tenants[b], nil, corev1.EventTypeWarning, syncer.ReasonAdoptionRefused, "Adopt", "an unmarked object is in the way in region %s", b)
	bEvent := agentEvent(b, tenants[b], syncer.ReasonAdoptionRefused, 1)
	other := testEvent("tenant-acme", "acme-"+b+".operator", tenants[b])
	other.Reason, other.Source, other.ReportingController = "BackupFailed", corev1.EventSource{Component: "backup-operator"}, "backup-operator"
	if err := admin.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	wrote := func(r string) *corev1.Event {
		ev := testEvent("tenant-acme", "", tenants[a])
		ev.GenerateName = "forged-"
		if r != "" {
			ev.Labels = map[string]string{regionsyncv1alpha1.RegionLabel: r}
		}
		return ev
	}
	for _, c := range []struct {
		what string
		by   mechanism
		do   func() error
	}{
		{"turn b's Warning into a Normal (merge patch)", byPolicy, func() error {
			return us.Patch(ctx, bEvent.DeepCopy(), merge(`{"type":"Normal","reason":"Synced","message":"all good"}`))
		}},
		{"bump b's Event's count (strategic merge patch, as client-go's correlator)", byPolicy, func() error {
			return us.Patch(ctx, bEvent.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(`{"count":7}`)))
		}},
		{"relabel b's Event as its own", byPolicy, func() error {
			return us.Patch(ctx, bEvent.DeepCopy(), merge(`{"metadata":{"labels":{"`+regionsyncv1alpha1.RegionLabel+`":"`+a+`"}}}`))
		}},
		{"patch another writer's Event", byPolicy, func() error {
			return us.Patch(ctx, other.DeepCopy(), merge(`{"type":"Normal"}`))
		}},
		{"update b's Event", byRBAC, func() error {
			ev := bEvent.DeepCopy()
			ev.Type = corev1.EventTypeNormal
			return us.Update(ctx, ev)
		}},
		{"delete b's Event", byRBAC, func() error { return us.Delete(ctx, bEvent.DeepCopy()) }},
		{"annotate b's Event through events.k8s.io", byRBAC, func() error {
			return us.Patch(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: bEvent.Namespace, Name: bEvent.Name}}, merge(`{"metadata":{"annotations":{"example.com/verdict":"benign"}}}`))
		}},
		{"create an Event labelled for b", byPolicy, func() error { return us.Create(ctx, wrote(b)) }},
		{"create an unlabelled Event", byPolicy, func() error { return us.Create(ctx, wrote("")) }},
	} {
		if err := refusedBy(c.do(), c.by, a); err != nil {
			t.Errorf("region %s: %s: %v", a, c.what, err)
		}
	}
	for _, ev := range []*corev1.Event{bEvent, other} {
		got := &corev1.Event{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ev), got); err != nil {
			t.Fatal(err)
		}
		if got.Type != ev.Type || got.Reason != ev.Reason || got.Message != ev.Message || got.Count != ev.Count ||
			!maps.Equal(got.Labels, ev.Labels) {
			t.Errorf("Event %s changed: %s %s %q count %d labels %v", ev.Name, got.Type, got.Reason, got.Message, got.Count, got.Labels)
		}
	}

	// Region a's own Events aggregate through the shipped RBAC and the policy.
	rec := recorder(a)
	for range 3 {
		rec.Eventf(tenants[a], nil, corev1.EventTypeWarning, syncer.ReasonStatusRefused, "Sync", "management refused the status")
	}
	agentEvent(a, tenants[a], syncer.ReasonStatusRefused, 3)
}
