//go:build integration

package syncer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

var tenantGVK = schema.GroupVersionKind{Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant"}

// setRemote edits the Tenant "acme" on management in ns, the one the scenarios change remotely.
func (e *env) setRemote(ns, name string, edit func(*demov1alpha1.Tenant)) {
	e.t.Helper()
	e.update("remote "+name, e.mgmt, func() (*demov1alpha1.Tenant, error) { return e.getRemote(ns, name) }, edit)
}

func (e *env) setLocal(ns, name string, edit func(*demov1alpha1.Tenant)) {
	e.t.Helper()
	e.update("local "+name, e.local, func() (*demov1alpha1.Tenant, error) { return e.getLocal(ns, name) }, edit)
}

// update reads, edits and writes a Tenant until the write wins (conflicts with the agent retry).
func (e *env) update(what string, c client.Client, get func() (*demov1alpha1.Tenant, error), edit func(*demov1alpha1.Tenant)) {
	e.t.Helper()
	e.eventually("update "+what, func() error {
		o, err := get()
		if err != nil {
			return err
		}
		edit(o)
		return c.Update(e.ctx, o)
	})
}

func annotate(key, value string) func(*demov1alpha1.Tenant) {
	return func(o *demov1alpha1.Tenant) {
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		o.Annotations[key] = value
	}
}

// Paused on management: no claim, no copy; pausing later freezes the copy; unpausing resumes.
func TestPausedRemotely(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("paused-remote")
	e.tenant(ns, "frozen", "Frozen", annotate(e.keys.Paused, "true"))
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	e.never("paused object claimed or copied", 2*time.Second, func() bool {
		o, _ := e.getRemote(ns, "frozen")
		_, err := e.getLocal(ns, "frozen")
		return len(o.Finalizers) > 0 || err == nil
	})
	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { annotate(e.keys.Paused, "true")(o); o.Spec.Replicas = 9 })
	e.heldWhilePaused(ns, "acme", 9, func() {
		e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { delete(o.Annotations, e.keys.Paused) })
	})
}

// heldWhilePaused checks that a spec change to replicas is not copied while the object is
// paused, and arrives once unpause has run.
func (e *env) heldWhilePaused(ns, name string, replicas int32, unpause func()) {
	e.t.Helper()
	e.never("a spec change copied while paused", 2*time.Second, func() bool {
		l, _ := e.getLocal(ns, name)
		return l.Spec.Replicas == replicas
	})
	unpause()
	if _, local := e.waitSynced(ns, name); local.Spec.Replicas != replicas {
		e.t.Fatalf("after unpause replicas %d, want %d", local.Spec.Replicas, replicas)
	}
}

// Paused locally: the copy is neither updated nor is its status uploaded.
func TestPausedLocally(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("paused-local")
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	e.setLocal(ns, "acme", annotate(e.keys.Paused, "true"))
	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = 7 })
	e.heldWhilePaused(ns, "acme", 7, func() {
		e.setLocal(ns, "acme", func(o *demov1alpha1.Tenant) { delete(o.Annotations, e.keys.Paused) })
	})
}

// Local copy missing in an existing namespace: created; a same-named secret the local object does
// not control is never uploaded.
func TestUnownedSecretNotUploaded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("unowned-secret")
	e.remoteSecret(ns)
	if err := e.local.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-token"}, StringData: map[string]string{"token": "not-yours"}}
	if err := e.local.Create(e.ctx, foreign); err != nil {
		t.Fatal(err)
	}
	e.tenant(ns, "acme", "Acme")
	e.eventually("local copy created and reconciled (the operator refuses the foreign secret)", func() error {
		l, err := e.getLocal(ns, "acme")
		if err != nil {
			return err
		}
		if l.Status.Phase != "Failed" {
			return fmt.Errorf("phase %q", l.Status.Phase)
		}
		return nil
	})
	e.never("foreign secret uploaded", 2*time.Second, func() bool {
		s := &corev1.Secret{}
		_ = e.mgmt.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "tenant-token" + e.suffix}, s)
		return len(s.Data) > 0
	})
}

