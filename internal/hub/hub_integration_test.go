//go:build integration

package hub_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/prometheus/client_golang/prometheus/testutil"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

const (
	ns         = "tenant-acme"
	tenantKind = "Tenant.demo.regionsync.dev"
)

var keys = shard.NewKeys("regionsync.dev")

func TestMain(m *testing.M) {
	testenv.SetProcessLoggers()
	os.Exit(m.Run())
}

// startHub runs the hub's controllers in-process against the management cluster until the test
// ends, as the hub's ServiceAccount (its own token, so that its impersonation is checked as in a
// cluster) with the RBAC deploy/kustomize/hub ships (so the shipped rights are proven enough).
func startHub(t *testing.T, mgmt *testenv.Cluster, o hub.Options) {
	t.Helper()
	installHubRBAC(t, mgmt)
	t.Cleanup(runHub(t, mgmt, o))
}

// installHubRBAC creates the hub's namespace, ServiceAccount, RBAC and FlowSchema as
// deploy/kustomize/hub ships them.
func installHubRBAC(t *testing.T, mgmt *testenv.Cluster) {
	t.Helper()
	objs, err := deploy.Render("../../deploy/kustomize/hub")
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "regionsync-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "FlowSchema":
			if err := mgmt.Client.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("applying the hub's %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
}

// TestHubFlowSchema: with the management base's API Priority and Fairness objects (the regions'
// FlowSchema matches every ServiceAccount of regionsync-system) and the hub's, the hub's requests
// are dispatched in workload-high under its own FlowSchema, none in the regions' priority level,
// where they would be one flow among the fleet's.
func TestHubFlowSchema(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	base, err := deploy.Render("../../deploy/kustomize/management")
	if err != nil {
		t.Fatal(err)
	}
	var schemas []string
	for _, obj := range base {
		if k := obj.GetKind(); k == "FlowSchema" || k == "PriorityLevelConfiguration" {
			if k == "FlowSchema" {
				schemas = append(schemas, obj.GetName())
			}
			create(t, mgmt.Client, obj)
		}
	}
	installHubRBAC(t, mgmt)
	schemas = append(schemas, "regionsync-hub")
	// The API server takes FlowSchemas up asynchronously: its controller marks each one it
	// read (Dangling) before the hub sends a request.
	for _, name := range schemas {
		testenv.Eventually(t, "FlowSchema "+name+" in effect", 30*time.Second, func() error {
			fs := &flowcontrolv1.FlowSchema{}
			if err := mgmt.Client.Get(bg, types.NamespacedName{Name: name}, fs); err != nil {
				return err
			}
			for _, c := range fs.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling && c.Status == flowcontrolv1.ConditionFalse {
					return nil
				}
			}
			return fmt.Errorf("conditions %+v", fs.Status.Conditions)
		})
	}
	regions0, err := testenv.Dispatched(bg, mgmt.Config, "regionsync-regions", "regionsync-regions")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runHub(t, mgmt, hub.Options{}))
	testenv.Eventually(t, "the hub's requests dispatched under FlowSchema regionsync-hub in workload-high", 30*time.Second, func() error {
		n, err := testenv.Dispatched(bg, mgmt.Config, "regionsync-hub", "workload-high")
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("none so far")
		}
		return nil
	})
	regions, err := testenv.Dispatched(bg, mgmt.Config, "regionsync-regions", "regionsync-regions")
	if err != nil {
		t.Fatal(err)
	}
	if regions != regions0 {
		t.Errorf("%.0f requests dispatched in the regions' priority level while only the hub ran, want none", regions-regions0)
	}
}

// startHubProcess starts a hub as startHub does (its RBAC applied once) and returns what stops
// it, as a hub process ending; a second one started later is a new process with nothing in
// memory.
func startHubProcess(t *testing.T, mgmt *testenv.Cluster, o hub.Options) (stop func()) {
	t.Helper()
	installHubRBAC(t, mgmt)
	return runHub(t, mgmt, o)
}

// runHub starts one hub process (a manager as the hub's ServiceAccount) and returns what stops it.
func runHub(t *testing.T, mgmt *testenv.Cluster, o hub.Options) (stop func()) {
	t.Helper()
	cfg, err := mgmt.ServiceAccountTokenConfig(context.Background(), "regionsync-system", "regionsync-hub")
	if err != nil {
		t.Fatal(err)
	}
	log := testenv.NewTestLog(t)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testenv.Scheme(), Logger: log.Logger("hub"), Cache: hub.CacheOptions(o),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("hub manager: %v", err)
			}
		})
	}
}

