//go:build integration

package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/internal/testenv"
	"github.com/regionsync/regionsync/pkg/config"
)

// The management base is accepted by a real API server, and its admission policy alone (the
// caller is also in system:masters, so RBAC allows everything) keeps a region's identity to its
// own objects, Lease and Region, with the policy's own messages (an expression that fails to
// evaluate denies too, with another message), and leaves other users alone.
func TestIsolationPolicyOnAPIServer(t *testing.T) {
	objs, err := Render("../../deploy/kustomize/management")
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
		tn := &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name, Labels: map[string]string{config.RegionLabel: region}},
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
		return c.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"regionsync.dev/sync-remote-generation":"`+v+`"}}}`)))
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
	allowed("annotate its own object", annotate(us, own, "1"))
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
	other := fin.DeepCopy()
	other.Finalizers = append(other.Finalizers, "example.com/keep")
	denied("add another finalizer", us.Update(ctx, other))
	relabel := fin.DeepCopy()
	relabel.Labels[config.RegionLabel] = "eu"
	denied("relabel its own object", us.Update(ctx, relabel))
	denied("delete its own object", us.Delete(ctx, fin.DeepCopy()))

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