// Remote terminating with another finalizer: the local copy is deleted first, then our finalizer
// is removed (and only ours).
func TestRemoteTerminatingWithFinalizer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("terminating")
	e.tenant(ns, "acme", "Acme", func(o *demov1alpha1.Tenant) { o.Finalizers = []string{"example.com/hold"} })
	remote, _ := e.waitSynced(ns, "acme")
	if err := e.mgmt.Delete(e.ctx, remote); err != nil {
		t.Fatal(err)
	}
	e.eventually("our finalizer released after the local copy is gone", func() error {
		r, err := e.getRemote(ns, "acme")
		if err != nil {
			return err
		}
		if controllerutil.ContainsFinalizer(r, e.keys.Finalizer) {
			return fmt.Errorf("finalizers %v", r.Finalizers)
		}
		if !slices.Equal(r.Finalizers, []string{"example.com/hold"}) {
			return fmt.Errorf("other finalizers lost: %v", r.Finalizers)
		}
		return nil
	})
	if _, err := e.getLocal(ns, "acme"); !apierrors.IsNotFound(err) {
		t.Fatalf("finalizer released while the local copy exists: %v", err)
	}
	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { o.Finalizers = nil })
}

// Local drift is reverted by Replace.
func TestReplaceRevertsDrift(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("drift")
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	e.setLocal(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.DisplayName = "Hacked"; o.Labels["local-only"] = "kept" })
	e.eventually("drift reverted", func() error {
		l, err := e.getLocal(ns, "acme")
		if err != nil {
			return err
		}
		if l.Spec.DisplayName != "Acme" {
			return fmt.Errorf("displayName %q", l.Spec.DisplayName)
		}
		if l.Labels["local-only"] != "kept" {
			return fmt.Errorf("local-only label lost: %v", l.Labels)
		}
		return nil
	})
	// A label removed on management is removed from the copy; the local-only one stays.
	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { delete(o.Labels, "tier") })
	e.eventually("removed label gone, local-only label kept", func() error {
		l, err := e.getLocal(ns, "acme")
		if err != nil {
			return err
		}
		if _, ok := l.Labels["tier"]; ok || l.Labels["local-only"] != "kept" {
			return fmt.Errorf("labels %v", l.Labels)
		}
		return nil
	})
}

// Apply keeps fields a local controller owns, and still reverts drift on the remote's fields.
func TestApplyKeepsLocalFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) { o.Resources[0].Strategy = regionsync.StrategyApply }))
	ns := e.remoteNamespace("apply")
	e.tenant(ns, "acme", "Acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = 0 }) // replicas left to the region
	e.waitSynced(ns, "acme")
	e.setLocal(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = 3 })
	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.DisplayName = "Acme 2" })
	_, local := e.waitSynced(ns, "acme")
	if local.Spec.DisplayName != "Acme 2" || local.Spec.Replicas != 3 {
		t.Fatalf("after apply: %+v", local.Spec)
	}
	e.setLocal(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.DisplayName = "Hacked" })
	e.eventually("drift on a remote-owned field re-applied", func() error {
		l, err := e.getLocal(ns, "acme")
		if err != nil {
			return err
		}
		if l.Spec.DisplayName != "Acme 2" || l.Spec.Replicas != 3 {
			return fmt.Errorf("spec %+v", l.Spec)
		}
		return nil
	})
}

// A deleted local copy is recreated; a terminating one only once it is gone.
func TestLocalDeletedRecreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("recreate")
	e.tenant(ns, "acme", "Acme")
	_, local := e.waitSynced(ns, "acme")
	if err := e.local.Delete(e.ctx, local); err != nil {
		t.Fatal(err)
	}
	e.waitReplaced(ns, "acme", local.UID, "recreated")
	_, local = e.waitSynced(ns, "acme")
	e.setLocal(ns, "acme", func(o *demov1alpha1.Tenant) { o.Finalizers = append(o.Finalizers, "example.com/slow") })
	if err := e.local.Delete(e.ctx, local); err != nil {
		t.Fatal(err)
	}
	e.never("terminating copy replaced while still there", 2*time.Second, func() bool {
		l, err := e.getLocal(ns, "acme")
		return err == nil && l.UID != local.UID
	})
	e.setLocal(ns, "acme", func(o *demov1alpha1.Tenant) { o.Finalizers = nil })
	e.waitReplaced(ns, "acme", local.UID, "recreated after it was gone")
}

