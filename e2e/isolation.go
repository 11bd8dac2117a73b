//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// mechanism is what must refuse a request: RBAC (the overlays' roles) or the management base's
// admission policy. Each check asserts which one, so a refusal for another reason (a typo, a
// missing object) cannot pass for isolation.
type mechanism string

const (
	byRBAC   mechanism = "RBAC"
	byPolicy mechanism = "admission policy"
)

// refusedBy reports whether err is the Forbidden answer of m.
func refusedBy(err error, m mechanism) error {
	if err == nil {
		return errors.New("allowed")
	}
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("want Forbidden by %s, got %w", m, err)
	}
	policy := strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+deploy.IsolationPolicy+"'")
	switch {
	case m == byPolicy && !policy:
		return fmt.Errorf("want a denial by %s, got %w", deploy.IsolationPolicy, err)
	case m == byPolicy && !strings.Contains(err.Error(), "denied request: region "):
		// A validation that failed to evaluate also denies (failurePolicy Fail), but with
		// another message: that is a broken policy, not isolation.
		return fmt.Errorf("want one of the policy's own messages, got %w", err)
	case m == byRBAC && (policy || !strings.Contains(err.Error(), " cannot ")):
		return fmt.Errorf("want an RBAC denial, got %w", err)
	}
	return nil
}

