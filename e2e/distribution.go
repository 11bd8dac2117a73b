//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The Distribution scenario's tenants on management, each set up as docs/operations/hub.md tells an
// operator to: the ServiceAccount placer the hub writes as (with what it may write), the hub's
// right to impersonate the namespace's ServiceAccounts, and a tenant user who may write
// Distributions naming placer.
const (
	// distNamespace holds the Distribution placed over the regions.
	distNamespace = "tenant-fleet"
	// legacyNamespace holds a hand-written Tenant at a name a Distribution wants.
	legacyNamespace = "tenant-legacy"
	// lockedNamespace's placer may write ConfigMaps only, not Tenants.
	lockedNamespace = "tenant-locked"
	// placerServiceAccount is the ServiceAccount of each tenant namespace the hub writes as.
	placerServiceAccount = "placer"
	// distAuthor is the tenant user who writes the Distributions (impersonated by the e2e).
	distAuthor = "ana@tenants.example"
	// tierLabel on Regions is what the Distribution's regionSelector selects.
	tierLabel = "e2e.regionsync.dev/tier"
)

// writeTenantsRule lets a placer write the demo Tenants.
var writeTenantsRule = rbacv1.PolicyRule{APIGroups: []string{"demo.regionsync.dev"}, Resources: []string{"tenants"},
	Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}