// An unmarked local object whose remote does not exist is never touched; with adoption refused a
// pre-existing object is left alone with an event; adopted otherwise.
func TestUnmarkedAndAdoption(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) { o.Resources[0].Adoption = regionsync.AdoptionRefuse }))
	ns := e.remoteNamespace("adopt")
	if err := e.local.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bystander", "squatter"} {
		o := &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: demov1alpha1.TenantSpec{DisplayName: "Local " + name}}
		if err := e.local.Create(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	e.tenant(ns, "squatter", "Remote")
	e.waitEvent(e.local, ns, "squatter", syncer.ReasonAdoptionRefused)
	e.never("refused object overwritten or bystander deleted", 2*time.Second, func() bool {
		s, err1 := e.getLocal(ns, "squatter")
		_, err2 := e.getLocal(ns, "bystander")
		return err1 != nil || s.Spec.DisplayName != "Local squatter" || err2 != nil
	})

	// The same situation with adoption configured (opt-in) adopts.
	e2 := newEnv(t, withOptions(func(o *regionsync.Options) { o.Resources[0].Adoption = regionsync.AdoptionAdopt }))
	ns2 := e2.remoteNamespace("adopt")
	if err := e2.local.Create(e2.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns2}}); err != nil {
		t.Fatal(err)
	}
	pre := &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns2, Name: "squatter"}, Spec: demov1alpha1.TenantSpec{DisplayName: "Local"}}
	if err := e2.local.Create(e2.ctx, pre); err != nil {
		t.Fatal(err)
	}
	e2.tenant(ns2, "squatter", "Remote")
	_, local := e2.waitSynced(ns2, "squatter")
	if local.UID != pre.UID || local.Spec.DisplayName != "Remote" || local.Labels[e2.keys.Region] != e2.opts.Region {
		t.Fatalf("not adopted in place: %+v %v", local.Spec, local.Labels)
	}
	e2.waitEvent(e2.local, ns2, "squatter", syncer.ReasonAdopted)
}

// A remote secret controlled by another owner is never taken over.
func TestSecretTakeoverRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("takeover")
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-else"}}
	if err := e.mgmt.Create(e.ctx, owner); err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-token" + e.suffix,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		StringData: map[string]string{"token": "theirs"}}
	if err := e.mgmt.Create(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	e.waitEvent(e.mgmt, ns, "acme"+e.suffix, syncer.ReasonSecretTakeoverRefused)
	got := &corev1.Secret{}
	if err := e.mgmt.Get(e.ctx, client.ObjectKeyFromObject(s), got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["token"]) != "theirs" || len(got.OwnerReferences) != 1 {
		t.Fatalf("secret taken over: owners %v", got.OwnerReferences)
	}
}

// TestStatusRefusalDoesNotBlockSpec: without permission to write the remote status (a refusal,
// not a transient failure), the refusal is reported and spec keeps flowing: a region is never
// frozen out of fixes by a status it cannot upload.
func TestStatusRefusalDoesNotBlockSpec(t *testing.T) {
	t.Parallel()
	needFleet(t)
	user := "status-less-agent"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"demo.regionsync.dev"}, Resources: []string{"tenants"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"list"}}, // management's identity
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := management.Client.Create(t.Context(), o); client.IgnoreAlreadyExists(err) != nil { // -count=N reuses the fleet
			t.Fatal(err)
		}
	}
	e := newEnv(t, withManagementConfig(management.ImpersonatingConfig(user)))
	ns := e.remoteNamespace("status-fails")
	e.tenant(ns, "acme", "Acme")
	e.statusRefusedSpecFlows(ns, "acme", 4)
	if r, err := e.getRemote(ns, "acme"); err != nil || r.Status.Phase != "" {
		t.Fatalf("remote status written although forbidden: %+v (%v)", r.Status, err)
	}
}