// isolation proves the isolation of regions on management as the real identities: region A's
// identity is refused on region B's objects, Secret, Lease, Region and Events, on new Lease names,
// and on its own objects' spec, labels, other annotations and owner references; A's own writes
// succeed; the agents still sync.
func isolation(t *testing.T, f fleet.Fleet, keys shard.Keys) {
	ctx := context.Background()
	a, b := f.Regions()[0], f.Regions()[1]
	_, mgmtA, err := f.AgentIdentities(a)
	if err != nil {
		t.Fatal(err)
	}
	admin := f.Management()
	tenant := func(region string) *demov1alpha1.Tenant {
		t.Helper()
		tn := &demov1alpha1.Tenant{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: "acme-" + region}, tn); err != nil {
			t.Fatal(err)
		}
		return tn
	}
	secret := func(region string) *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: tenantoperator.TokenSecretName + "-" + region}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	lease := func(region string) *coordinationv1.Lease {
		t.Helper()
		l := &coordinationv1.Lease{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: fleet.AgentNamespace, Name: claim.LeaseName(region)}, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	region := func(name string) *regionsyncv1alpha1.Region {
		t.Helper()
		r := &regionsyncv1alpha1.Region{}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	newLease := func(ns, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{claim.LeaseLabel: "true"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("forged")},
		}
	}
	merge := func(patch string) client.Patch { return client.RawPatch(types.MergePatchType, []byte(patch)) }
	bTenant := tenant(b)
	if !slices.Contains(bTenant.Finalizers, keys.Finalizer) {
		t.Fatalf("%s's Tenant has no finalizer %s to protect: %v", b, keys.Finalizer, bTenant.Finalizers)
	}
	// An Event B's agent wrote on management: labelled with B's region, the only region that may
	// patch it.
	waitEvent(t, admin, tenantNamespace, bTenant.Name, syncer.ReasonNamespaceCreated)
	bEvents := &corev1.EventList{}
	if err := admin.List(ctx, bEvents, client.InNamespace(tenantNamespace), client.MatchingLabels{regionsyncv1alpha1.RegionLabel: b}); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(bEvents.Items, func(ev corev1.Event) bool {
		return ev.InvolvedObject.Name == bTenant.Name && ev.Reason == syncer.ReasonNamespaceCreated
	})
	if i < 0 {
		t.Fatalf("%s's %s Event about %s is not labelled %s=%s", b, syncer.ReasonNamespaceCreated, bTenant.Name, regionsyncv1alpha1.RegionLabel, b)
	}
	bEvent := bEvents.Items[i]
	forgedEvent := bEvent.DeepCopy()
	forgedEvent.ObjectMeta = metav1.ObjectMeta{Namespace: tenantNamespace, GenerateName: "forged-", Labels: map[string]string{regionsyncv1alpha1.RegionLabel: b}}

	refused := []struct {
		what string
		by   mechanism
		do   func() error
	}{
		{"update B's object", byPolicy, func() error {
			tn := tenant(b)
			tn.Spec.Plan = "free"
			return mgmtA.Update(ctx, tn)
		}},
		{"patch B's object", byPolicy, func() error {
			return mgmtA.Patch(ctx, tenant(b), merge(`{"metadata":{"annotations":{"e2e.regionsync.dev/forged":"a"}}}`))
		}},
		{"update B's object's status", byPolicy, func() error {
			tn := tenant(b)
			tn.Status.Phase = "Forged"
			return mgmtA.Status().Update(ctx, tn)
		}},
		{"remove B's object's finalizer", byPolicy, func() error {
			return mgmtA.Patch(ctx, tenant(b), merge(`{"metadata":{"finalizers":null}}`))
		}},
		{"get B's Secret", byRBAC, func() error {
			return mgmtA.Get(ctx, client.ObjectKeyFromObject(secret(b)), &corev1.Secret{})
		}},
		{"update B's Secret", byRBAC, func() error {
			s := secret(b)
			s.Data = map[string][]byte{"token": []byte("forged")}
			return mgmtA.Update(ctx, s)
		}},
		{"create B's Lease", byPolicy, func() error { return mgmtA.Create(ctx, newLease(fleet.AgentNamespace, claim.LeaseName(b))) }},
		{"update B's Lease", byRBAC, func() error {
			l := lease(b)
			l.Spec.HolderIdentity = ptr.To("forged")
			return mgmtA.Update(ctx, l)
		}},
		{"create a Lease for a region that does not exist yet", byPolicy, func() error {
			return mgmtA.Create(ctx, newLease(fleet.AgentNamespace, claim.LeaseName("zz-next-1")))
		}},
		{"create a Lease of another name", byPolicy, func() error { return mgmtA.Create(ctx, newLease(fleet.AgentNamespace, "squatter")) }},
		{"create a Lease outside the management namespace", byRBAC, func() error {
			return mgmtA.Create(ctx, newLease(tenantNamespace, claim.LeaseName(a)))
		}},
		{"update B's Region status", byRBAC, func() error {
			r := region(b)
			r.Status.Leader = "forged"
			return mgmtA.Status().Update(ctx, r)
		}},
		{"update its own Region (not its status)", byRBAC, func() error {
			r := region(a)
			r.Spec.Description = "forged"
			return mgmtA.Update(ctx, r)
		}},
		{"change its own object's spec", byPolicy, func() error {
			tn := tenant(a)
			tn.Spec.Plan = "free"
			return mgmtA.Update(ctx, tn)
		}},
		{"relabel its own object for B", byPolicy, func() error {
			return mgmtA.Patch(ctx, tenant(a), merge(`{"metadata":{"labels":{"`+regionsyncv1alpha1.RegionLabel+`":"`+b+`"}}}`))
		}},
		{"add another finalizer to its own object", byPolicy, func() error {
			tn := tenant(a)
			tn.Finalizers = append(tn.Finalizers, "example.com/keep")
			return mgmtA.Update(ctx, tn)
		}},
		{"write another annotation on its own object", byPolicy, func() error {
			return mgmtA.Patch(ctx, tenant(a), merge(`{"metadata":{"annotations":{"e2e.regionsync.dev/touched":"yes"}}}`))
		}},
		{"give its own object an owner that does not exist (the garbage collector would delete it)", byPolicy, func() error {
			return mgmtA.Patch(ctx, tenant(a), merge(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"6d1f0c52-3c38-4b1a-9d2e-5a8d3c0b7e41"}]}}`))
		}},
		{"turn B's Event into a Normal", byPolicy, func() error {
			return mgmtA.Patch(ctx, bEvent.DeepCopy(), merge(`{"type":"Normal","message":"all good"}`))
		}},
		{"update B's Event", byRBAC, func() error {
			ev := bEvent.DeepCopy()
			ev.Message = "all good"
			return mgmtA.Update(ctx, ev)
		}},
		{"delete B's Event", byRBAC, func() error { return mgmtA.Delete(ctx, bEvent.DeepCopy()) }},
		{"create an Event labelled for B", byPolicy, func() error { return mgmtA.Create(ctx, forgedEvent) }},
		{"move its Lease's registration time back", byPolicy, func() error {
			l := lease(a)
			if l.Annotations[claim.RegisteredAnnotation] == "" {
				return fmt.Errorf("lease %s has no %s", l.Name, claim.RegisteredAnnotation)
			}
			l.Annotations[claim.RegisteredAnnotation] = "2001-01-01T00:00:00Z"
			return mgmtA.Update(ctx, l)
		}},
		{"remove its Lease's registration time", byPolicy, func() error {
			return mgmtA.Patch(ctx, lease(a), merge(`{"metadata":{"annotations":{"`+claim.RegisteredAnnotation+`":null}}}`))
		}},
	}
	for _, c := range refused {
		if err := refusedBy(c.do(), c.by); err != nil {
			t.Errorf("region %s's identity: %s: %v", a, c.what, err)
		}
	}
	// B's object and Event are as B's agent left them, A's object as management wrote it.
	after := tenant(b)
	if after.Spec != bTenant.Spec || !slices.Contains(after.Finalizers, keys.Finalizer) ||
		after.Annotations["e2e.regionsync.dev/forged"] != "" || after.Status.Phase != tenantoperator.PhaseReady {
		t.Errorf("%s's Tenant changed: spec %+v finalizers %v status %+v", b, after.Spec, after.Finalizers, after.Status)
	}
	afterEvent := &corev1.Event{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(&bEvent), afterEvent); err != nil {
		t.Fatal(err)
	}
	if afterEvent.Type != bEvent.Type || afterEvent.Message != bEvent.Message {
		t.Errorf("%s's Event %s changed: %s %q", b, bEvent.Name, afterEvent.Type, afterEvent.Message)
	}
	if own := tenant(a); own.Annotations["e2e.regionsync.dev/touched"] != "" || len(own.OwnerReferences) > 0 {
		t.Errorf("%s's Tenant changed: annotations %v owners %v", a, own.Annotations, own.OwnerReferences)
	}

	// What A's agent does on management is allowed: its own object's generation annotations and
	// status, its own Secret, Lease and Region status. Writes are of the current state (a conflict
	// with the running agent is retried), so the agents' work is not disturbed.
	allowed := map[string]func() error{
		"patch its own object's generation annotations": func() error {
			tn := tenant(a)
			return mgmtA.Patch(ctx, tn, merge(`{"metadata":{"annotations":{"`+keys.RemoteGeneration+`":"`+tn.Annotations[keys.RemoteGeneration]+
				`","`+keys.LocalGeneration+`":"`+tn.Annotations[keys.LocalGeneration]+`"}}}`))
		},
		"update its own object's status": func() error { return mgmtA.Status().Update(ctx, tenant(a)) },
		"update its own object with its finalizers as they are": func() error {
			tn := tenant(a)
			return mgmtA.Update(ctx, tn)
		},
		"get and update its own Secret": func() error {
			s := &corev1.Secret{}
			if err := mgmtA.Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: tenantoperator.TokenSecretName + "-" + a}, s); err != nil {
				return err
			}
			return mgmtA.Update(ctx, s)
		},
		"update its own Lease": func() error { return mgmtA.Update(ctx, lease(a)) },
		"update its own Region's status": func() error {
			r := &regionsyncv1alpha1.Region{}
			if err := mgmtA.Get(ctx, client.ObjectKey{Name: a}, r); err != nil {
				return err
			}
			return mgmtA.Status().Update(ctx, r)
		},
	}
	for what, do := range allowed {
		if err := retry.RetryOnConflict(retry.DefaultRetry, do); err != nil {
			t.Errorf("region %s's identity: %s: %v", a, what, err)
		}
	}

	// A's agent still claims, syncs and finalizes its objects through the policy: a new object
	// goes round trip, and its deletion completes (the agent removes its own finalizer).
	bye := &demov1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "bye-" + a, Labels: regionLabels(a)},
		Spec:       demov1alpha1.TenantSpec{DisplayName: "Bye", Plan: "team"},
	}
	if err := admin.Create(ctx, bye); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent of "+a+" claims and copies bye-"+a, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(bye), bye); err != nil {
			return false, err
		}
		err := f.Region(a).Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: "bye"}, &demov1alpha1.Tenant{})
		return slices.Contains(bye.Finalizers, keys.Finalizer) && err == nil, nil
	})
	if err := admin.Delete(ctx, bye); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deletion of bye-"+a+" completes on both sides", func(ctx context.Context) (bool, error) {
		remote := admin.Get(ctx, client.ObjectKeyFromObject(bye), &demov1alpha1.Tenant{})
		local := f.Region(a).Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: "bye"}, &demov1alpha1.Tenant{})
		return apierrors.IsNotFound(remote) && apierrors.IsNotFound(local), nil
	})
	tn := tenant(a)
	tn.Spec.Plan = "enterprise"
	if err := admin.Update(ctx, tn); err != nil {
		t.Fatal(err)
	}
	waitRoundTrip(t, f, keys, tenantNamespace, a)
}