// RunDistributionScenario runs the hub's scenario on a fleet whose hub is deployed and to which
// the add-a-region scenario (RunScenarios) has added a region with new-region.sh (the last of
// Regions()): a Distribution of the demo Tenant, written by a tenant user and placed by the hub
// as the tenant's ServiceAccount, by region selector over the other regions (three on a local
// fleet) with an override for one; a foreign
// object at a per-region name refused and untouched; the added region, once labelled, receiving
// it; a region leaving the placement losing its copy through the agent's finalizer; a shrink over
// the guard held until confirmed; a ServiceAccount that may not write the kind placing nothing;
// a Region judged HeartbeatMissed while its agents are stopped, Ready once they run again.
func RunDistributionScenario(t *testing.T, f fleet.Fleet) {
	ctx := context.Background()
	keys := shard.NewKeys("regionsync.dev")
	regions := f.Regions()
	// The last region is the one the add-a-region scenario added with new-region.sh.
	if len(regions) < 3 {
		t.Fatalf("the Distribution scenario needs 2 regions and the one the add-a-region scenario adds; regions %v", regions)
	}
	initial, added := regions[:len(regions)-1], regions[len(regions)-1]
	mgmt := f.Management()
	author, err := f.ManagementAs(distAuthor)
	if err != nil {
		t.Fatal(err)
	}
	s := &distScenario{f: f, keys: keys, author: author}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{tierLabel: "prod"}}
	overridden := initial[1]
	want := map[string]int32{}

	t.Run("hub: a Distribution placed by region selector, with an override, reaches every selected region", func(t *testing.T) {
		s.tenantNamespace(t, distNamespace, append(slices.Clone(initial), added), writeTenantsRule)
		for _, r := range initial {
			s.labelRegion(t, r, true)
		}
		// The hub's replicas elect one leader, as the overlay's 2 replicas do in a cluster.
		testenv.Eventually(t, "a hub replica holds the hub's leader Lease", time.Minute, func() error {
			l := &coordinationv1.Lease{}
			if err := mgmt.Get(ctx, client.ObjectKey{Namespace: fleet.AgentNamespace, Name: "regionsync-hub"}, l); err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				return errors.New("no holder")
			}
			return nil
		})
		d := &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: distNamespace, Name: "storefront"},
			Spec: regionsyncv1alpha1.DistributionSpec{
				Template:           tenantTemplate("Storefront"),
				Placement:          regionsyncv1alpha1.Placement{RegionSelector: selector},
				Overrides:          []regionsyncv1alpha1.Override{{Regions: []string{overridden}, MergePatch: &apiextensionsv1.JSON{Raw: []byte(`{"spec":{"replicas":3}}`)}}},
				ServiceAccountName: placerServiceAccount,
			},
		}
		if err := author.Create(ctx, d); err != nil {
			t.Fatalf("%s creating the Distribution: %v", distAuthor, err)
		}
		for _, r := range initial {
			want[r] = 2
		}
		want[overridden] = 3
		s.waitPlaced(t, want, "Storefront")
		// A new template reaches every region, and the status says when each copy is current.
		s.updateSpec(t, distNamespace, "storefront", func(d *regionsyncv1alpha1.Distribution) { d.Spec.Template = tenantTemplate("Storefront v2") })
		s.waitPlaced(t, want, "Storefront v2")
		// Admission: a tenant user who may write Distributions but not impersonate placer is
		// refused, naming the field.
		s.bind(t, distNamespace, "distribution-writer", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory@tenants.example"},
			rbacv1.PolicyRule{APIGroups: []string{regionsyncv1alpha1.GroupVersion.Group}, Resources: []string{"distributions"}, Verbs: []string{"create"}})
		mallory, err := f.ManagementAs("mallory@tenants.example")
		if err != nil {
			t.Fatal(err)
		}
		forged := d.DeepCopy()
		forged.ObjectMeta = metav1.ObjectMeta{Namespace: distNamespace, Name: "forged"}
		err = mallory.Create(ctx, forged)
		if err == nil || !strings.Contains(err.Error(), "spec.serviceAccountName") || !strings.Contains(err.Error(), "may not impersonate") {
			t.Fatalf("a Distribution naming a ServiceAccount its author may not impersonate: %v", err)
		}
	})

	t.Run("hub: an existing per-region object the Distribution does not control is refused and untouched", func(t *testing.T) {
		conflicted, placed := initial[0], initial[1]
		s.tenantNamespace(t, legacyNamespace, []string{conflicted, placed}, writeTenantsRule)
		foreign := testenv.Tenant(legacyNamespace, "legacy-"+conflicted, "Someone else's", func(tn *demov1alpha1.Tenant) { tn.Labels = regionLabels(conflicted) })
		if err := mgmt.Create(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		d := &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: legacyNamespace, Name: "legacy"},
			Spec: regionsyncv1alpha1.DistributionSpec{
				Template:           tenantTemplate("Legacy"),
				Placement:          regionsyncv1alpha1.Placement{Regions: []string{conflicted, placed}},
				ServiceAccountName: placerServiceAccount,
			},
		}
		if err := author.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the conflict listed in the status, the other region placed", 2*time.Minute, func() error {
			d := s.get(ctx, legacyNamespace, "legacy")
			if d == nil {
				return errors.New("no Distribution")
			}
			applied := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied)
			if applied == nil || applied.Status != metav1.ConditionFalse || applied.Reason != regionsyncv1alpha1.ReasonConflict {
				return fmt.Errorf("condition Applied %+v", applied)
			}
			e := statusEntry(d, conflicted)
			if e == nil || e.State != regionsyncv1alpha1.PlacementConflict || !strings.Contains(e.Message, "legacy-"+conflicted) {
				return fmt.Errorf("%s's entry %+v", conflicted, e)
			}
			if e := statusEntry(d, placed); e == nil || e.State != regionsyncv1alpha1.PlacementApplied || !e.Current {
				return fmt.Errorf("%s's entry %+v", placed, e)
			}
			return nil
		})
		waitHubEvent(t, mgmt, legacyNamespace, "legacy", corev1.EventTypeWarning, hub.EventConflict)
		s.assertForeignUntouched(t, foreign, conflicted)
		// Deleting the Distribution removes its own object only.
		deleteDistribution(ctx, t, mgmt, author, keys, d, "the Distribution deleted with its own per-region object", 2*time.Minute, func() error {
			if s.get(ctx, legacyNamespace, "legacy") != nil {
				return errors.New("the Distribution still exists")
			}
			return s.absent(ctx, legacyNamespace, "legacy", placed)
		})
		s.assertForeignUntouched(t, foreign, conflicted)
	})

	t.Run("hub: a region added with new-region.sh receives the Distribution once labelled", func(t *testing.T) {
		r := &regionsyncv1alpha1.Region{}
		if err := mgmt.Get(ctx, client.ObjectKey{Name: added}, r); err != nil {
			t.Fatal(err)
		}
		if r.Spec.Shard == nil {
			t.Fatalf("Region %s, written by new-region.sh's overlay, has no spec.shard", added)
		}
		if d := s.get(ctx, distNamespace, "storefront"); d == nil || statusEntry(d, added) != nil || int(d.Status.Counts.Selected) != len(initial) {
			t.Fatalf("before it is labelled, %s is not selected: %+v", added, d)
		}
		s.labelRegion(t, added, true)
		want[added] = 2
		s.waitPlaced(t, want, "Storefront v2")
	})

	t.Run("hub: a region leaving the placement loses its copy through its agent's finalizer", func(t *testing.T) {
		leaving := initial[len(initial)-1]
		obj := &demov1alpha1.Tenant{}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: distNamespace, Name: "storefront-" + leaving}, obj); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(obj.Finalizers, keys.Finalizer) {
			t.Fatalf("%s's per-region object has no agent finalizer %s: %v", leaving, keys.Finalizer, obj.Finalizers)
		}
		s.labelRegion(t, leaving, false)
		delete(want, leaving)
		testenv.Eventually(t, leaving+"'s copy deleted and its per-region object's finalizer released", 2*time.Minute, func() error {
			return s.absent(ctx, distNamespace, "storefront", leaving)
		})
		s.waitPlaced(t, want, "Storefront v2")
	})

	t.Run("hub: a shrink over the guard is held until confirmed", func(t *testing.T) {
		s.updateSpec(t, distNamespace, "storefront", func(d *regionsyncv1alpha1.Distribution) {
			d.Spec.Placement.RegionSelector = &metav1.LabelSelector{MatchLabels: map[string]string{tierLabel: "prdo"}} // a typo
		})
		testenv.Eventually(t, "the removal of every region's object held", time.Minute, func() error {
			d := s.get(ctx, distNamespace, "storefront")
			if d == nil {
				return errors.New("no Distribution")
			}
			if c := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionRemovalHeld); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("condition RemovalHeld %+v", c)
			}
			for r := range want {
				if e := statusEntry(d, r); e == nil || e.State != regionsyncv1alpha1.PlacementRemovalHeld {
					return fmt.Errorf("%s's entry %+v", r, e)
				}
			}
			return nil
		})
		waitHubEvent(t, mgmt, distNamespace, "storefront", corev1.EventTypeWarning, hub.EventRemovalHeld)
		for r := range want { // held: nothing was removed
			obj := &demov1alpha1.Tenant{}
			if err := mgmt.Get(ctx, client.ObjectKey{Namespace: distNamespace, Name: "storefront-" + r}, obj); err != nil || obj.DeletionTimestamp != nil {
				t.Fatalf("%s's per-region object while the removal is held: %v (deleting %v)", r, err, obj.DeletionTimestamp)
			}
			if err := f.Region(r).Get(ctx, client.ObjectKey{Namespace: distNamespace, Name: "storefront"}, &demov1alpha1.Tenant{}); err != nil {
				t.Fatalf("%s's copy while the removal is held: %v", r, err)
			}
		}
		// The tenant confirms (a metadata-only change: no admission check of the spec).
		d := s.get(ctx, distNamespace, "storefront")
		orig := d.DeepCopy()
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, keys.ConfirmRemovalsBefore, time.Now().Add(2*time.Second).UTC().Format(time.RFC3339))
		if err := author.Patch(ctx, d, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the confirmed removals carried out in every region", 2*time.Minute, func() error {
			for r := range want {
				if err := s.absent(ctx, distNamespace, "storefront", r); err != nil {
					return err
				}
			}
			d := s.get(ctx, distNamespace, "storefront")
			if d == nil {
				return errors.New("no Distribution")
			}
			if c := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionRemovalHeld); c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("condition RemovalHeld %+v", c)
			}
			if d.Status.Counts != (regionsyncv1alpha1.DistributionCounts{}) {
				return fmt.Errorf("counts %+v", d.Status.Counts)
			}
			return nil
		})
		deleteDistribution(ctx, t, mgmt, author, keys, d, "the Distribution deleted (the hub releases its finalizer)", time.Minute, func() error {
			if s.get(ctx, distNamespace, "storefront") != nil {
				return errors.New("still there")
			}
			return nil
		})
	})

	t.Run("hub: a ServiceAccount that may not write the kind places nothing, named in Applied=False", func(t *testing.T) {
		region := initial[0]
		writeConfigMaps := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}
		s.tenantNamespace(t, lockedNamespace, nil, writeConfigMaps)
		// The Secret's data: it must reach no region and no log.
		secretValue := "e2e-hub-never-places-or-logs-this"
		secret, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret",
			"data": map[string]any{"token": base64.StdEncoding.EncodeToString([]byte(secretValue))}})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []*regionsyncv1alpha1.Distribution{
			{ObjectMeta: metav1.ObjectMeta{Namespace: lockedNamespace, Name: "storefront"}, Spec: regionsyncv1alpha1.DistributionSpec{
				Template: tenantTemplate("Locked"), Placement: regionsyncv1alpha1.Placement{Regions: []string{region}}, ServiceAccountName: placerServiceAccount}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: lockedNamespace, Name: "token"}, Spec: regionsyncv1alpha1.DistributionSpec{
				Template: runtime.RawExtension{Raw: secret}, Placement: regionsyncv1alpha1.Placement{Regions: []string{region}}, ServiceAccountName: placerServiceAccount}},
		} {
			if err := author.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		sa := testenv.ServiceAccountUser(lockedNamespace, placerServiceAccount)
		for name, wantApplied := range map[string]struct {
			reason string
			says   []string
		}{
			// The write, made as placer (a server-side apply), is refused by RBAC: the tenant
			// cannot place through the hub what its ServiceAccount may not write.
			"storefront": {regionsyncv1alpha1.ReasonApplyFailed, []string{region + ":", `"` + sa + `" cannot`, `resource "tenants"`}},
			// The hub places no Secret at all.
			"token": {regionsyncv1alpha1.ReasonInvalidSpec, []string{"spec.template.kind"}},
		} {
			testenv.Eventually(t, "Distribution "+name+": Applied=False "+wantApplied.reason, time.Minute, func() error {
				d := s.get(ctx, lockedNamespace, name)
				if d == nil {
					return errors.New("no Distribution")
				}
				c := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != wantApplied.reason {
					return fmt.Errorf("condition Applied %+v, want False %s", c, wantApplied.reason)
				}
				for _, say := range wantApplied.says {
					if !strings.Contains(c.Message, say) {
						return fmt.Errorf("condition Applied=False %s says %q, not %q", c.Reason, c.Message, say)
					}
				}
				return nil
			})
		}
		tenants, secrets := &demov1alpha1.TenantList{}, &corev1.SecretList{}
		if err := mgmt.List(ctx, tenants, client.InNamespace(lockedNamespace)); err != nil || len(tenants.Items) != 0 {
			t.Errorf("Tenants written in %s: %d (%v)", lockedNamespace, len(tenants.Items), err)
		}
		if err := mgmt.List(ctx, secrets, client.InNamespace(lockedNamespace)); err != nil {
			t.Fatal(err)
		}
		for _, sec := range secrets.Items {
			if strings.HasPrefix(sec.Name, "token") {
				t.Errorf("Secret %s written in %s", sec.Name, lockedNamespace)
			}
		}
		logs, err := f.HubLogs()
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) == 0 {
			t.Fatal("no hub logs to check")
		}
		if strings.Contains(logs, secretValue) || strings.Contains(logs, base64.StdEncoding.EncodeToString([]byte(secretValue))) {
			t.Error("the Secret template's data appears in the hub's logs")
		}
	})

	t.Run("hub: a Region goes Ready=Unknown (HeartbeatMissed) when its agents stop, Ready when they start", func(t *testing.T) {
		region := initial[0]
		s.waitReady(t, region, metav1.ConditionTrue, "")
		if err := f.StopAgents(ctx, region); err != nil {
			t.Fatal(err)
		}
		s.waitReady(t, region, metav1.ConditionUnknown, regionsyncv1alpha1.ReasonHeartbeatMissed)
		if err := f.StartAgents(ctx, region); err != nil {
			t.Fatal(err)
		}
		s.waitReady(t, region, metav1.ConditionTrue, "")
	})
}

