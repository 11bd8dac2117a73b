//go:build integration

package hub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/inspect"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestExplainDistribution: `kubectl regionsync explain distribution/<name>` (inspect's
// ExplainDistribution over what ReadDistributionInput reads) gives each region's verdict as the
// hub placed it, with a real hub and fake agents: Placed; NotCurrent (its agent holds the copy);
// Failed (an override that does not apply); Unplaceable (the kind not synced); Conflict (a
// foreign object at the per-region name); NotSelected, naming the selector and the Region's
// labels; WaitingForWave (a canary that never gets healthy); Halted on the revision and the
// regions the halt did not reach; RemovalHeld by the shrink guard.
func TestExplainDistribution(t *testing.T) {
	bg := context.Background()
	mgmt := widgetFleet(t, map[string]string{"r4": "dev"}, "r1", "r2", "r3", "r4", "r5")
	c := mgmt.Client
	create(t, c, region("r-cm", map[string]string{"tier": "prod"}, &regionsyncv1alpha1.RegionShard{
		NamespacePrefix: "tenant-", RemoteResourceSuffix: "-r-cm", LabelSelector: "regionsync.dev/region=r-cm", Kinds: []string{"ConfigMap"}}))
	foreign := &unstructured.Unstructured{}
	foreign.SetGroupVersionKind(widgetGVK)
	foreign.SetNamespace(shopNS)
	foreign.SetName("shop-r5")
	create(t, c, foreign)
	agents := startAgents(t, c)
	agents.hold("r2", true)
	t.Cleanup(runHub(t, mgmt, hub.Options{DefaultServiceAccountName: "placer", LivenessGrace: time.Hour, ShrinkWindow: time.Hour}))

	kube, err := kubernetes.NewForConfig(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	clients := &inspect.Clients{Kube: kube, Dynamic: dyn, Mapper: c.RESTMapper()}
	explain := func(name string) (*inspect.DistributionExplanation, map[string]inspect.RegionVerdict) {
		t.Helper()
		in, err := inspect.ReadDistributionInput(bg, clients, keys, shopNS, name, "")
		if err != nil {
			t.Fatal(err)
		}
		e := inspect.ExplainDistribution(in)
		by := map[string]inspect.RegionVerdict{}
		for _, v := range e.Regions {
			by[v.Region] = v
		}
		return e, by
	}
	// verdicts waits until every region named has its verdict, the text holding each substring.
	verdicts := func(name string, want map[string][]string) {
		t.Helper()
		testenv.Eventually(t, name+"'s verdicts", 60*time.Second, func() error {
			e, by := explain(name)
			for region, w := range want {
				v, ok := by[region]
				if !ok {
					return fmt.Errorf("no verdict for %s: %+v", region, e.Regions)
				}
				if v.Verdict != w[0] {
					return fmt.Errorf("%s: %s (%s), want %s", region, v.Verdict, v.Text, w[0])
				}
				for _, s := range w[1:] {
					if !strings.Contains(v.Text, s) {
						return fmt.Errorf("%s: %s %q lacks %q", region, v.Verdict, v.Text, s)
					}
				}
			}
			if len(e.Regions) != len(want) {
				return fmt.Errorf("verdicts for %d regions, want %d: %+v", len(e.Regions), len(want), e.Regions)
			}
			return nil
		})
	}
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}
	create(t, c, &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: shopNS, Name: "shop"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template: widgetTemplate("v1"), Placement: regionsyncv1alpha1.Placement{RegionSelector: prod},
			Overrides: []regionsyncv1alpha1.Override{{Regions: []string{"r3"}, JSONPatch: []regionsyncv1alpha1.JSONPatchOperation{{Op: "remove", Path: "/spec/missing"}}}},
		},
	})
	verdicts("shop", map[string][]string{
		"r1":   {inspect.DistVerdictPlaced, "shop-r1 is current and healthy"},
		"r2":   {inspect.DistVerdictNotCurrent, "has not copied it yet"},
		"r3":   {inspect.DistVerdictFailed, "spec.overrides[0]"},
		"r5":   {inspect.DistVerdictConflict, "shop-r5"},
		"r-cm": {inspect.DistVerdictUnplaceable, regionsyncv1alpha1.ReasonKindNotSynced},
	})
	in, err := inspect.ReadDistributionInput(bg, clients, keys, shopNS, "shop", "r4")
	if err != nil {
		t.Fatal(err)
	}
	if v := inspect.ExplainDistribution(in).Regions; len(v) != 1 || v[0].Verdict != inspect.DistVerdictNotSelected ||
		!strings.Contains(v[0].Text, "tier=dev") || !strings.Contains(v[0].Text, `spec.placement.regionSelector "tier=prod"`) {
		t.Errorf("--region r4: %+v, want NotSelected naming its labels and the selector", v)
	}
	if e, _ := explain("shop"); e.NotSelected != 1 {
		t.Errorf("regions not selected: %d, want 1 (r4)", e.NotSelected)
	}

	// A canary (r2) that never gets healthy: the other region waits for its wave; with a short
	// progress deadline the rollout halts on it, and the halt names the region it did not reach.
	progressive := func(name string, deadline time.Duration) *regionsyncv1alpha1.Distribution {
		return &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: shopNS, Name: name},
			Spec: regionsyncv1alpha1.DistributionSpec{
				Template: widgetTemplate("v1"), Placement: regionsyncv1alpha1.Placement{Regions: []string{"r1", "r2"}},
				Strategy: regionsyncv1alpha1.RolloutStrategy{Type: regionsyncv1alpha1.RolloutProgressive,
					Waves:            []regionsyncv1alpha1.RolloutWave{{Name: "canary", Regions: []string{"r2"}}},
					ProgressDeadline: &metav1.Duration{Duration: deadline}},
			},
		}
	}
	create(t, c, progressive("roll", 10*time.Minute), progressive("halt", 2*time.Second))
	verdicts("roll", map[string][]string{
		"r1": {inspect.DistVerdictWaitingForWave, "waits for its wave (2 of 2, rest)", "the rollout is in wave 1 (canary)"},
		"r2": {inspect.DistVerdictNotCurrent},
	})
	verdicts("halt", map[string][]string{
		"r1": {inspect.DistVerdictHalted, "halted (" + regionsyncv1alpha1.ReasonProgressDeadlineExceeded + ", on r2) before reaching it"},
		"r2": {inspect.DistVerdictHalted, "the rollout of revision halt-", "halted on this region", regionsyncv1alpha1.ReasonProgressDeadlineExceeded},
	})

	// Both of a Distribution's objects leave at once: the shrink guard holds them.
	create(t, c, &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: shopNS, Name: "gone"},
		Spec:       regionsyncv1alpha1.DistributionSpec{Template: widgetTemplate("v1"), Placement: regionsyncv1alpha1.Placement{Regions: []string{"r1", "r4"}}},
	})
	verdicts("gone", map[string][]string{"r1": {inspect.DistVerdictPlaced}, "r4": {inspect.DistVerdictPlaced}})
	testenv.Eventually(t, "moving Distribution gone to r3", 10*time.Second, func() error {
		d := &regionsyncv1alpha1.Distribution{}
		if err := c.Get(bg, types.NamespacedName{Namespace: shopNS, Name: "gone"}, d); err != nil {
			return err
		}
		d.Spec.Placement.Regions = []string{"r3"}
		return c.Update(bg, d)
	})
	verdicts("gone", map[string][]string{
		"r1": {inspect.DistVerdictRemovalHeld, "shrink guard"},
		"r4": {inspect.DistVerdictRemovalHeld, "shrink guard"},
		"r3": {inspect.DistVerdictPlaced},
	})
}
