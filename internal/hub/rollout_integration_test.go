//go:build integration

package hub_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/prometheus/client_golang/prometheus/testutil"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// A kind whose status the test controls as a regional controller would report it (kstatus
// conditions: Stalled for a spec it cannot serve).
var widgetGVK = schema.GroupVersionKind{Group: "rollout.regionsync.dev", Version: "v1", Kind: "Widget"}

const (
	widgetKind = "Widget.rollout.regionsync.dev"
	shopNS     = "tenant-shop"
)

func widgetCRD() *unstructured.Unstructured {
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.rollout.regionsync.dev"},
		"spec": map[string]any{
			"group": "rollout.regionsync.dev", "scope": "Namespaced",
			"names": map[string]any{"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": open, "status": open,
				}}},
			}},
		},
	}}
}

func widgetTemplate(plan string) runtime.RawExtension {
	return runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"apiVersion":"rollout.regionsync.dev/v1","kind":"Widget","spec":{"plan":%q}}`, plan))}
}

// fakeAgents play every region's agent and regional controller for the Widgets: each synced
// region copies the per-region object's generation down and uploads a status (Stalled for the
// plan "unknown"), as internal/syncer and a kstatus-conformant operator would. A held region
// does nothing (its copy never becomes current).
type fakeAgents struct {
	c    client.Client
	mu   sync.Mutex
	held map[string]bool
	// seen records every plan each region's object was seen with.
	seen map[string]map[string]bool
}

// sawPlan reports whether any region but the ones given was ever seen with the plan.
func (a *fakeAgents) sawPlan(plan string, except ...string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for region, plans := range a.seen {
		if plans[plan] && !slices.Contains(except, region) {
			out = append(out, region)
		}
	}
	return out
}

func (a *fakeAgents) hold(region string, held bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held[region] = held
}

func (a *fakeAgents) run(ctx context.Context) {
	for ctx.Err() == nil {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(widgetGVK.GroupVersion().WithKind("WidgetList"))
		if err := a.c.List(ctx, &list, client.InNamespace(shopNS)); err == nil {
			for i := range list.Items {
				a.sync(ctx, &list.Items[i])
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *fakeAgents) sync(ctx context.Context, w *unstructured.Unstructured) {
	region := w.GetLabels()["regionsync.dev/region"]
	seenPlan, _, _ := unstructured.NestedString(w.Object, "spec", "plan")
	a.mu.Lock()
	held := a.held[region]
	if a.seen[region] == nil {
		a.seen[region] = map[string]bool{}
	}
	a.seen[region][seenPlan] = true
	a.mu.Unlock()
	gen := strconv.FormatInt(w.GetGeneration(), 10)
	if held || w.GetAnnotations()[keys.RemoteGeneration] == gen {
		return
	}
	plan, _, _ := unstructured.NestedString(w.Object, "spec", "plan")
	conditions := []any{}
	if plan == "unknown" {
		conditions = append(conditions, map[string]any{"type": "Stalled", "status": "True", "reason": "UnknownPlan", "message": "no such plan"})
	}
	status := map[string]any{"observedGeneration": w.GetGeneration(), "conditions": conditions}
	if err := unstructured.SetNestedField(w.Object, status, "status"); err != nil {
		return
	}
	if err := a.c.Status().Update(ctx, w); err != nil {
		return
	}
	ann := w.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[keys.RemoteGeneration], ann[keys.LocalGeneration] = gen, gen
	w.SetAnnotations(ann)
	_ = a.c.Update(ctx, w)
}

func regionReady(t *testing.T, c client.Client, name string, status metav1.ConditionStatus) {
	t.Helper()
	r := &regionsyncv1alpha1.Region{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, r); err != nil {
		t.Fatal(err)
	}
	reason := regionsyncv1alpha1.ReasonReady
	if status == metav1.ConditionUnknown {
		reason = regionsyncv1alpha1.ReasonHeartbeatMissed
	}
	meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: regionsyncv1alpha1.ConditionReady, Status: status, Reason: reason, Message: "set by the test"})
	if err := c.Status().Update(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// plans reads each region's Widget plan and revision ("-" when it has none).
func plans(c client.Client, regions ...string) (map[string]string, map[string]string) {
	p, rev := map[string]string{}, map[string]string{}
	for _, r := range regions {
		w := &unstructured.Unstructured{}
		w.SetGroupVersionKind(widgetGVK)
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: shopNS, Name: "shop-" + r}, w); err != nil {
			p[r], rev[r] = "-", "-"
			continue
		}
		p[r], _, _ = unstructured.NestedString(w.Object, "spec", "plan")
		rev[r] = w.GetAnnotations()[keys.Revision]
	}
	return p, rev
}

func wantPlans(c client.Client, want map[string]string) error {
	regions := make([]string, 0, len(want))
	for r := range want {
		regions = append(regions, r)
	}
	got, _ := plans(c, regions...)
	for r, p := range want {
		if got[r] != p {
			return fmt.Errorf("plans %v, want %v", got, want)
		}
	}
	return nil
}

func getShop(t *testing.T, c client.Client) *regionsyncv1alpha1.Distribution {
	t.Helper()
	d := &regionsyncv1alpha1.Distribution{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: shopNS, Name: "shop"}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

func rolloutOf(t *testing.T, c client.Client) *regionsyncv1alpha1.RolloutStatus {
	t.Helper()
	d := getShop(t, c)
	if d.Status.Rollout == nil {
		return &regionsyncv1alpha1.RolloutStatus{}
	}
	return d.Status.Rollout
}

func setSpec(t *testing.T, c client.Client, mutate func(*regionsyncv1alpha1.Distribution)) {
	t.Helper()
	testenv.Eventually(t, "updating Distribution shop", 10*time.Second, func() error {
		d := getShop(t, c)
		mutate(d)
		return c.Update(context.Background(), d)
	})
}

func hasEvent(c client.Client, reason, substring string) error {
	var evs eventsv1.EventList
	if err := c.List(context.Background(), &evs, client.InNamespace(shopNS)); err != nil {
		return err
	}
	for _, ev := range evs.Items {
		if ev.Regarding.Name == "shop" && ev.Reason == reason && strings.Contains(ev.Note, substring) {
			return nil
		}
	}
	return fmt.Errorf("no %s event with %q", reason, substring)
}

// TestHubRollout: five regions in three waves (one by name, two by selector, the rest). The first
// rollout and a good change go wave by wave, each only once the previous one is healthy; a bad
// template (its regional controller reports Stalled) reaches only the first wave, halts and is
// rolled back, and is never applied again by itself until retried; a region joining mid-rollout
// gets the stable revision; spec.paused holds a rollout; a new hub process continues a rollout
// where the last one left it, from what is written; a region down when its wave starts halts the
// rollout. Revisions are ControllerRevisions; each started wave is a span whose trace context the
// per-region objects carry.
// widgetFleet starts a management cluster with the Widget CRD, the hub's and the placer's rights
// on it in shopNS, and one live Region per name (labelled tier=tiers[name], "prod" by default).
func widgetFleet(t *testing.T, tiers map[string]string, regions ...string) *testenv.Cluster {
	t.Helper()
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	if err := c.Create(bg, widgetCRD()); err != nil {
		t.Fatal(err)
	}
	widgetRules := rbacv1.PolicyRule{APIGroups: []string{"rollout.regionsync.dev"}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}
	testenv.Eventually(t, "the Widget CRD served", 20*time.Second, func() error {
		var l unstructured.UnstructuredList
		l.SetGroupVersionKind(widgetGVK.GroupVersion().WithKind("WidgetList"))
		return c.List(bg, &l)
	})
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shopNS}},
		// The operator lets the hub read the placed kind (deploy/kustomize/hub: a read rule per placed kind).
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "hub-widgets"}, Rules: []rbacv1.PolicyRule{{APIGroups: widgetRules.APIGroups, Resources: widgetRules.Resources, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "hub-widgets"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hub-widgets"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "regionsync-system", Name: "regionsync-hub"}}})
	for _, r := range regions {
		addWidgetRegion(t, c, r, cmp.Or(tiers[r], "prod"))
	}
	tenantWriter(t, c, shopNS, "placer", widgetRules)
	installHubRBAC(t, mgmt)
	return mgmt
}

// addWidgetRegion registers a live Region syncing Widgets.
func addWidgetRegion(t *testing.T, c client.Client, name, tier string) {
	t.Helper()
	create(t, c, region(name, map[string]string{"tier": tier}, &regionsyncv1alpha1.RegionShard{
		NamespacePrefix: "tenant-", RemoteResourceSuffix: "-" + name, LabelSelector: "regionsync.dev/region=" + name, Kinds: []string{widgetKind},
	}))
	regionReady(t, c, name, metav1.ConditionTrue)
}

// startAgents runs the fake agents until the test ends.
func startAgents(t *testing.T, c client.Client) *fakeAgents {
	agents := &fakeAgents{c: c, held: map[string]bool{}, seen: map[string]map[string]bool{}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		agents.run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return agents
}

func TestHubRollout(t *testing.T) {
	bg := context.Background()
	all := []string{"r1", "r2", "r3", "r4", "r5"}
	mgmt := widgetFleet(t, map[string]string{"r2": "early", "r3": "early"}, all...)
	c := mgmt.Client
	// The CRD refuses a strategy that says two things, and defaults the rest.
	for _, bad := range []struct {
		s   regionsyncv1alpha1.RolloutStrategy
		msg string
	}{
		{regionsyncv1alpha1.RolloutStrategy{Type: regionsyncv1alpha1.RolloutProgressive, Waves: []regionsyncv1alpha1.RolloutWave{{Regions: []string{"r1"}}}, MaxConcurrency: ptrInt(intstr.FromInt32(1))}, "set at most one of waves and maxConcurrency"},
		{regionsyncv1alpha1.RolloutStrategy{Waves: []regionsyncv1alpha1.RolloutWave{{Regions: []string{"r1"}}}}, "waves and maxConcurrency need type Progressive"},
		{regionsyncv1alpha1.RolloutStrategy{Type: "Sometimes"}, "spec.strategy.type"},
		{regionsyncv1alpha1.RolloutStrategy{Type: regionsyncv1alpha1.RolloutProgressive, OnFailure: "Panic"}, "spec.strategy.onFailure"},
	} {
		d := &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: shopNS, Name: "refused"},
			Spec:       regionsyncv1alpha1.DistributionSpec{Template: widgetTemplate("v1"), Strategy: bad.s},
		}
		if err := c.Create(bg, d); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Fatalf("creating a Distribution with strategy %+v: %v, want refused naming %q", bad.s, err, bad.msg)
		}
	}
	agents := startAgents(t, c)

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	// A long liveness grace: the test sets each Region's Ready itself (no shard Leases here).
	opts := hub.Options{DefaultServiceAccountName: "placer", LivenessGrace: time.Hour, TracerProvider: tp}
	wavesStarted, rollbacks := testutil.ToFloat64(hub.RolloutWaves.WithLabelValues("started")), testutil.ToFloat64(hub.RolloutHalts.WithLabelValues("Rollback"))
	stopHub := runHub(t, mgmt, opts)
	t.Cleanup(func() { stopHub() })

	// Waves: r1 by name; the early tier (r2, r3); the rest (r4, r5). Soak 2s.
	agents.hold("r1", true)
	create(t, c, &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: shopNS, Name: "shop"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template:  widgetTemplate("v1"),
			Placement: regionsyncv1alpha1.Placement{RegionSelector: &metav1.LabelSelector{}},
			Strategy: regionsyncv1alpha1.RolloutStrategy{
				Type: regionsyncv1alpha1.RolloutProgressive,
				Waves: []regionsyncv1alpha1.RolloutWave{
					{Name: "first", Regions: []string{"r1"}},
					{Name: "early", RegionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "early"}}},
				},
				Soak:      &metav1.Duration{Duration: 2 * time.Second},
				OnFailure: regionsyncv1alpha1.FailureRollback,
			},
		},
	})

	if s := getShop(t, c).Spec.Strategy; s.ProgressDeadline == nil || s.ProgressDeadline.Duration != 10*time.Minute || s.MaxFailures == nil || s.MaxFailures.IntValue() != 0 || s.Soak.Duration != 2*time.Second {
		t.Fatalf("strategy defaults: %+v", s)
	}

	// The first rollout: r1 only while r1 is not healthy.
	testenv.Eventually(t, "wave 1 of the first rollout written to r1 only", 20*time.Second, func() error {
		if err := wantPlans(c, map[string]string{"r1": "v1", "r2": "-", "r4": "-"}); err != nil {
			return err
		}
		st := rolloutOf(t, c)
		if st.Wave != 1 || st.Waves != 3 || st.WaveName != "first" {
			return fmt.Errorf("rollout %+v", st)
		}
		e := entry(getShop(t, c), "r2")
		if e == nil || e.State != regionsyncv1alpha1.PlacementPending {
			return fmt.Errorf("r2 %+v", e)
		}
		return nil
	})
	testenv.Consistently(t, "no later wave while r1 is not healthy", 3*time.Second, func() error {
		return wantPlans(c, map[string]string{"r1": "v1", "r2": "-", "r3": "-", "r4": "-", "r5": "-"})
	})
	agents.hold("r1", false)
	var rev1 string
	testenv.Eventually(t, "the first rollout complete", 60*time.Second, func() error {
		if err := wantPlans(c, map[string]string{"r1": "v1", "r2": "v1", "r3": "v1", "r4": "v1", "r5": "v1"}); err != nil {
			return err
		}
		d := getShop(t, c)
		st := d.Status.Rollout
		cond := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionProgressing)
		if st == nil || st.CurrentRevision == "" || st.CurrentRevision != st.UpdateRevision || cond == nil || cond.Reason != regionsyncv1alpha1.ReasonRolloutComplete || st.Healthy != 5 {
			return fmt.Errorf("rollout %+v, Progressing %+v", st, cond)
		}
		rev1 = st.CurrentRevision
		return nil
	})
	for _, reason := range []string{hub.EventWaveStarted, hub.EventWaveCompleted} {
		for _, w := range []string{"wave 1/3 (first)", "wave 2/3 (early)", "wave 3/3 (rest)"} {
			if err := hasEvent(c, reason, w); err != nil {
				t.Error(err)
			}
		}
	}
	_, revs := plans(c, all...)
	for r, rev := range revs {
		if rev != rev1 {
			t.Errorf("%s carries revision %q, want %q", r, rev, rev1)
		}
	}
	// Revisions are ControllerRevisions owned by the Distribution.
	cr := &appsv1.ControllerRevision{}
	if err := c.Get(bg, types.NamespacedName{Namespace: shopNS, Name: rev1}, cr); err != nil || len(cr.OwnerReferences) != 1 || cr.OwnerReferences[0].Name != "shop" || !strings.Contains(string(cr.Data.Raw), `"plan":"v1"`) {
		t.Fatalf("ControllerRevision %s: %+v, %v", rev1, cr, err)
	}
	// Each started wave is a span; the objects it wrote carry its trace context.
	var waveSpans []string
	for _, s := range spans.Ended() {
		if s.Name() == "Distribution.RolloutWave" {
			waveSpans = append(waveSpans, s.SpanContext().TraceID().String())
		}
	}
	if len(waveSpans) < 3 {
		t.Errorf("%d wave spans, want one per wave (3)", len(waveSpans))
	}
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	if err := c.Get(bg, types.NamespacedName{Namespace: shopNS, Name: "shop-r4"}, w); err != nil {
		t.Fatal(err)
	}
	if tpv := w.GetAnnotations()[keys.TraceParent]; len(strings.Split(tpv, "-")) != 4 || !slices.Contains(waveSpans, strings.Split(tpv, "-")[1]) {
		t.Errorf("shop-r4 traceparent %q, not of a wave span %v", tpv, waveSpans)
	}

	// A good change, held in wave 2 (r2 not healthy): the rest keep v1; a region joining now
	// (r6, of the rest) gets the stable revision.
	agents.hold("r2", true)
	setSpec(t, c, func(d *regionsyncv1alpha1.Distribution) { d.Spec.Template = widgetTemplate("v2") })
	testenv.Eventually(t, "v2 in waves 1 and 2, held there", 30*time.Second, func() error {
		if err := wantPlans(c, map[string]string{"r1": "v2", "r2": "v2", "r3": "v2", "r4": "v1", "r5": "v1"}); err != nil {
			return err
		}
		if st := rolloutOf(t, c); st.Wave != 2 || st.CurrentRevision != rev1 {
			return fmt.Errorf("rollout %+v", st)
		}
		return nil
	})
	addWidgetRegion(t, c, "r6", "prod")
	testenv.Eventually(t, "r6 joins on the stable revision", 20*time.Second, func() error {
		return wantPlans(c, map[string]string{"r6": "v1"})
	})

	// The hub fails over mid-rollout: a new hub process continues wave 2 from what is written.
	stopHub()
	testenv.Consistently(t, "nothing moves without a hub", 2*time.Second, func() error {
		return wantPlans(c, map[string]string{"r2": "v2", "r4": "v1", "r5": "v1", "r6": "v1"})
	})
	stopHub = runHub(t, mgmt, opts)
	testenv.Consistently(t, "the new hub holds wave 2 while r2 is not healthy", 4*time.Second, func() error {
		if err := wantPlans(c, map[string]string{"r1": "v2", "r2": "v2", "r3": "v2", "r4": "v1", "r5": "v1", "r6": "v1"}); err != nil {
			return err
		}
		if st := rolloutOf(t, c); st.Wave != 2 {
			return fmt.Errorf("rollout %+v", st)
		}
		return nil
	})
	agents.hold("r2", false)
	var rev2 string
	testenv.Eventually(t, "the v2 rollout complete, r6 included", 60*time.Second, func() error {
		if err := wantPlans(c, map[string]string{"r1": "v2", "r2": "v2", "r3": "v2", "r4": "v2", "r5": "v2", "r6": "v2"}); err != nil {
			return err
		}
		st := rolloutOf(t, c)
		if st.CurrentRevision == rev1 || st.CurrentRevision != st.UpdateRevision {
			return fmt.Errorf("rollout %+v", st)
		}
		rev2 = st.CurrentRevision
		return nil
	})

	// A bad template: the regional controller reports it Stalled in the first wave; the rollout
	// halts and rolls back, and the other regions never see it.
	setSpec(t, c, func(d *regionsyncv1alpha1.Distribution) { d.Spec.Template = widgetTemplate("unknown") })
	var halt *regionsyncv1alpha1.RolloutHalt
	testenv.Eventually(t, "halted and rolled back", 30*time.Second, func() error {
		d := getShop(t, c)
		cond := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionHalted)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != regionsyncv1alpha1.ReasonRolledBack || !strings.Contains(cond.Message, "r1") || !strings.Contains(cond.Message, keys.RetryRollout) {
			return fmt.Errorf("Halted %+v", cond)
		}
		st := d.Status.Rollout
		if st == nil || st.Halt == nil || !st.Halt.RolledBack || st.Halt.Reason != regionsyncv1alpha1.ReasonUnhealthy || !slices.Equal(st.Halt.Regions, []string{"r1"}) || st.CurrentRevision != rev2 {
			return fmt.Errorf("rollout %+v", st)
		}
		halt = st.Halt
		return wantPlans(c, map[string]string{"r1": "v2", "r2": "v2", "r3": "v2", "r4": "v2", "r5": "v2", "r6": "v2"})
	})
	for _, reason := range []string{hub.EventRolloutHalted, hub.EventRolledBack} {
		if err := hasEvent(c, reason, ""); err != nil {
			t.Error(err)
		}
	}
	if d := testutil.ToFloat64(hub.RolloutHalts.WithLabelValues("Rollback")) - rollbacks; d != 1 {
		t.Errorf("regionsync_hub_rollout_halts_total{action=Rollback} grew by %v, want 1", d)
	}
	if d := testutil.ToFloat64(hub.RolloutWaves.WithLabelValues("started")) - wavesStarted; d < 6 {
		t.Errorf("regionsync_hub_rollout_waves_total{phase=started} grew by %v, want at least 6 (3 waves, twice)", d)
	}
	if others := agents.sawPlan("unknown", "r1"); len(others) > 0 {
		t.Errorf("the bad template reached %v beyond the first wave", others)
	}
	testenv.Consistently(t, "the rolled back revision is never applied again by itself", 3*time.Second, func() error {
		_, revs := plans(c, "r1")
		if revs["r1"] != rev2 {
			return fmt.Errorf("r1 on %s", revs["r1"])
		}
		return wantPlans(c, map[string]string{"r1": "v2", "r2": "v2"})
	})
	// A retry (a time after the halt) starts it again at the first wave: it halts again.
	setSpec(t, c, func(d *regionsyncv1alpha1.Distribution) {
		d.Annotations = map[string]string{keys.RetryRollout: halt.Since.Add(time.Second).UTC().Format(time.RFC3339)}
	})
	testenv.Eventually(t, "the retried rollout halts again, later", 60*time.Second, func() error {
		st := rolloutOf(t, c)
		if st.Halt == nil || !st.Halt.Since.After(halt.Since.Time) {
			return fmt.Errorf("rollout %+v", st)
		}
		return hasEvent(c, hub.EventRolloutRetried, "")
	})

	// Paused: a new revision does not start.
	setSpec(t, c, func(d *regionsyncv1alpha1.Distribution) {
		d.Spec.Paused = true
		d.Spec.Template = widgetTemplate("v3")
	})
	testenv.Eventually(t, "Progressing=False Paused", 20*time.Second, func() error {
		cond := meta.FindStatusCondition(getShop(t, c).Status.Conditions, regionsyncv1alpha1.DistributionProgressing)
		if cond == nil || cond.Reason != regionsyncv1alpha1.ReasonPaused {
			return fmt.Errorf("Progressing %+v", cond)
		}
		return nil
	})
	testenv.Consistently(t, "paused: nothing gets v3", 3*time.Second, func() error {
		return wantPlans(c, map[string]string{"r1": "v2", "r2": "v2", "r4": "v2"})
	})
	// Unpaused with r4 (of the last wave) down: waves 1 and 2 go, the rollout halts when wave 3
	// starts and gives every updated region v2 back.
	regionReady(t, c, "r4", metav1.ConditionUnknown)
	setSpec(t, c, func(d *regionsyncv1alpha1.Distribution) { d.Spec.Paused = false })
	testenv.Eventually(t, "halted on r4 down, waves 1 and 2 rolled back", 60*time.Second, func() error {
		st := rolloutOf(t, c)
		if st.Halt == nil || st.Halt.Reason != regionsyncv1alpha1.ReasonRegionDown || !slices.Contains(st.Halt.Regions, "r4") || st.Wave != 3 {
			return fmt.Errorf("rollout %+v", st)
		}
		return wantPlans(c, map[string]string{"r1": "v2", "r2": "v2", "r3": "v2", "r4": "v2", "r5": "v2", "r6": "v2"})
	})
	// r4 is back; with more tolerance (maxFailures) a new revision goes everywhere.
	regionReady(t, c, "r4", metav1.ConditionTrue)
	setSpec(t, c, func(d *regionsyncv1alpha1.Distribution) {
		d.Spec.Template = widgetTemplate("v4")
		d.Spec.Strategy.MaxFailures = ptrInt(intstr.FromString("20%"))
	})
	testenv.Eventually(t, "v4 everywhere", 60*time.Second, func() error {
		if err := wantPlans(c, map[string]string{"r1": "v4", "r2": "v4", "r3": "v4", "r4": "v4", "r5": "v4", "r6": "v4"}); err != nil {
			return err
		}
		st := rolloutOf(t, c)
		if st.CurrentRevision != st.UpdateRevision || st.Halt != nil {
			return fmt.Errorf("rollout %+v", st)
		}
		return nil
	})
	var crs appsv1.ControllerRevisionList
	if err := c.List(bg, &crs, client.InNamespace(shopNS), client.MatchingLabels{keys.Distribution: "shop"}); err != nil {
		t.Fatal(err)
	}
	if len(crs.Items) != 5 { // v1, v2, unknown, v3, v4
		names := make([]string, 0, len(crs.Items))
		for _, cr := range crs.Items {
			names = append(names, cr.Name)
		}
		t.Errorf("ControllerRevisions %v, want 5", names)
	}
	if err := errors.Join(hasEvent(c, hub.EventRolloutComplete, "")); err != nil {
		t.Error(err)
	}
}

func ptrInt(v intstr.IntOrString) *intstr.IntOrString { return &v }

// TestHubRolloutHaltOnDeadline: waves of maxConcurrency 50 %; a region that does not become
// healthy within the progress deadline halts the rollout (onFailure Halt: the updated regions keep
// the update, the next wave is never written); a retry continues from there once it is healthy.
func TestHubRolloutHaltOnDeadline(t *testing.T) {
	all := []string{"r1", "r2", "r3", "r4"}
	mgmt := widgetFleet(t, nil, all...)
	c := mgmt.Client
	agents := startAgents(t, c)
	t.Cleanup(runHub(t, mgmt, hub.Options{DefaultServiceAccountName: "placer", LivenessGrace: time.Hour}))
	halts := testutil.ToFloat64(hub.RolloutHalts.WithLabelValues("Halt"))
	create(t, c, &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: shopNS, Name: "shop"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template:  widgetTemplate("v1"),
			Placement: regionsyncv1alpha1.Placement{RegionSelector: &metav1.LabelSelector{}},
			Strategy: regionsyncv1alpha1.RolloutStrategy{
				Type: regionsyncv1alpha1.RolloutProgressive, MaxConcurrency: ptrInt(intstr.FromString("50%")),
				Soak: &metav1.Duration{Duration: time.Second}, ProgressDeadline: &metav1.Duration{Duration: 3 * time.Second},
			},
		},
	})
	testenv.Eventually(t, "v1 everywhere, in 2 waves", 60*time.Second, func() error {
		if err := wantPlans(c, map[string]string{"r1": "v1", "r2": "v1", "r3": "v1", "r4": "v1"}); err != nil {
			return err
		}
		if st := rolloutOf(t, c); st.CurrentRevision == "" || st.CurrentRevision != st.UpdateRevision || st.Waves != 2 {
			return fmt.Errorf("rollout %+v", st)
		}
		return nil
	})
	// r2 (wave 1: r1, r2) never becomes healthy on v2: after the deadline the rollout halts.
	agents.hold("r2", true)
	setSpec(t, c, func(d *regionsyncv1alpha1.Distribution) { d.Spec.Template = widgetTemplate("v2") })
	var halt *regionsyncv1alpha1.RolloutHalt
	testenv.Eventually(t, "halted on the progress deadline, wave 1 keeping v2", 60*time.Second, func() error {
		d := getShop(t, c)
		st := d.Status.Rollout
		cond := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionHalted)
		if st == nil || st.Halt == nil || st.Halt.Reason != regionsyncv1alpha1.ReasonProgressDeadlineExceeded || !slices.Equal(st.Halt.Regions, []string{"r2"}) || st.Halt.RolledBack ||
			cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != regionsyncv1alpha1.ReasonRolloutHalted {
			return fmt.Errorf("rollout %+v, Halted %+v", st, cond)
		}
		halt = st.Halt
		return wantPlans(c, map[string]string{"r1": "v2", "r2": "v2", "r3": "v1", "r4": "v1"})
	})
	if d := testutil.ToFloat64(hub.RolloutHalts.WithLabelValues("Halt")) - halts; d != 1 {
		t.Errorf("regionsync_hub_rollout_halts_total{action=Halt} grew by %v, want 1", d)
	}
	agents.hold("r2", false)
	testenv.Consistently(t, "halted: wave 2 never written, although r2 is healthy now", 3*time.Second, func() error {
		return wantPlans(c, map[string]string{"r1": "v2", "r2": "v2", "r3": "v1", "r4": "v1"})
	})
	// A retry continues: wave 1 is healthy, so wave 2 follows after the soak.
	setSpec(t, c, func(d *regionsyncv1alpha1.Distribution) {
		d.Annotations = map[string]string{keys.RetryRollout: halt.Since.Add(time.Second).UTC().Format(time.RFC3339)}
	})
	testenv.Eventually(t, "v2 everywhere after the retry", 60*time.Second, func() error {
		if err := wantPlans(c, map[string]string{"r1": "v2", "r2": "v2", "r3": "v2", "r4": "v2"}); err != nil {
			return err
		}
		if st := rolloutOf(t, c); st.CurrentRevision != st.UpdateRevision || st.Halt != nil {
			return fmt.Errorf("rollout %+v", st)
		}
		return nil
	})
}
