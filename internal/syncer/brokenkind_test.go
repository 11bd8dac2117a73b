//go:build integration

package syncer_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// onTime is how long a sync or a deletion of the healthy kind may take while other kinds are
// broken. A stall behind a broken kind lasts at least the agent's wait for a cache (one minute):
// the bound sits well under it, and well over what a loaded 2-core machine takes (a few seconds).
const onTime = 45 * time.Second

// TestBrokenKindDoesNotStallOthers: with a second configured kind whose CRD exists nowhere and a
// third (ConfigMaps) that the region's identity may not list or watch, Tenants are still created,
// updated and deleted on time. The owned-namespace check reads the unlistable kind from the API
// server: where that read is allowed (a namespaced Role) and finds nothing, the owned namespace is
// deleted with its object; where it is refused, the object is deleted and its namespace kept,
// since what cannot be seen is never deleted with it.
func TestBrokenKindDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	needFleet(t)
	user := fmt.Sprintf("regionsync-broken-%d", time.Now().UnixNano())
	// The region's identity may do what the agent does with Tenants, namespaces, secrets and
	// events, and nothing with ConfigMaps but its management identity record (in its own
	// namespace, granted below).
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "secrets", "events"}, Verbs: []string{"*"}},
			{APIGroups: []string{"demo.regionsync.dev"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := region.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = region.Client.Delete(t.Context(), o) })
	}
	recordNS := fleetspec.DefaultLeaderNamespace
	if err := region.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: recordNS}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	recordRole := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: recordNS, Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}}},
	}
	recordBinding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: recordNS, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{recordRole, recordBinding} {
		if err := region.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = region.Client.Delete(t.Context(), o) })
	}
	limited := rest.CopyConfig(region.Config)
	limited.Impersonate = rest.ImpersonationConfig{UserName: user}
	e := newEnv(t, withLocalConfig(limited), withOptions(func(o *regionsync.Options) {
		o.Resources = append(o.Resources,
			regionsync.Resource{Object: agentconfig.Kind(schema.GroupVersionKind{Group: "missing.example.com", Version: "v1", Kind: "Widget"})},
			regionsync.Resource{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
	}))

	readable, unreadable := e.remoteNamespace("readable"), e.remoteNamespace("unreadable")
	start := time.Now()
	e.tenant(readable, "acme", "Acme")
	e.tenant(unreadable, "beta", "Beta")
	e.waitSynced(readable, "acme")
	e.waitSynced(unreadable, "beta")
	// A third Tenant stays: deleting every copy of a kind at once is always held (the budget),
	// which is not what this test is about.
	kept := e.remoteNamespace("kept")
	e.tenant(kept, "gamma", "Gamma")
	e.waitSynced(kept, "gamma")
	if d := time.Since(start); d > onTime {
		t.Errorf("creates took %s with broken kinds configured (limit %s)", d, onTime)
	}
	start = time.Now()
	e.setRemote(readable, "acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = 4 })
	if _, local := e.waitSynced(readable, "acme"); local.Spec.Replicas != 4 {
		t.Fatalf("replicas %d", local.Spec.Replicas)
	}
	if d := time.Since(start); d > onTime {
		t.Errorf("update took %s with broken kinds configured (limit %s)", d, onTime)
	}

	// In the readable namespace only, the identity may list ConfigMaps (none are there).
	if err := e.local.Create(e.ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: readable, Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.local.Create(e.ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: readable, Name: "read-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-configmaps"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}); err != nil {
		t.Fatal(err)
	}

	for _, ns := range []string{readable, unreadable} {
		name := map[string]string{readable: "acme", unreadable: "beta"}[ns]
		remote, err := e.getRemote(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.mgmt.Delete(e.ctx, remote); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "owned namespace deleted with its object", onTime, func() error {
		return gone(e, &corev1.Namespace{}, client.ObjectKey{Name: readable})
	})
	testenv.Eventually(t, "copy in the namespace with an unreadable kind deleted, remote released", onTime, func() error {
		if err := gone(e, &demov1alpha1.Tenant{}, client.ObjectKey{Namespace: unreadable, Name: "beta"}); err != nil {
			return err
		}
		if _, err := e.getRemote(unreadable, "beta"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("remote still there: %v", err)
		}
		return nil
	})
	ns := &corev1.Namespace{}
	if err := e.local.Get(e.ctx, client.ObjectKey{Name: unreadable}, ns); err != nil || !ns.DeletionTimestamp.IsZero() {
		t.Fatalf("namespace %s, where ConfigMaps cannot be read, was deleted: %v %v", unreadable, err, ns.DeletionTimestamp)
	}
}

// gone returns nil once the local object is not found or terminating.
func gone(e *env, o client.Object, key client.ObjectKey) error {
	err := e.local.Get(e.ctx, key, o)
	if apierrors.IsNotFound(err) || (err == nil && !o.GetDeletionTimestamp().IsZero()) {
		return nil
	}
	return fmt.Errorf("%s still there: %v", key, err)
}