// distScenario holds what the Distribution scenario's steps share.
type distScenario struct {
	f      fleet.Fleet
	keys   shard.Keys
	author client.Client
}

// tenantTemplate is the Distribution's template: a demo Tenant.
func tenantTemplate(display string) runtime.RawExtension {
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
		"metadata": map[string]any{"labels": map[string]any{"app": "storefront"}},
		"spec":     map[string]any{"displayName": display, "plan": "team", "replicas": 2},
	})
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: raw}
}

// tenantNamespace sets up ns as docs/operations/hub.md says: the ServiceAccount placer with rules,
// the hub's right to impersonate the namespace's ServiceAccounts, the author's right to write
// Distributions naming placer, and the (empty) token Secrets the regions upload to.
func (s *distScenario) tenantNamespace(t *testing.T, ns string, regions []string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx, c := context.Background(), s.f.Management()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: placerServiceAccount}},
	} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	s.bind(t, ns, placerServiceAccount, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: placerServiceAccount}, rules...)
	hubBinding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regionsync-hub-impersonate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "regionsync-hub-impersonate"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: fleet.AgentNamespace, Name: fleet.HubServiceAccount}},
	}
	if err := c.Create(ctx, hubBinding); err != nil {
		t.Fatal(err)
	}
	s.bind(t, ns, "distribution-author", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: distAuthor},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{placerServiceAccount}, Verbs: []string{"impersonate"}},
		rbacv1.PolicyRule{APIGroups: []string{regionsyncv1alpha1.GroupVersion.Group}, Resources: []string{"distributions"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	for _, r := range regions {
		tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenantoperator.TokenSecretName + "-" + r, Labels: regionLabels(r)}}
		if err := c.Create(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
}

// bind creates a Role name in ns with rules and binds it to subject.
func (s *distScenario) bind(t *testing.T, ns, name string, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx, c := context.Background(), s.f.Management()
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{subject}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The API server's authorizer reads RBAC from its informers: a binding just created may not
	// be seen by the next request yet. Wait until every rule is granted to the subject.
	user := subject.Name
	if subject.Kind == rbacv1.ServiceAccountKind {
		user = testenv.ServiceAccountUser(subject.Namespace, subject.Name)
	}
	for _, r := range rules {
		if len(r.Verbs) == 0 || len(r.APIGroups) == 0 || len(r.Resources) == 0 {
			continue // grants nothing to wait for
		}
		attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}
		if len(r.ResourceNames) > 0 {
			attrs.Name = r.ResourceNames[0]
		}
		testenv.Eventually(t, fmt.Sprintf("%s may %s %s in %s (RBAC seen by the authorizer)", user, attrs.Verb, attrs.Resource, ns), 30*time.Second, func() error {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs}}
			if err := c.Create(ctx, review); err != nil {
				return err
			}
			if !review.Status.Allowed {
				return fmt.Errorf("not allowed yet: %s", review.Status.Reason)
			}
			return nil
		})
	}
}