// tenantWriter is what an operator sets up in a tenant namespace for the hub (docs/operations/hub.md):
// a ServiceAccount sa with the rules given (a Role), and the hub's right to impersonate the
// namespace's ServiceAccounts (a RoleBinding of regionsync-hub-impersonate).
func tenantWriter(t *testing.T, c client.Client, namespace, sa string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	create(t, c,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa}, Rules: rules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: sa}},
		})
	hubBinding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "regionsync-hub-impersonate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "regionsync-hub-impersonate"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "regionsync-system", Name: "regionsync-hub"}},
	}
	if err := c.Create(context.Background(), hubBinding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// writeTenants lets a ServiceAccount write the demo Tenants.
var writeTenants = rbacv1.PolicyRule{APIGroups: []string{"demo.regionsync.dev"}, Resources: []string{"tenants"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}

func region(name string, lbls map[string]string, rs *regionsyncv1alpha1.RegionShard) *regionsyncv1alpha1.Region {
	return &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, Spec: regionsyncv1alpha1.RegionSpec{Shard: rs}}
}

func tenantShard(suffix, name string, kinds ...string) *regionsyncv1alpha1.RegionShard {
	if len(kinds) == 0 {
		kinds = []string{tenantKind}
	}
	return &regionsyncv1alpha1.RegionShard{
		NamespacePrefix: "tenant-", RemoteResourceSuffix: suffix,
		LabelSelector: "regionsync.dev/region=" + name, Kinds: kinds,
	}
}

func tenantTemplate(plan string, extra string) runtime.RawExtension {
	return runtime.RawExtension{Raw: []byte(fmt.Sprintf(
		`{"apiVersion":"demo.regionsync.dev/v1alpha1","kind":"Tenant","metadata":{"labels":{"team":"acme"}%s},"spec":{"displayName":"Acme","plan":%q}}`, extra, plan))}
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func getTenant(c client.Client, name string) (*demov1alpha1.Tenant, error) {
	tn := &demov1alpha1.Tenant{}
	return tn, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, tn)
}

func getDist(t *testing.T, c client.Client, name string) *regionsyncv1alpha1.Distribution {
	t.Helper()
	d := &regionsyncv1alpha1.Distribution{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// updateDist changes Distribution name and writes it: read afresh and changed again when the hub
// wrote it in between (its finalizer, its annotations), so that a test's write never loses the
// optimistic-concurrency race it does not test.
func updateDist(t *testing.T, c client.Client, name string, change func(*regionsyncv1alpha1.Distribution)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := getDist(t, c, name)
		change(d)
		return c.Update(context.Background(), d)
	}); err != nil {
		t.Fatalf("updating Distribution %s: %v", name, err)
	}
}

func entry(d *regionsyncv1alpha1.Distribution, region string) *regionsyncv1alpha1.DistributionRegionStatus {
	for i := range d.Status.Regions {
		if d.Status.Regions[i].Region == region {
			return &d.Status.Regions[i]
		}
	}
	return nil
}

// TestHubDistribution: a template placed by region selector with an override for one region;
// regions without a shard, or not syncing the kind, listed Unplaceable; a foreign object at a
// per-region name refused; currentness and health from the agent's generation annotations; the
// agent's finalizer and annotations kept across template changes; a region that stops matching
// loses its object; bad input named in a condition while other Distributions go on; the shrink
// guard holds a large removal until confirmed; deletion with Delete and Orphan.
func TestHubDistribution(t *testing.T) {
	bg := context.Background()
	f := testenv.StartT(t, "management")
	mgmt := f.Cluster("management")
	c := mgmt.Client
	prod := map[string]string{"tier": "prod"}
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		region("r-a", prod, tenantShard("-ra", "r-a")),
		region("r-b", prod, tenantShard("-rb", "r-b")),
		region("r-c", map[string]string{"tier": "dev"}, tenantShard("-rc", "r-c")),
		region("r-old", prod, nil),
		region("r-cm", prod, tenantShard("-rcm", "r-cm", "ConfigMap")),
	)
	// A Tenant the hub does not control, at the name the Distribution would use in r-c.
	foreign := testenv.Tenant(ns, "acme-rc", "Someone else's")
	foreign.Labels = map[string]string{"regionsync.dev/region": "r-c"}
	create(t, c, foreign)
	tenantWriter(t, c, ns, "placer", writeTenants)
	startHub(t, mgmt, hub.Options{ShrinkWindow: time.Minute, DefaultServiceAccountName: "placer"})

	d := &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template: tenantTemplate("team", ""),
			Placement: regionsyncv1alpha1.Placement{
				RegionSelector: &metav1.LabelSelector{MatchLabels: prod},
			},
			Overrides: []regionsyncv1alpha1.Override{{
				Regions:    []string{"r-b"},
				MergePatch: &apiextensionsv1.JSON{Raw: []byte(`{"spec":{"plan":"enterprise"},"metadata":{"labels":{"tier":"gold"}}}`)},
			}},
		},
	}
	create(t, c, d)

	testenv.Eventually(t, "per-region objects in r-a and r-b, r-b overridden", 20*time.Second, func() error {
		a, err := getTenant(c, "acme-ra")
		if err != nil {
			return err
		}
		b, err := getTenant(c, "acme-rb")
		if err != nil {
			return err
		}
		if a.Spec.Plan != "team" || b.Spec.Plan != "enterprise" || a.Spec.DisplayName != "Acme" {
			return fmt.Errorf("plans %q, %q", a.Spec.Plan, b.Spec.Plan)
		}
		for _, tn := range []*demov1alpha1.Tenant{a, b} {
			want := map[string]string{"regionsync.dev/region": "r-" + strings.TrimPrefix(tn.Name, "acme-r"), keys.Distribution: "acme", "team": "acme"}
			for k, v := range want {
				if tn.Labels[k] != v {
					return fmt.Errorf("%s labels %v, want %s=%s", tn.Name, tn.Labels, k, v)
				}
			}
			if len(tn.OwnerReferences) > 0 {
				return fmt.Errorf("%s has owner references %v", tn.Name, tn.OwnerReferences)
			}
		}
		if b.Labels["tier"] != "gold" || a.Labels["tier"] != "" {
			return fmt.Errorf("override labels: a %v, b %v", a.Labels, b.Labels)
		}
		return nil
	})
	testenv.Eventually(t, "status: 4 selected, 2 placed, 2 unplaceable with their reasons", 20*time.Second, func() error {
		got := getDist(t, c, "acme")
		cnt := got.Status.Counts
		if cnt.Selected != 4 || cnt.Placed != 2 || cnt.Unplaceable != 2 {
			return fmt.Errorf("counts %+v", cnt)
		}
		if e := entry(got, "r-old"); e == nil || e.State != regionsyncv1alpha1.PlacementUnplaceable || e.Reason != regionsyncv1alpha1.ReasonNoShard {
			return fmt.Errorf("r-old: %+v", e)
		}
		if e := entry(got, "r-cm"); e == nil || e.Reason != regionsyncv1alpha1.ReasonKindNotSynced || !strings.Contains(e.Message, tenantKind) {
			return fmt.Errorf("r-cm: %+v", e)
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, regionsyncv1alpha1.DistributionApplied) ||
			!meta.IsStatusConditionTrue(got.Status.Conditions, regionsyncv1alpha1.DistributionDegraded) {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		if !controllerutilContains(got.Finalizers, keys.HubFinalizer) {
			return fmt.Errorf("finalizers %v", got.Finalizers)
		}
		return nil
	})

	// The agent of r-a claims its object and reports it current and observed (as internal/syncer does).
	agentReports := func(name string, observed int64) {
		t.Helper()
		tn, err := getTenant(c, name)
		if err != nil {
			t.Fatal(err)
		}
		tn.Finalizers = append(tn.Finalizers, keys.Finalizer)
		if tn.Annotations == nil {
			tn.Annotations = map[string]string{}
		}
		tn.Annotations[keys.RemoteGeneration] = strconv.FormatInt(tn.Generation, 10)
		tn.Annotations[keys.LocalGeneration] = strconv.FormatInt(observed, 10)
		if err := c.Update(bg, tn, client.FieldOwner("regionsync")); err != nil {
			t.Fatal(err)
		}
		tn.Status = demov1alpha1.TenantStatus{ObservedGeneration: observed, Phase: "Ready"}
		if err := c.Status().Update(bg, tn, client.FieldOwner("regionsync")); err != nil {
			t.Fatal(err)
		}
	}
	agentReports("acme-ra", 3)
	testenv.Eventually(t, "r-a current and ready", 20*time.Second, func() error {
		got := getDist(t, c, "acme")
		e := entry(got, "r-a")
		if e == nil || !e.Current || e.Health != "Current" || got.Status.Counts.Current != 1 || got.Status.Counts.Ready != 1 {
			return fmt.Errorf("r-a %+v, counts %+v", e, got.Status.Counts)
		}
		return nil
	})

	// A template change reaches both objects; the agent's finalizer and annotations stay, and r-a
	// is no longer current until its agent copies the new generation.
	updateDist(t, c, "acme", func(got *regionsyncv1alpha1.Distribution) {
		got.Spec.Template = tenantTemplate("free", "")
		got.Spec.Overrides = nil
	})
	testenv.Eventually(t, "the change placed, the agent's marks kept", 20*time.Second, func() error {
		a, err := getTenant(c, "acme-ra")
		if err != nil {
			return err
		}
		b, err := getTenant(c, "acme-rb")
		if err != nil {
			return err
		}
		if a.Spec.Plan != "free" || b.Spec.Plan != "free" || b.Labels["tier"] != "" {
			return fmt.Errorf("plans %q %q, r-b labels %v; status %+v", a.Spec.Plan, b.Spec.Plan, b.Labels, getDist(t, c, "acme").Status)
		}
		if !controllerutilContains(a.Finalizers, keys.Finalizer) || a.Annotations[keys.LocalGeneration] != "3" {
			return fmt.Errorf("r-a lost the agent's marks: finalizers %v annotations %v", a.Finalizers, a.Annotations)
		}
		if e := entry(getDist(t, c, "acme"), "r-a"); e == nil || e.Current || e.Generation != a.Generation {
			return fmt.Errorf("r-a entry %+v (object generation %d)", e, a.Generation)
		}
		return nil
	})

	// A foreign object at r-c's name is refused, left unchanged, and reported.
	updateDist(t, c, "acme", func(got *regionsyncv1alpha1.Distribution) {
		got.Spec.Placement.Regions = []string{"r-c"}
	})
	testenv.Eventually(t, "r-c Conflict, Applied=False, a Warning event", 20*time.Second, func() error {
		got := getDist(t, c, "acme")
		e := entry(got, "r-c")
		if e == nil || e.State != regionsyncv1alpha1.PlacementConflict || !strings.Contains(e.Message, "never taken over") {
			return fmt.Errorf("r-c %+v", e)
		}
		applied := meta.FindStatusCondition(got.Status.Conditions, regionsyncv1alpha1.DistributionApplied)
		if applied == nil || applied.Status != metav1.ConditionFalse || applied.Reason != regionsyncv1alpha1.ReasonConflict {
			return fmt.Errorf("Applied %+v", applied)
		}
		var evs eventsv1.EventList
		if err := c.List(bg, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Name == "acme" && ev.Reason == hub.EventConflict && ev.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return errors.New("no Conflict event")
	})
	if tn, err := getTenant(c, "acme-rc"); err != nil || tn.Spec.DisplayName != "Someone else's" || tn.Labels[keys.Distribution] != "" {
		t.Fatalf("the foreign object was changed: %+v, %v", tn, err)
	}

	// Bad input: a template setting one of regionsync's keys, and a patch that does not apply.
	bad := &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template:  tenantTemplate("team", `,"annotations":{"regionsync.dev/paused":"true"}`),
			Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-a"}},
		},
	}
	badPatch := &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patchy"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template:  tenantTemplate("team", ""),
			Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-a", "r-b"}},
			Overrides: []regionsyncv1alpha1.Override{{Regions: []string{"r-b"}, JSONPatch: []regionsyncv1alpha1.JSONPatchOperation{
				{Op: "replace", Path: "/spec/nowhere/deep", Value: &apiextensionsv1.JSON{Raw: []byte(`1`)}},
			}}},
		},
	}
	create(t, c, bad, badPatch)
	testenv.Eventually(t, "bad input named in conditions; the good region of patchy placed", 20*time.Second, func() error {
		b := getDist(t, c, "bad")
		applied := meta.FindStatusCondition(b.Status.Conditions, regionsyncv1alpha1.DistributionApplied)
		if applied == nil || applied.Reason != regionsyncv1alpha1.ReasonInvalidSpec || !strings.Contains(applied.Message, "spec.template.metadata.annotations[regionsync.dev/paused]") {
			return fmt.Errorf("bad: Applied %+v", applied)
		}
		p := getDist(t, c, "patchy")
		if e := entry(p, "r-b"); e == nil || e.State != regionsyncv1alpha1.PlacementFailed || !strings.Contains(e.Message, "spec.overrides[0].jsonPatch") {
			return fmt.Errorf("patchy r-b %+v", e)
		}
		if _, err := getTenant(c, "patchy-ra"); err != nil {
			return fmt.Errorf("patchy r-a: %w", err)
		}
		if _, err := getTenant(c, "patchy-rb"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("patchy r-b written: %v", err)
		}
		return nil
	})
	if _, err := getTenant(c, "bad-ra"); !apierrors.IsNotFound(err) {
		t.Fatalf("bad-ra: %v, want NotFound", err)
	}

	// r-b stops matching: its object is removed (one of two: within the guard); the agent's
	// finalizer path does the rest (here: the test releases it, as the agent would).
	agentReports("acme-rb", 1)
	rb := &regionsyncv1alpha1.Region{}
	if err := c.Get(bg, types.NamespacedName{Name: "r-b"}, rb); err != nil {
		t.Fatal(err)
	}
	rb.Labels = map[string]string{"tier": "dev"}
	if err := c.Update(bg, rb); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "acme-rb terminating, r-b WaitingForRegion", 20*time.Second, func() error {
		tn, err := getTenant(c, "acme-rb")
		if err != nil {
			return err
		}
		if tn.DeletionTimestamp == nil {
			return errors.New("acme-rb not terminating")
		}
		if e := entry(getDist(t, c, "acme"), "r-b"); e == nil || e.State != regionsyncv1alpha1.PlacementWaitingForRegion {
			return fmt.Errorf("r-b %+v", e)
		}
		return nil
	})
	releaseFinalizer(t, c, "acme-rb")
	testenv.Eventually(t, "acme-rb gone, r-b no longer listed", 20*time.Second, func() error {
		if _, err := getTenant(c, "acme-rb"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("acme-rb: %v", err)
		}
		if e := entry(getDist(t, c, "acme"), "r-b"); e != nil {
			return fmt.Errorf("r-b still listed: %+v", e)
		}
		return nil
	})

	// The shrink guard: "spread" is in r-a, r-b (by name) and three more regions; a selector typo
	// that drops four of five is held until confirmed.
	for _, n := range []string{"r-d", "r-e", "r-f"} {
		create(t, c, region(n, map[string]string{"wave": "1"}, tenantShard("-"+strings.TrimPrefix(n, "r-")+"x", n)))
	}
	spread := &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spread"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template: tenantTemplate("team", ""),
			Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-a", "r-b"},
				RegionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"wave": "1"}}},
		},
	}
	create(t, c, spread)
	testenv.Eventually(t, "spread placed in 5 regions", 20*time.Second, func() error {
		if n := getDist(t, c, "spread").Status.Counts.Placed; n != 5 {
			return fmt.Errorf("placed %d", n)
		}
		return nil
	})
	updateDist(t, c, "spread", func(got *regionsyncv1alpha1.Distribution) {
		got.Spec.Placement.RegionSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"wave": "l"}} // the typo
		got.Spec.Placement.Regions = []string{"r-a"}
	})
	testenv.Eventually(t, "removal of 4 of 5 held", 20*time.Second, func() error {
		got := getDist(t, c, "spread")
		if !meta.IsStatusConditionTrue(got.Status.Conditions, regionsyncv1alpha1.DistributionRemovalHeld) || got.Status.Counts.Removing != 4 {
			return fmt.Errorf("conditions %+v counts %+v", got.Status.Conditions, got.Status.Counts)
		}
		return nil
	})
	testenv.Consistently(t, "held objects stay", 2*time.Second, func() error {
		for _, n := range []string{"spread-rb", "spread-dx", "spread-ex", "spread-fx"} {
			tn, err := getTenant(c, n)
			if err != nil || tn.DeletionTimestamp != nil {
				return fmt.Errorf("%s: %v (deleting %v)", n, err, tn.DeletionTimestamp)
			}
		}
		return nil
	})
	updateDist(t, c, "spread", func(got *regionsyncv1alpha1.Distribution) {
		got.Annotations = map[string]string{keys.ConfirmRemovalsBefore: time.Now().Add(time.Second).UTC().Format(time.RFC3339)}
	})
	testenv.Eventually(t, "confirmed removals go ahead", 20*time.Second, func() error {
		for _, n := range []string{"spread-rb", "spread-dx", "spread-ex", "spread-fx"} {
			if _, err := getTenant(c, n); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: %v", n, err)
			}
		}
		if meta.IsStatusConditionTrue(getDist(t, c, "spread").Status.Conditions, regionsyncv1alpha1.DistributionRemovalHeld) {
			return errors.New("still RemovalHeld")
		}
		return nil
	})

	// Deletion: Orphan keeps spread-ra without the Distribution's label; Delete removes acme's
	// object and keeps the Distribution until the agent released it.
	updateDist(t, c, "spread", func(got *regionsyncv1alpha1.Distribution) {
		got.Spec.DeletionPolicy = regionsyncv1alpha1.DeletionPolicyOrphan
	})
	for _, n := range []string{"spread", "acme"} {
		if err := c.Delete(bg, getDist(t, c, n)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "spread gone, its object orphaned", 20*time.Second, func() error {
		if err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: "spread"}, &regionsyncv1alpha1.Distribution{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("spread: %v", err)
		}
		tn, err := getTenant(c, "spread-ra")
		if err != nil {
			return err
		}
		if tn.DeletionTimestamp != nil || tn.Labels[keys.Distribution] != "" || tn.Labels["regionsync.dev/region"] != "r-a" {
			return fmt.Errorf("spread-ra %v deleting %v", tn.Labels, tn.DeletionTimestamp)
		}
		return nil
	})
	testenv.Eventually(t, "acme waits for its region's agent", 20*time.Second, func() error {
		tn, err := getTenant(c, "acme-ra")
		if err != nil {
			return err
		}
		if tn.DeletionTimestamp == nil {
			return errors.New("acme-ra not terminating")
		}
		if e := entry(getDist(t, c, "acme"), "r-a"); e == nil || e.State != regionsyncv1alpha1.PlacementWaitingForRegion {
			return fmt.Errorf("r-a %+v", e)
		}
		return nil
	})
	releaseFinalizer(t, c, "acme-ra")
	testenv.Eventually(t, "acme and its object gone", 20*time.Second, func() error {
		if _, err := getTenant(c, "acme-ra"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("acme-ra: %v", err)
		}
		if err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: "acme"}, &regionsyncv1alpha1.Distribution{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("acme: %v", err)
		}
		return nil
	})
	if tn, err := getTenant(c, "acme-rc"); err != nil || tn.DeletionTimestamp != nil {
		t.Fatalf("the foreign object: %v, %v", err, tn.DeletionTimestamp)
	}
}