// TestStatusRefusedByAdmissionPolicy: a ValidatingAdmissionPolicy on management that refuses the
// uploaded status (as a stricter schema after an upgrade would) does not hold spec back; an event
// on the remote object says why.
func TestStatusRefusedByAdmissionPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("status-policy")
	name := "refuse-status-" + e.name
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"demo.regionsync.dev"}, APIVersions: []string{"*"}, Resources: []string{"tenants/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "!has(object.status) || !has(object.status.phase)", Message: "status.phase is not accepted here"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := e.mgmt.Create(e.ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.mgmt.Delete(context.Background(), o) })
	}
	// The policy is in force once a status write with a phase is refused. The probe is outside
	// the shard (no suffix): the agent leaves it alone, so the only object it syncs here is acme.
	probe := &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: demov1alpha1.TenantSpec{DisplayName: "Probe", Plan: "team"}}
	if err := e.mgmt.Create(e.ctx, probe); err != nil {
		t.Fatal(err)
	}
	e.eventually("the policy is in force", func() error {
		p := &demov1alpha1.Tenant{}
		if err := e.mgmt.Get(e.ctx, client.ObjectKeyFromObject(probe), p); err != nil {
			return err
		}
		p.Status.Phase = "Probe"
		if err := e.mgmt.Status().Update(e.ctx, p); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			return fmt.Errorf("a status with a phase answered %v, not the policy's refusal", err)
		}
		return nil
	})
	e.tenant(ns, "acme", "Acme")
	e.statusRefusedSpecFlows(ns, "acme", 7)
}

// statusRefusedSpecFlows waits for the StatusRefused event on the remote object name (the
// refusal is reported on its first refused upload), then changes the remote spec and waits for
// the change in the copy: a refused status holds no spec back.
func (e *env) statusRefusedSpecFlows(ns, name string, replicas int32) {
	e.t.Helper()
	e.eventually("event StatusRefused on "+name, func() error {
		reasons, err := events(e.ctx, e.mgmt, ns, name+e.suffix)
		if err != nil {
			return err
		}
		if slices.Contains(reasons, syncer.ReasonStatusRefused) {
			return nil
		}
		l, lerr := e.getLocal(ns, name)
		r, rerr := e.getRemote(ns, name)
		return fmt.Errorf("events so far: %v; local copy: %v, status %+v; management's status (%v): %+v", reasons, lerr, l.Status, rerr, r.Status)
	})
	e.setRemote(ns, name, func(o *demov1alpha1.Tenant) { o.Spec.Replicas = replicas })
	e.eventually("spec change arrived although the status is refused", func() error {
		l, err := e.getLocal(ns, name)
		if err != nil {
			return err
		}
		if l.Spec.Replicas != replicas {
			return fmt.Errorf("replicas %d", l.Spec.Replicas)
		}
		return nil
	})
}

// An object whose mapping is invalid gets an event; the agent keeps syncing the others.
func TestInvalidMappingReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) { o.Shard.LocalNamespaceSuffix = "-regional-copy" }))
	long := e.ns(strings.Repeat("l", 50)) // + "-regional-copy" exceeds 63 characters locally
	if err := e.mgmt.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: long}}); err != nil {
		t.Fatal(err)
	}
	e.tenant(long, "acme", "Too long")
	e.waitEvent(e.mgmt, long, "acme"+e.suffix, syncer.ReasonInvalidMapping)

	ns := e.remoteNamespace("fine")
	e.tenant(ns, "beta", "Fine")
	e.eventually("others keep syncing", func() error {
		_, err := e.getLocal(ns+"-regional-copy", "beta")
		return err
	})
}

// With management unreachable at start the agent runs; it syncs once management answers, and an
// outage deletes nothing.
func TestManagementDownAtStartAndOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withProxy(true))
	ns := e.remoteNamespace("outage")
	e.tenant(ns, "acme", "Acme")
	e.never("sync without management", 2*time.Second, func() bool {
		_, err := e.getLocal(ns, "acme")
		return err == nil
	})
	if err := e.proxy.Up(); err != nil {
		t.Fatal(err)
	}
	e.waitSynced(ns, "acme")

	e.proxy.Down()
	e.never("local copy deleted during a management outage", 3*time.Second, func() bool {
		_, err := e.getLocal(ns, "acme")
		return err != nil
	})
	if err := e.proxy.Up(); err != nil {
		t.Fatal(err)
	}
	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = 6 })
	_, local := e.waitSynced(ns, "acme")
	if local.Spec.Replicas != 6 {
		t.Fatalf("replicas %d after the outage", local.Spec.Replicas)
	}
}