// labelRegion sets (or removes) the label the Distribution selects on a Region, as the fleet's
// operator would.
func (s *distScenario) labelRegion(t *testing.T, region string, on bool) {
	t.Helper()
	value := `"prod"`
	if !on {
		value = "null"
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, tierLabel, value)
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: region}}
	if err := s.f.Management().Patch(context.Background(), r, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// updateSpec changes a Distribution's spec as its author (on a conflict, again).
func (s *distScenario) updateSpec(t *testing.T, ns, name string, change func(*regionsyncv1alpha1.Distribution)) {
	t.Helper()
	testenv.Eventually(t, "updating Distribution "+ns+"/"+name, 30*time.Second, func() error {
		d := &regionsyncv1alpha1.Distribution{}
		if err := s.author.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		change(d)
		return s.author.Update(context.Background(), d)
	})
}

// get reads a Distribution (nil when it does not exist or cannot be read).
func (s *distScenario) get(ctx context.Context, ns, name string) *regionsyncv1alpha1.Distribution {
	d := &regionsyncv1alpha1.Distribution{}
	if err := s.f.Management().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return nil
	}
	return d
}

func statusEntry(d *regionsyncv1alpha1.Distribution, region string) *regionsyncv1alpha1.DistributionRegionStatus {
	for i := range d.Status.Regions {
		if d.Status.Regions[i].Region == region {
			return &d.Status.Regions[i]
		}
	}
	return nil
}