func releaseFinalizer(t *testing.T, c client.Client, name string) {
	t.Helper()
	tn, err := getTenant(c, name)
	if err != nil {
		t.Fatal(err)
	}
	tn.Finalizers = nil
	if err := c.Update(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
}

func controllerutilContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestHubRegionLiveness: a Region whose shard Lease stops being renewed gets Ready=Unknown
// (HeartbeatMissed) after the lease duration plus the grace, on the hub's clock, and not while it
// is renewed; the agent's next report (Ready again) replaces it; spec.shard is immutable.
func TestHubRegionLiveness(t *testing.T) {
	bg := context.Background()
	f := testenv.StartT(t, "management")
	mgmt := f.Cluster("management")
	c := mgmt.Client
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "regionsync-system"}}, region("r-live", nil, tenantShard("-live", "r-live")))

	r := &regionsyncv1alpha1.Region{}
	if err := c.Get(bg, types.NamespacedName{Name: "r-live"}, r); err != nil {
		t.Fatal(err)
	}
	r.Spec.Shard.RemoteResourceSuffix = "-other"
	if err := c.Update(bg, r); err == nil || !strings.Contains(err.Error(), "spec.shard is immutable") {
		t.Fatalf("changing spec.shard: %v, want refused as immutable", err)
	}

	agentReady := func() {
		t.Helper()
		r := &regionsyncv1alpha1.Region{}
		if err := c.Get(bg, types.NamespacedName{Name: "r-live"}, r); err != nil {
			t.Fatal(err)
		}
		meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: regionsyncv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonReady, Message: "in sync"})
		if err := c.Status().Update(bg, r); err != nil {
			t.Fatal(err)
		}
	}
	agentReady()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "regionsync-system", Name: "region-r-live", Labels: map[string]string{"regionsync.dev/shard-lease": "true"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("r-live/agent"), LeaseDurationSeconds: ptr.To[int32](2), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	create(t, c, lease)
	renew := func() {
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		if err := c.Update(bg, lease); err != nil {
			t.Fatal(err)
		}
	}
	startHub(t, mgmt, hub.Options{LivenessGrace: time.Second})
	ready := func() (*metav1.Condition, error) {
		r := &regionsyncv1alpha1.Region{}
		if err := c.Get(bg, types.NamespacedName{Name: "r-live"}, r); err != nil {
			return nil, err
		}
		cond := meta.FindStatusCondition(r.Status.Conditions, regionsyncv1alpha1.ConditionReady)
		if cond == nil {
			return nil, errors.New("no Ready condition")
		}
		return cond, nil
	}
	last := time.Now()
	testenv.Consistently(t, "Ready stays True while the Lease is renewed every second", 6*time.Second, func() error {
		if time.Since(last) > time.Second {
			renew()
			last = time.Now()
		}
		cond, err := ready()
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	stopped := time.Now()
	testenv.Eventually(t, "Ready=Unknown HeartbeatMissed once the Lease is not renewed", 15*time.Second, func() error {
		cond, err := ready()
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionUnknown || cond.Reason != regionsyncv1alpha1.ReasonHeartbeatMissed {
			return fmt.Errorf("Ready %s %s", cond.Status, cond.Reason)
		}
		return nil
	})
	if since := time.Since(stopped); since < 2*time.Second {
		t.Fatalf("Ready=Unknown %s after the last renewal, before the lease duration (2s) + grace (1s)", since)
	}
	testenv.Eventually(t, "regionsync_hub_regions_heartbeat_missed counts r-live", 5*time.Second, func() error {
		if v := testutil.ToFloat64(hub.HeartbeatMissed); v != 1 {
			return fmt.Errorf("regionsync_hub_regions_heartbeat_missed %v", v)
		}
		return nil
	})
	// The agent comes back: it renews and reports Ready; the hub leaves it.
	renew()
	agentReady()
	last = time.Now()
	testenv.Consistently(t, "Ready stays True once the agent is back", 5*time.Second, func() error {
		if time.Since(last) > time.Second {
			renew()
			last = time.Now()
		}
		cond, err := ready()
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s", cond.Status, cond.Reason)
		}
		return nil
	})
	testenv.Eventually(t, "regionsync_hub_regions_heartbeat_missed back to 0", 5*time.Second, func() error {
		if v := testutil.ToFloat64(hub.HeartbeatMissed); v != 0 {
			return fmt.Errorf("regionsync_hub_regions_heartbeat_missed %v", v)
		}
		return nil
	})
}

// appliedFalse waits until Distribution name (of namespace) is Applied=False with a message
// holding every substring.
func appliedFalse(t *testing.T, c client.Client, namespace, name string, substrings ...string) {
	t.Helper()
	testenv.Eventually(t, "Distribution "+namespace+"/"+name+" Applied=False naming "+strings.Join(substrings, ", "), 20*time.Second, func() error {
		d := &regionsyncv1alpha1.Distribution{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, d); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied)
		if cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("Applied %+v", cond)
		}
		for _, s := range substrings {
			if !strings.Contains(cond.Message, s) {
				return fmt.Errorf("Applied=False: %s", cond.Message)
			}
		}
		return nil
	})
}