// When management suddenly lists none of the shard's objects, deletions beyond the budget are
// held (event, metric); an operator's release lets one go.
func TestEmptyManagementHoldsDeletions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.DeletionBudget = regionsync.DeletionBudget{MaxFraction: ptr.To(0.5), MinObjects: ptr.To(0)}
	}))
	// One namespace per tenant: the demo operator keeps one tenant-token per namespace.
	names := []string{"a", "b", "c", "d"}
	nss := map[string]string{}
	for _, n := range names {
		nss[n] = e.remoteNamespace("budget-" + n)
		e.tenant(nss[n], n, n)
	}
	for _, n := range names {
		e.waitSynced(nss[n], n)
	}
	// The agent is down while management loses every object (a restore from an old backup).
	e.stop()
	for _, n := range names {
		o, err := e.getRemote(nss[n], n)
		if err != nil {
			t.Fatal(err)
		}
		o.Finalizers = nil
		if err := e.mgmt.Update(e.ctx, o); err != nil {
			t.Fatal(err)
		}
		if err := e.mgmt.Delete(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	e.start()
	e.waitEvent(e.local, nss["a"], "a", syncer.ReasonDeletionHeld)
	e.never("held copies deleted", 2*time.Second, func() bool {
		for _, n := range names {
			if _, err := e.getLocal(nss[n], n); err != nil {
				return true
			}
		}
		return false
	})
	e.setLocal(nss["a"], "a", annotate(e.keys.ReleaseDeletion, "true"))
	e.eventually("released copy deleted", func() error {
		l, err := e.getLocal(nss["a"], "a")
		if apierrors.IsNotFound(err) || (err == nil && !l.DeletionTimestamp.IsZero()) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	for _, n := range names[1:] {
		if l, err := e.getLocal(nss[n], n); err != nil || !l.DeletionTimestamp.IsZero() {
			t.Fatalf("unreleased copy %s deleted: %v", n, err)
		}
	}
}

// Two kinds synced by one agent: Tenants and ConfigMaps (data, not spec).
func TestTwoKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Resources = append(o.Resources, regionsync.Resource{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
	}))
	ns := e.remoteNamespace("two-kinds")
	e.tenant(ns, "acme", "Acme")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings" + e.suffix}, Data: map[string]string{"color": "blue"}}
	if err := e.mgmt.Create(e.ctx, cm); err != nil {
		t.Fatal(err)
	}
	e.waitSynced(ns, "acme")
	e.eventually("configmap synced with generation annotations", func() error {
		local := &corev1.ConfigMap{}
		if err := e.local.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: "settings"}, local); err != nil {
			return err
		}
		if local.Data["color"] != "blue" {
			return fmt.Errorf("data %v", local.Data)
		}
		remote := &corev1.ConfigMap{}
		if err := e.mgmt.Get(e.ctx, client.ObjectKeyFromObject(cm), remote); err != nil {
			return err
		}
		if remote.Annotations[e.keys.RemoteGeneration] == "" {
			return fmt.Errorf("annotations %v", remote.Annotations)
		}
		return nil
	})
}