// waitPlaced waits until the Distribution storefront of distNamespace is placed in exactly the regions of want (the
// copy's spec.replicas per region) with displayName: the per-region objects on management
// labelled for their region and the Distribution, the copies in the regions, and a status that
// says so — counts, every region's entry current and healthy at its object's generation, and
// Applied and Available True.
func (s *distScenario) waitPlaced(t *testing.T, want map[string]int32, displayName string) {
	t.Helper()
	ctx, ns, name := context.Background(), distNamespace, "storefront"
	testenv.Eventually(t, fmt.Sprintf("Distribution %s/%s placed in %v, current and available", ns, name, want), 2*time.Minute, func() error {
		d := s.get(ctx, ns, name)
		if d == nil {
			return errors.New("no Distribution")
		}
		n := int32(len(want))
		c := d.Status.Counts
		if d.Status.ObservedGeneration != d.Generation || c.Selected != n || c.Placed != n || c.Current != n || c.Ready != n || c.Removing != 0 || c.Failed != 0 {
			return fmt.Errorf("observed generation %d of %d, counts %+v, regions %+v", d.Status.ObservedGeneration, d.Generation, c, d.Status.Regions)
		}
		for _, cond := range []string{regionsyncv1alpha1.DistributionApplied, regionsyncv1alpha1.DistributionAvailable} {
			if !meta.IsStatusConditionTrue(d.Status.Conditions, cond) {
				return fmt.Errorf("%s not True: %+v", cond, d.Status.Conditions)
			}
		}
		if len(d.Status.Regions) != len(want) {
			return fmt.Errorf("status lists %+v", d.Status.Regions)
		}
		for r, replicas := range want {
			obj := &demov1alpha1.Tenant{}
			if err := s.f.Management().Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-" + r}, obj); err != nil {
				return err
			}
			if obj.Labels[regionsyncv1alpha1.RegionLabel] != r || obj.Labels[s.keys.Distribution] != name {
				return fmt.Errorf("%s's per-region object labelled %v", r, obj.Labels)
			}
			e := statusEntry(d, r)
			if e == nil || e.State != regionsyncv1alpha1.PlacementApplied || !e.Current || e.Health != "Current" || e.Generation != obj.Generation || e.Name != obj.Name {
				return fmt.Errorf("%s's entry %+v (object %s generation %d)", r, e, obj.Name, obj.Generation)
			}
			cp := &demov1alpha1.Tenant{}
			if err := s.f.Region(r).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cp); err != nil {
				return fmt.Errorf("%s's copy: %w", r, err)
			}
			if cp.Spec.Replicas != replicas || cp.Spec.DisplayName != displayName || cp.Labels["app"] != "storefront" {
				return fmt.Errorf("%s's copy: replicas %d, displayName %q, labels %v; want %d, %q", r, cp.Spec.Replicas, cp.Spec.DisplayName, cp.Labels, replicas, displayName)
			}
		}
		return nil
	})
}