// outsideShard: with the overlays' namespacePrefix and labelSelector, a management object in a
// namespace without the prefix, or without the region label, is never claimed nor copied, while
// a labelled one in a prefixed namespace is.
func outsideShard(t *testing.T, f fleet.Fleet, keys shard.Keys) {
	ctx := context.Background()
	r := f.Regions()[0]
	admin := f.Management()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-unprefixed"}}); err != nil {
		t.Fatal(err)
	}
	outside := []*demov1alpha1.Tenant{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-unprefixed", Name: "acme-" + r, Labels: regionLabels(r)}, Spec: demov1alpha1.TenantSpec{DisplayName: "x"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "unlabelled-" + r}, Spec: demov1alpha1.TenantSpec{DisplayName: "x"}},
	}
	for _, o := range outside {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// A labelled object in a prefixed namespace, created after them, makes its round trip: by
	// then the agent has seen the others too.
	createTenant(t, f, "tenant-control", r)
	waitRoundTrip(t, f, keys, "tenant-control", r)
	for _, o := range outside {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		if len(o.Finalizers) > 0 || len(o.Annotations) > 0 {
			t.Errorf("%s/%s (outside the shard) was written: finalizers %v annotations %v", o.Namespace, o.Name, o.Finalizers, o.Annotations)
		}
	}
	if err := f.Region(r).Get(ctx, client.ObjectKey{Name: "acme-unprefixed"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace acme-unprefixed in %s: want NotFound, got %v", r, err)
	}
	if err := f.Region(r).Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: "unlabelled"}, &demov1alpha1.Tenant{}); !apierrors.IsNotFound(err) {
		t.Errorf("unlabelled copy in %s: want NotFound, got %v", r, err)
	}
}

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testenv.Eventually(t, what, 2*time.Minute, func() error {
		ok, err := cond(context.Background())
		if err == nil && !ok {
			err = errors.New("not yet")
		}
		return err
	})
}