// A kind without metadata.generation (ConfigMap): the agent records the hash of the content it
// copied (D/sync-applied-hash) on the management object, in the generation annotations' one
// patch; at rest it writes nothing; a data change costs one local write and one management
// patch, whose hash is that of the new content. A kind with a generation gets no hash.
func TestAppliedContentHash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Resources = append(o.Resources, regionsync.Resource{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
		o.ResyncPeriod = 10 * time.Second
	}))
	ns := e.remoteNamespace("applied-hash")
	e.tenant(ns, "acme", "Acme")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings" + e.suffix,
		Labels: map[string]string{"team": "payments"}}, Data: map[string]string{"color": "blue"}}
	if err := e.mgmt.Create(e.ctx, cm); err != nil {
		t.Fatal(err)
	}
	remote, _ := e.waitSynced(ns, "acme")
	if h, ok := remote.Annotations[e.keys.AppliedHash]; ok {
		t.Errorf("a Tenant (it has metadata.generation) got %s=%s", e.keys.AppliedHash, h)
	}
	// hashed waits until the local copy holds color and management records its content's hash.
	hashed := func(color string) {
		t.Helper()
		e.eventually("ConfigMap copied with color "+color+" and its content hash recorded", func() error {
			local := &corev1.ConfigMap{}
			if err := e.local.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: "settings"}, local); err != nil {
				return err
			}
			if local.Data["color"] != color {
				return fmt.Errorf("local data %v", local.Data)
			}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			if err := e.mgmt.Get(e.ctx, client.ObjectKeyFromObject(cm), u); err != nil {
				return err
			}
			got, want := u.GetAnnotations()[e.keys.AppliedHash], e.keys.AppliedContentHash(u)
			if got != want {
				return fmt.Errorf("%s=%q, want the hash of the content %q", e.keys.AppliedHash, got, want)
			}
			if u.GetAnnotations()[e.keys.RemoteGeneration] != "0" || u.GetAnnotations()[e.keys.LocalGeneration] != "0" {
				return fmt.Errorf("generation annotations %v", u.GetAnnotations())
			}
			return nil
		})
	}
	hashed("blue")
	e.settle(time.Second)
	e.localWrites.take()
	e.remoteWrites.take()
	testenv.Consistently(t, "no write at rest across a resync", 12*time.Second, func() error {
		if w := append(e.localWrites.take(), e.remoteWrites.take()...); len(w) != 0 {
			return fmt.Errorf("writes at rest: %v", w)
		}
		return nil
	})

	live := &corev1.ConfigMap{}
	if err := e.mgmt.Get(e.ctx, client.ObjectKeyFromObject(cm), live); err != nil {
		t.Fatal(err)
	}
	before := live.Annotations[e.keys.AppliedHash]
	live.Data["color"] = "green"
	if err := e.mgmt.Update(e.ctx, live); err != nil {
		t.Fatal(err)
	}
	hashed("green")
	e.settle(time.Second)
	local, mgmt := e.localWrites.take(), e.remoteWrites.take()
	if len(local) != 1 || !strings.Contains(local[0], "/configmaps/settings") {
		t.Errorf("local writes per data change: %v, want exactly 1 update of the copy", local)
	}
	if len(mgmt) != 1 || !strings.HasPrefix(mgmt[0], "PATCH ") || !strings.Contains(mgmt[0], "/configmaps/settings"+e.suffix) {
		t.Errorf("management writes per data change: %v, want exactly 1 patch (generations and hash together)", mgmt)
	}
	if err := e.mgmt.Get(e.ctx, client.ObjectKeyFromObject(cm), live); err != nil {
		t.Fatal(err)
	}
	if live.Annotations[e.keys.AppliedHash] == before {
		t.Errorf("%s unchanged by a data change", e.keys.AppliedHash)
	}
}

// The label selector narrows the shard server-side: a non-matching object is never cached.
func TestLabelSelectorNeverCaches(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) { o.Shard.LabelSelector = "tier=gold" }))
	ns := e.remoteNamespace("selector")
	e.tenant(ns, "bronze", "Bronze", func(o *demov1alpha1.Tenant) { o.Labels = map[string]string{"tier": "bronze"} })
	e.tenant(ns, "gold", "Gold")
	e.waitSynced(ns, "gold")
	keys, err := e.syncer.RemoteKeys(e.ctx, tenantGVK)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(keys, types.NamespacedName{Namespace: ns, Name: "gold" + e.suffix}) {
		t.Fatalf("matching object not cached: %v", keys)
	}
	for _, k := range keys {
		if strings.HasPrefix(k.Name, "bronze") {
			t.Fatalf("non-matching object cached: %v", keys)
		}
	}
	if _, err := e.getLocal(ns, "bronze"); !apierrors.IsNotFound(err) {
		t.Fatalf("non-matching object copied: %v", err)
	}
	if o, _ := e.getRemote(ns, "bronze"); len(o.Finalizers) > 0 {
		t.Fatalf("non-matching object claimed")
	}
}