// absent says why region still has the Distribution's object (nil once the per-region object on
// management and the region's copy are both gone: the agent deleted the copy and released its
// finalizer).
func (s *distScenario) absent(ctx context.Context, ns, name, region string) error {
	err := s.f.Management().Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-" + region}, &demov1alpha1.Tenant{})
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s's per-region object: %v", region, err)
	}
	err = s.f.Region(region).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &demov1alpha1.Tenant{})
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s's copy: %v", region, err)
	}
	return nil
}

// assertForeignUntouched checks that the hub never wrote the foreign object: its spec as written,
// no Distribution label, no field managed by the hub; its region's agent still syncs it.
func (s *distScenario) assertForeignUntouched(t *testing.T, foreign *demov1alpha1.Tenant, region string) {
	t.Helper()
	ctx := context.Background()
	live := &demov1alpha1.Tenant{}
	if err := s.f.Management().Get(ctx, client.ObjectKeyFromObject(foreign), live); err != nil {
		t.Fatalf("the foreign object: %v", err)
	}
	if live.Spec != foreign.Spec || live.Labels[s.keys.Distribution] != "" {
		t.Errorf("the foreign object was changed: spec %+v, labels %v", live.Spec, live.Labels)
	}
	for _, mf := range live.ManagedFields {
		if mf.Manager == hub.FieldManager {
			t.Errorf("the hub manages fields of the foreign object: %+v", mf)
		}
	}
	cp := &demov1alpha1.Tenant{}
	if err := s.f.Region(region).Get(ctx, client.ObjectKey{Namespace: foreign.Namespace, Name: "legacy"}, cp); err != nil || cp.Spec.DisplayName != foreign.Spec.DisplayName {
		t.Errorf("the foreign object's copy in %s: %v (%q)", region, err, cp.Spec.DisplayName)
	}
}