// TestHubImpersonation: the hub writes a Distribution's per-region objects as the ServiceAccount
// it names (or the configured default), never as itself. A ServiceAccount that may write Tenants
// gets its Tenant placed; one that may not write RoleBindings gets none placed although the hub
// itself may write RoleBindings (Applied=False naming the refusal, nothing written); one that may
// only read Tenants gets none placed; a Distribution naming none with no default places nothing
// (Applied=False naming spec.serviceAccountName); and in a namespace the operator did not bind
// the hub's impersonation in, the hub cannot act as any ServiceAccount.
func TestHubImpersonation(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	const other = "tenant-other"
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}},
		region("r-a", nil, tenantShard("-ra", "r-a")),
		region("r-rb", nil, tenantShard("-rrb", "r-rb", "RoleBinding.rbac.authorization.k8s.io")),
		// The hub may itself read and write RoleBindings (a placed kind's rule, and more): none
		// of that carries over to a Distribution.
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "hub-rolebindings"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "hub-rolebindings"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hub-rolebindings"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "regionsync-system", Name: "regionsync-hub"}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nothing"}},
	)
	tenantWriter(t, c, ns, "placer", writeTenants)
	tenantWriter(t, c, ns, "reader", rbacv1.PolicyRule{APIGroups: []string{"demo.regionsync.dev"}, Resources: []string{"tenants"}, Verbs: []string{"get", "list", "watch"}})
	// In tenant-other a writer exists, but the hub was not bound to impersonate there.
	create(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "placer"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "placer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hub-rolebindings"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: other, Name: "placer"}}})
	applyErrors := testutil.ToFloat64(hub.ApplyErrors.WithLabelValues("apply"))
	placed, failed := testutil.ToFloat64(hub.Regions.WithLabelValues("placed")), testutil.ToFloat64(hub.Regions.WithLabelValues("failed"))
	startHub(t, mgmt, hub.Options{})

	dist := func(namespace, name, sa string, template runtime.RawExtension, region string) *regionsyncv1alpha1.Distribution {
		return &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: regionsyncv1alpha1.DistributionSpec{ServiceAccountName: sa, Template: template,
				Placement: regionsyncv1alpha1.Placement{Regions: []string{region}}},
		}
	}
	roleBinding := runtime.RawExtension{Raw: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",` +
		`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"nothing"},` +
		`"subjects":[{"kind":"ServiceAccount","name":"reader","namespace":"` + ns + `"}]}`)}
	create(t, c,
		dist(ns, "good", "placer", tenantTemplate("team", ""), "r-a"),
		dist(ns, "grant", "placer", roleBinding, "r-rb"),
		dist(ns, "readonly", "reader", tenantTemplate("team", ""), "r-a"),
		dist(ns, "nameless", "", tenantTemplate("team", ""), "r-a"),
		dist(other, "elsewhere", "placer", tenantTemplate("team", ""), "r-a"),
	)

	// The happy path: placed, written by the hub's field manager as the ServiceAccount.
	testenv.Eventually(t, "good placed in r-a", 20*time.Second, func() error {
		tn, err := getTenant(c, "good-ra")
		if err != nil {
			return err
		}
		for _, mf := range tn.ManagedFields {
			if mf.Manager == hub.FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
				return nil
			}
		}
		return fmt.Errorf("no apply by %s: %+v", hub.FieldManager, tn.ManagedFields)
	})
	appliedFalse(t, c, ns, "grant", "forbidden", "ServiceAccount "+ns+"/placer (spec.serviceAccountName)", "rolebindings")
	appliedFalse(t, c, ns, "readonly", "forbidden", "ServiceAccount "+ns+"/reader (spec.serviceAccountName)")
	appliedFalse(t, c, ns, "nameless", "spec.serviceAccountName", "defaultServiceAccountName")
	// The API server names the impersonation it refused as "impersonate ... serviceaccounts" or,
	// with constrained impersonation, "impersonate-on:serviceaccount:<verb>".
	appliedFalse(t, c, other, "elsewhere", "cannot impersonate", "serviceaccount")

	// Nothing of theirs was written, and stays so.
	testenv.Consistently(t, "no refused object written", 3*time.Second, func() error {
		for _, o := range []struct {
			obj      client.Object
			ns, name string
		}{
			{&rbacv1.RoleBinding{}, ns, "grant-rrb"},
			{&demov1alpha1.Tenant{}, ns, "readonly-ra"},
			{&demov1alpha1.Tenant{}, ns, "nameless-ra"},
			{&demov1alpha1.Tenant{}, other, "elsewhere-ra"},
		} {
			if err := c.Get(bg, types.NamespacedName{Namespace: o.ns, Name: o.name}, o.obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s/%s: %v", o.ns, o.name, err)
			}
		}
		return nil
	})
	if d := getDist(t, c, "good"); !meta.IsStatusConditionTrue(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied) {
		t.Errorf("good: the refusals of others stopped it: %+v", d.Status.Conditions)
	}
	// The hub's metrics: the three refused applies counted; one region placed, three failed.
	if d := testutil.ToFloat64(hub.ApplyErrors.WithLabelValues("apply")) - applyErrors; d < 3 {
		t.Errorf("regionsync_hub_apply_errors_total{operation=apply} grew by %v, want at least 3", d)
	}
	if d := testutil.ToFloat64(hub.Regions.WithLabelValues("placed")) - placed; d != 1 {
		t.Errorf("regionsync_hub_distribution_regions{state=placed} grew by %v, want 1", d)
	}
	if d := testutil.ToFloat64(hub.Regions.WithLabelValues("failed")) - failed; d != 3 {
		t.Errorf("regionsync_hub_distribution_regions{state=failed} grew by %v, want 3", d)
	}
}

