package inspect

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// TestExplainDistributionVerdicts: the verdicts the hub's own states do not produce on demand in
// the integration test (deletion, an invalid spec, a pause, a removal under way, a region the
// status omits past 100), and their order over a region's status entry.
func TestExplainDistributionVerdicts(t *testing.T) {
	regions := []regionsyncv1alpha1.Region{
		{ObjectMeta: metav1.ObjectMeta{Name: "use", Labels: map[string]string{"tier": "prod"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "euw", Labels: map[string]string{"tier": "prod"}}},
	}
	base := func(mutate func(*regionsyncv1alpha1.Distribution)) *regionsyncv1alpha1.Distribution {
		d := &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "web"},
			Spec:       regionsyncv1alpha1.DistributionSpec{Placement: regionsyncv1alpha1.Placement{Regions: []string{"use"}}},
			Status: regionsyncv1alpha1.DistributionStatus{Conditions: []metav1.Condition{{Type: regionsyncv1alpha1.DistributionApplied,
				Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonApplied}}, Regions: []regionsyncv1alpha1.DistributionRegionStatus{
				{Region: "use", Name: "web-use", State: regionsyncv1alpha1.PlacementApplied, Current: true, Health: "Current"},
			}},
		}
		if mutate != nil {
			mutate(d)
		}
		return d
	}
	object := func(region, rev string) unstructured.Unstructured {
		u := unstructured.Unstructured{}
		u.SetName("web-" + region)
		u.SetLabels(map[string]string{regionsyncv1alpha1.RegionLabel: region})
		u.SetAnnotations(map[string]string{testKeys.Revision: rev})
		return u
	}
	for _, tc := range []struct {
		name    string
		d       *regionsyncv1alpha1.Distribution
		objects []unstructured.Unstructured
		region  string
		want    string
		text    string
	}{
		{name: "placed", d: base(nil), region: "use", want: DistVerdictPlaced, text: "web-use is current and healthy"},
		{name: "omitted from the status past 100: placed", region: "use", want: DistVerdictPlaced, text: "only the regions that need attention",
			d: base(func(d *regionsyncv1alpha1.Distribution) { d.Status.Regions = nil })},
		{name: "the hub never reported", region: "use", want: DistVerdictNotReconciled, text: "is it running?",
			d: base(func(d *regionsyncv1alpha1.Distribution) { d.Status = regionsyncv1alpha1.DistributionStatus{} })},
		{name: "deleting", region: "use", want: DistVerdictDeleting, text: "deletionPolicy Orphan",
			d: base(func(d *regionsyncv1alpha1.Distribution) {
				d.DeletionTimestamp, d.Spec.DeletionPolicy = &metav1.Time{}, regionsyncv1alpha1.DeletionPolicyOrphan
			})},
		{name: "an invalid spec, before everything else", region: "use", want: DistVerdictInvalidSpec, text: "spec.template.kind",
			d: base(func(d *regionsyncv1alpha1.Distribution) {
				d.Status.Conditions = []metav1.Condition{{Type: regionsyncv1alpha1.DistributionApplied, Status: metav1.ConditionFalse,
					Reason: regionsyncv1alpha1.ReasonInvalidSpec, Message: "spec.template.kind: Required value"}}
			})},
		{name: "an invalid selector", region: "use", want: DistVerdictInvalidSpec, text: "spec.placement.regionSelector",
			d: base(func(d *regionsyncv1alpha1.Distribution) {
				d.Spec.Placement.RegionSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
			})},
		{name: "not selected, nothing there", region: "euw", want: DistVerdictNotSelected, text: "spec.placement has no regionSelector", d: base(nil)},
		{name: "a Region that does not exist", region: "apac", want: DistVerdictNotSelected, text: "no Region apac exists", d: base(nil)},
		{name: "not selected with an object: removing", region: "euw", want: DistVerdictRemoving, text: "left the placement",
			d: base(nil), objects: []unstructured.Unstructured{object("euw", "web-1")}},
		{name: "paused before the update", region: "use", want: DistVerdictPaused, text: "spec.paused holds the rollout of revision web-2",
			objects: []unstructured.Unstructured{object("use", "web-1")},
			d: base(func(d *regionsyncv1alpha1.Distribution) {
				d.Spec.Paused = true
				d.Status.Rollout = &regionsyncv1alpha1.RolloutStatus{CurrentRevision: "web-1", UpdateRevision: "web-2"}
			})},
		{name: "a failed region wins over its rollout", region: "use", want: DistVerdictFailed, text: "InvalidSpec: spec.overrides[0]",
			d: base(func(d *regionsyncv1alpha1.Distribution) {
				d.Status.Regions[0].State, d.Status.Regions[0].Reason, d.Status.Regions[0].Message = regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.ReasonInvalidSpec, "spec.overrides[0]: no such path"
				d.Status.Rollout = &regionsyncv1alpha1.RolloutStatus{UpdateRevision: "web-2", Halt: &regionsyncv1alpha1.RolloutHalt{Revision: "web-2", Regions: []string{"use"}}}
			})},
		{name: "halted and rolled back", region: "use", want: DistVerdictHalted, text: "rolled back to web-1",
			objects: []unstructured.Unstructured{object("use", "web-1")},
			d: base(func(d *regionsyncv1alpha1.Distribution) {
				d.Status.Rollout = &regionsyncv1alpha1.RolloutStatus{CurrentRevision: "web-1", UpdateRevision: "web-2",
					Halt: &regionsyncv1alpha1.RolloutHalt{Revision: "web-2", Regions: []string{"use"}, Reason: regionsyncv1alpha1.ReasonUnhealthy, RolledBack: true}}
			})},
		{name: "current but unhealthy", region: "use", want: DistVerdictNotHealthy, text: "its health is InProgress",
			d: base(func(d *regionsyncv1alpha1.Distribution) { d.Status.Regions[0].Health = "InProgress" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ExplainDistribution(DistributionInput{Keys: testKeys, Distribution: tc.d, Regions: regions, Objects: tc.objects, Region: tc.region})
			if len(e.Regions) != 1 {
				t.Fatalf("verdicts %+v, want one for %s", e.Regions, tc.region)
			}
			if v := e.Regions[0]; v.Verdict != tc.want || !strings.Contains(v.Text, tc.text) {
				t.Errorf("%s: %s %q, want %s with %q", tc.region, v.Verdict, v.Text, tc.want, tc.text)
			}
		})
	}
}

// TestExplainNamesItsDistribution: explaining a per-region object names the Distribution and
// the revision that placed it.
func TestExplainNamesItsDistribution(t *testing.T) {
	obj := syncedTenant("acme", "web-use", "use", withAnnotation(testKeys.Revision, "web-5fdb144a3a"))
	l := obj.GetLabels()
	l[testKeys.Distribution] = "web"
	obj.SetLabels(l)
	e := Explain(ExplainInput{Keys: testKeys, Kind: tenantKind, Namespace: "acme", Name: "web-use", Object: obj, Now: testNow,
		Fleet: fleetOf([]*ShardRecord{liveShard("use", "-use")}, readyRegion("use"))})
	if e.Distribution != "acme/web" || e.Revision != "web-5fdb144a3a" || !hasFinding(e, TopicDistribution, "placed by Distribution acme/web, revision web-5fdb144a3a") {
		t.Errorf("distribution %q revision %q findings %+v", e.Distribution, e.Revision, e.Findings)
	}
}

func hasFinding(e *Explanation, topic, text string) bool {
	for _, f := range e.Findings {
		if f.Topic == topic && strings.Contains(f.Text, text) {
			return true
		}
	}
	return false
}