// At rest nothing is written, also across a resync; a remote spec change costs exactly one local
// write, one generation patch and one status upload.
func TestWritesPerChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) { o.ResyncPeriod = 10 * time.Second }))
	ns := e.remoteNamespace("writes")
	e.remoteSecret(ns)
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	e.eventually("token uploaded", func() error {
		s := &corev1.Secret{}
		if err := e.mgmt.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "tenant-token" + e.suffix}, s); err != nil {
			return err
		}
		if len(s.Data) == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	e.settle(time.Second) // the initial sync's last writes
	e.localWrites.take()
	e.remoteWrites.take()
	testenv.Consistently(t, "no write at rest across a resync", 12*time.Second, func() error { // longer than the resync period
		if w := append(e.localWrites.take(), e.remoteWrites.take()...); len(w) != 0 {
			return fmt.Errorf("writes at rest: %v", w)
		}
		return nil
	})

	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = 8 })
	e.waitSynced(ns, "acme")
	e.settle(time.Second)
	local, remote := e.localWrites.take(), e.remoteWrites.take()
	if len(local) != 1 || !strings.HasPrefix(local[0], "PUT ") {
		t.Errorf("local writes per spec change: %v, want exactly 1 update", local)
	}
	var patches, statuses int
	for _, w := range remote {
		switch {
		case strings.HasPrefix(w, "PATCH ") && !strings.HasSuffix(w, "/status"):
			patches++
		case strings.HasPrefix(w, "PUT ") && strings.HasSuffix(w, "/status"):
			statuses++
		}
	}
	if len(remote) != 2 || patches != 1 || statuses != 1 {
		t.Errorf("management writes per spec change: %v, want 1 generation patch + 1 status upload", remote)
	}
}

// annotationDomain cloud.teleport.dev: exactly gravitational/sync-controller's keys and finalizer,
// and a namespace that controller created (owner name only) is recognised as owned.
func TestSyncControllerCompatibility(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLegacyDomain())
	ns := e.remoteNamespace("teleport")
	legacy := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: map[string]string{"cloud.teleport.dev/sync-owner": "acme"}}}
	if err := e.local.Create(e.ctx, legacy); err != nil {
		t.Fatal(err)
	}
	e.tenant(ns, "acme", "Acme")
	remote, _ := e.waitSynced(ns, "acme")
	if !slices.Contains(remote.Finalizers, "cloud.teleport.dev/sync-local") {
		t.Fatalf("finalizers %v", remote.Finalizers)
	}
	for _, k := range []string{"cloud.teleport.dev/sync-remote-generation", "cloud.teleport.dev/sync-local-generation"} {
		if remote.Annotations[k] == "" {
			t.Fatalf("annotation %s missing: %v", k, remote.Annotations)
		}
	}
	if err := e.mgmt.Delete(e.ctx, remote); err != nil {
		t.Fatal(err)
	}
	e.eventually("the legacy-owned namespace is deleted with its object", func() error {
		n := &corev1.Namespace{}
		err := e.local.Get(e.ctx, client.ObjectKey{Name: ns}, n)
		if apierrors.IsNotFound(err) || (err == nil && !n.DeletionTimestamp.IsZero()) {
			return nil
		}
		return fmt.Errorf("namespace %v", err)
	})
}

// A configured kind that a cluster does not serve (its CRD is missing) is reported and retried;
// the agent keeps running and the other kinds sync.
func TestMissingKindDoesNotStopOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Resources = append([]regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Group: "missing.example.com", Version: "v1", Kind: "Widget"})}}, o.Resources...)
	}))
	ns := e.remoteNamespace("missing-kind")
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	select {
	case err := <-e.done:
		t.Fatalf("agent exited: %v", err)
	default:
	}
}

// waitReplaced waits until the copy ns/name is an object other than the one with uid.
func (e *env) waitReplaced(ns, name string, uid types.UID, what string) {
	e.t.Helper()
	e.eventually(what, func() error {
		l, err := e.getLocal(ns, name)
		if err != nil {
			return err
		}
		if l.UID == uid {
			return errors.New("still the old object")
		}
		return nil
	})
}