// TestHubAdmission: the admission policies the management base and the hub's overlay ship, on a
// real API server, with requests made as a tenant user. A Distribution naming a ServiceAccount its
// author may not impersonate is refused with a message naming the field, the user and the
// ServiceAccount; one it may impersonate is admitted; changing spec.serviceAccountName to one it may
// not impersonate is refused, and so is any spec change by a user who may not impersonate the
// named one, while metadata-only updates (the removal confirmation) pass; naming none is refused
// (the shipped hub configuration has no default); an author who may impersonate any
// ServiceAccount is admitted.
func TestHubAdmission(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	var policies []client.Object
	for _, dir := range []string{"../../deploy/kustomize/management", "../../deploy/kustomize/hub"} {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && strings.HasPrefix(o.GetName(), "regionsync-distribution-") {
				policies = append(policies, o)
			}
		}
	}
	if len(policies) != 4 {
		t.Fatalf("want 2 policies with their bindings, got %d objects", len(policies))
	}
	create(t, c, append(policies, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})...)
	editDistributions := rbacv1.PolicyRule{APIGroups: []string{"regionsync.dev"}, Resources: []string{"distributions"}, Verbs: []string{"get", "list", "create", "update", "patch"}}
	create(t, c,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice"}, Rules: []rbacv1.PolicyRule{editDistributions,
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"placer"}}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bob"}, Rules: []rbacv1.PolicyRule{editDistributions}},
	)
	for _, u := range []string{"alice", "bob"} {
		create(t, c, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: u},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: u},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u}}})
	}
	as := func(user string) client.Client {
		cl, err := client.New(mgmt.ImpersonatingConfig(user), client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	alice, bob := as("alice"), as("bob")
	dist := func(name, sa string) *regionsyncv1alpha1.Distribution {
		return &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: regionsyncv1alpha1.DistributionSpec{ServiceAccountName: sa, Template: tenantTemplate("team", ""),
				Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-a"}}},
		}
	}
	refused := func(what string, err error, substrings ...string) {
		t.Helper()
		if err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: want a refusal, got %v", what, err)
			return
		}
		for _, s := range substrings {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: the refusal does not say %q: %v", what, s, err)
			}
		}
	}
	denyMsg := func(user, sa string) string {
		return "spec.serviceAccountName: " + user + " may not impersonate ServiceAccount " + ns + "/" + sa
	}
	// The API server loads each policy and its binding asynchronously, one by one: wait until a dry
	// run is refused by each of them before asserting anything.
	for _, probe := range []struct{ sa, want string }{
		{"powerful", denyMsg("alice", "powerful")}, // regionsync-distribution-author
		{"", "spec.serviceAccountName: required"},  // regionsync-distribution-serviceaccount
	} {
		testenv.Eventually(t, fmt.Sprintf("a policy refuses alice naming ServiceAccount %q", probe.sa), 30*time.Second, func() error {
			err := alice.Create(bg, dist("probe", probe.sa), client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), probe.want) {
				return fmt.Errorf("answered %v", err)
			}
			return nil
		})
	}
	refused("alice names powerful", alice.Create(bg, dist("acme", "powerful")), denyMsg("alice", "powerful"), "regionsync-distribution-author")
	refused("alice names none", alice.Create(bg, dist("acme", "")), "spec.serviceAccountName: required")
	d := dist("acme", "placer")
	if err := alice.Create(bg, d); err != nil {
		t.Fatalf("alice names placer, which she may impersonate: %v", err)
	}
	changed := d.DeepCopy()
	changed.Spec.ServiceAccountName = "powerful"
	refused("alice changes serviceAccountName to powerful", alice.Update(bg, changed), denyMsg("alice", "powerful"))
	changed = d.DeepCopy()
	changed.Spec.Template = tenantTemplate("enterprise", "")
	if err := alice.Update(bg, changed); err != nil {
		t.Errorf("alice changes the template, placer kept: %v", err)
	}
	refused("bob changes the template of placer's Distribution", bob.Patch(bg, changed.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"spec":{"plan":"free"}}}}`))), denyMsg("bob", "placer"))
	if err := bob.Patch(bg, changed.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+keys.ConfirmRemovalsBefore+`":"2030-01-01T00:00:00Z"}}}`))); err != nil {
		t.Errorf("bob annotates (metadata only): %v", err)
	}
	if err := c.Create(bg, dist("by-admin", "powerful")); err != nil {
		t.Errorf("an author who may impersonate every ServiceAccount names powerful: %v", err)
	}
	if got := getDist(t, c, "acme"); got.Spec.ServiceAccountName != "placer" {
		t.Errorf("serviceAccountName %q after refused changes", got.Spec.ServiceAccountName)
	}
}
