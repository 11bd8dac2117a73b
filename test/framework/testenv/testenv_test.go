//go:build integration

package testenv_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// Three clusters in one process; in each, a namespace holding a Tenant is deleted and
// kube-controller-manager's namespace controller finalizes it.
func TestThreeClustersNamespaceDeletionCompletes(t *testing.T) {
	fleet := testenv.StartT(t, "management", "region-a", "region-b")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	hosts := map[string]bool{}
	for _, c := range fleet.Clusters {
		hosts[c.Config.Host] = true
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
		if err := c.Client.Create(ctx, ns); err != nil {
			t.Fatalf("%s: creating namespace: %v", c.Name, err)
		}
		tenant := &demov1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: "doomed", Name: "acme"},
			Spec:       demov1alpha1.TenantSpec{DisplayName: "Acme in " + c.Name},
		}
		if err := c.Client.Create(ctx, tenant); err != nil {
			t.Fatalf("%s: creating tenant (CRD installed?): %v", c.Name, err)
		}
		if err := c.Client.Delete(ctx, ns); err != nil {
			t.Fatalf("%s: deleting namespace: %v", c.Name, err)
		}
	}
	if len(hosts) != 3 {
		t.Fatalf("expected 3 distinct API servers, got %v", hosts)
	}
	for _, c := range fleet.Clusters {
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKey{Name: "doomed"}, &corev1.Namespace{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		if err != nil {
			t.Fatalf("%s: namespace was not finalized: %v", c.Name, err)
		}
	}
}

// An impersonated ServiceAccount is forbidden without RBAC and allowed with a Role.
func TestImpersonatedServiceAccountIsSubjectToRBAC(t *testing.T) {
	fleet := testenv.StartT(t, "solo")
	c := fleet.Clusters[0]
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	sa, err := c.ServiceAccountClient("team", "agent")
	if err != nil {
		t.Fatal(err)
	}
	list := &corev1.ConfigMapList{}
	if err := sa.List(ctx, list, client.InNamespace("team")); !apierrors.IsForbidden(err) {
		t.Fatalf("listing configmaps without RBAC: want Forbidden, got %v", err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "agent-reads"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-configmaps"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "team", Name: "agent"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC changes reach the authorizer through its informers: poll briefly.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return sa.List(ctx, list, client.InNamespace("team")) == nil, nil
	})
	if err != nil {
		t.Fatalf("listing configmaps with a Role: %v", err)
	}
	// The Role grants list in "team" only; other namespaces and verbs stay forbidden.
	if err := sa.List(ctx, list, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Fatalf("listing configmaps in another namespace: want Forbidden, got %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x"}}
	if err := sa.Create(ctx, cm); !apierrors.IsForbidden(err) {
		t.Fatalf("creating a configmap with a list-only Role: want Forbidden, got %v", err)
	}
}