// waitReady waits for the Region's Ready condition to have status (and reason, when set).
func (s *distScenario) waitReady(t *testing.T, region string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("Region %s Ready=%s %s", region, status, reason), 2*time.Minute, func() error {
		r := &regionsyncv1alpha1.Region{}
		if err := s.f.Management().Get(context.Background(), client.ObjectKey{Name: region}, r); err != nil {
			return err
		}
		c := meta.FindStatusCondition(r.Status.Conditions, regionsyncv1alpha1.ConditionReady)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("condition Ready %+v", c)
		}
		return nil
	})
}

// waitHubEvent waits for an Event of the hub of type and reason about the Distribution ns/name.
func waitHubEvent(t *testing.T, c client.Client, ns, name, typ, reason string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("a %s %s event of the hub about Distribution %s/%s", typ, reason, ns, name), 30*time.Second, func() error {
		evs := &eventsv1.EventList{}
		if err := c.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, ev := range evs.Items {
			seen = append(seen, ev.ReportingController+" "+ev.Type+" "+ev.Reason+" "+ev.Regarding.Name)
			if ev.Regarding.Kind == "Distribution" && ev.Regarding.Name == name && ev.Type == typ && ev.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("events: %v", seen)
	})
}

// deleteDistribution deletes a Distribution as its author and waits until gone() holds. The
// hub's shrink guard counts a deletion against each region's budget across all Distributions:
// when earlier scenarios removed objects from the same regions within the guard's window, the
// deletion is held (RemovalHeld), and the scenario confirms it as an operator would, with the
// annotation and a time after the hold began.
func deleteDistribution(ctx context.Context, t *testing.T, mgmt, author client.Client, keys shard.Keys, d *regionsyncv1alpha1.Distribution,
	what string, timeout time.Duration, gone func() error) {
	t.Helper()
	if err := author.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	confirmed := false
	testenv.Eventually(t, what, timeout, func() error {
		err := gone()
		if err == nil || confirmed {
			return err
		}
		live := &regionsyncv1alpha1.Distribution{}
		if mgmt.Get(ctx, client.ObjectKeyFromObject(d), live) != nil {
			return err
		}
		held := meta.FindStatusCondition(live.Status.Conditions, regionsyncv1alpha1.DistributionRemovalHeld)
		if held == nil || held.Status != metav1.ConditionTrue {
			return err
		}
		t.Logf("Distribution %s/%s: its deletion is held (%s); confirming it", d.Namespace, d.Name, held.Message)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, keys.ConfirmRemovalsBefore, time.Now().Add(time.Second).UTC().Format(time.RFC3339))
		if perr := author.Patch(ctx, live, client.RawPatch(types.MergePatchType, []byte(patch))); perr != nil {
			return fmt.Errorf("confirming the held deletion: %w", perr)
		}
		confirmed = true
		return err
	})
}
