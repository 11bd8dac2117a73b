package hub

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
)

var testKeys = shard.NewKeys("regionsync.dev")

const tenantJSON = `{"apiVersion":"demo.regionsync.dev/v1alpha1","kind":"Tenant","metadata":{"labels":{"team":"acme"}},"spec":{"plan":"team","replicas":2}}`

func testRegion(name, suffix string, lbls map[string]string) regionsyncv1alpha1.Region {
	return regionsyncv1alpha1.Region{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: regionsyncv1alpha1.RegionSpec{Shard: &regionsyncv1alpha1.RegionShard{
			NamespacePrefix: "tenant-", RemoteResourceSuffix: suffix, LabelSelector: "regionsync.dev/region=" + name,
			Kinds: []string{"Tenant.demo.regionsync.dev"},
		}},
	}
}

func TestParseTemplate(t *testing.T) {
	for name, tc := range map[string]struct {
		raw  string
		want string // substring of the error; "" = valid
	}{
		"valid":                 {tenantJSON, ""},
		"traceparent allowed":   {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"regionsync.dev/traceparent":"00-x"}},"data":{"a":"b"}}`, ""},
		"empty":                 {``, "spec.template: Required value"},
		"no apiVersion":         {`{"kind":"Tenant"}`, "spec.template.apiVersion: Required value"},
		"bad apiVersion":        {`{"apiVersion":"a/b/c","kind":"Tenant"}`, "spec.template.apiVersion: Invalid value"},
		"no kind":               {`{"apiVersion":"v1"}`, "spec.template.kind: Required value"},
		"a name":                {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, "spec.template.metadata.name: Forbidden"},
		"finalizers":            {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"finalizers":["x"]}}`, "spec.template.metadata.finalizers: Forbidden"},
		"status":                {`{"apiVersion":"v1","kind":"ConfigMap","status":{}}`, "spec.template.status: Forbidden"},
		"a D/ annotation":       {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"regionsync.dev/paused":"true"}}}`, "spec.template.metadata.annotations[regionsync.dev/paused]: Forbidden"},
		"the region label":      {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"regionsync.dev/region":"x"}}}`, "spec.template.metadata.labels[regionsync.dev/region]: Forbidden"},
		"the distribution mark": {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"regionsync.dev/distribution":"x"}}}`, "spec.template.metadata.labels[regionsync.dev/distribution]: Forbidden"},
		"a bad label value":     {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"a":"not ok"}}}`, "spec.template.metadata.labels[a]: Invalid value"},

		"not an object": {`[1]`, "spec.template: Invalid value"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTemplate([]byte(tc.raw), testKeys)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("ParseTemplate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseTemplate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	tmpl, err := ParseTemplate([]byte(tenantJSON), testKeys)
	if err != nil {
		t.Fatal(err)
	}
	merge := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
	for name, tc := range map[string]struct {
		overrides []regionsyncv1alpha1.Override
		region    regionsyncv1alpha1.Region
		plan      string // the rendered spec.plan
		want      string // substring of the error
	}{
		"template as is": {nil, testRegion("us", "-us", nil), "team", ""},
		"merge patch by name": {[]regionsyncv1alpha1.Override{{Regions: []string{"us"}, MergePatch: merge(`{"spec":{"plan":"free"}}`)}},
			testRegion("us", "-us", nil), "free", ""},
		"not selected": {[]regionsyncv1alpha1.Override{{Regions: []string{"eu"}, MergePatch: merge(`{"spec":{"plan":"free"}}`)}},
			testRegion("us", "-us", nil), "team", ""},
		"by selector, in order": {[]regionsyncv1alpha1.Override{
			{RegionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}, MergePatch: merge(`{"spec":{"plan":"enterprise"}}`)},
			{Regions: []string{"us"}, JSONPatch: []regionsyncv1alpha1.JSONPatchOperation{{Op: "replace", Path: "/spec/plan", Value: merge(`"free"`)}}},
		}, testRegion("us", "-us", map[string]string{"tier": "gold"}), "free", ""},
		"a patch that does not apply": {[]regionsyncv1alpha1.Override{{Regions: []string{"us"},
			JSONPatch: []regionsyncv1alpha1.JSONPatchOperation{{Op: "remove", Path: "/spec/nothing"}}}},
			testRegion("us", "-us", nil), "", "spec.overrides[0].jsonPatch"},
		"renaming": {[]regionsyncv1alpha1.Override{{Regions: []string{"us"}, MergePatch: merge(`{"metadata":{"name":"other"}}`)}},
			testRegion("us", "-us", nil), "", "spec.overrides[0]: Forbidden: a patch may not change"},
		"another namespace": {[]regionsyncv1alpha1.Override{{Regions: []string{"us"},
			JSONPatch: []regionsyncv1alpha1.JSONPatchOperation{{Op: "replace", Path: "/metadata/namespace", Value: merge(`"kube-system"`)}}}},
			testRegion("us", "-us", nil), "", "may not change"},
		"the region label": {[]regionsyncv1alpha1.Override{{Regions: []string{"us"}, MergePatch: merge(`{"metadata":{"labels":{"regionsync.dev/region":"eu"}}}`)}},
			testRegion("us", "-us", nil), "", "may not change"},
		"a D/ annotation": {[]regionsyncv1alpha1.Override{{Regions: []string{"us"}, MergePatch: merge(`{"metadata":{"annotations":{"regionsync.dev/sync-remote-generation":"9"}}}`)}},
			testRegion("us", "-us", nil), "", "spec.overrides[0].annotations[regionsync.dev/sync-remote-generation]: Forbidden"},
		"finalizers": {[]regionsyncv1alpha1.Override{{Regions: []string{"us"}, MergePatch: merge(`{"metadata":{"finalizers":["x"]}}`)}},
			testRegion("us", "-us", nil), "", "not metadata.finalizers"},
		"status": {[]regionsyncv1alpha1.Override{{Regions: []string{"us"}, MergePatch: merge(`{"status":{"phase":"Ready"}}`)}},
			testRegion("us", "-us", nil), "", "may not set status"},
	} {
		t.Run(name, func(t *testing.T) {
			d := &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "acme"},
				Spec: regionsyncv1alpha1.DistributionSpec{Overrides: tc.overrides}}
			r := tc.region
			u, err := Render(RenderingOf(d), tmpl, &r, testKeys)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Render: %v, want an error containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if u.GetName() != "acme-us" || u.GetNamespace() != "tenant-a" || u.GetLabels()["regionsync.dev/region"] != "us" ||
				u.GetLabels()[testKeys.Distribution] != "acme" || u.GetLabels()["team"] != "acme" {
				t.Errorf("rendered %s/%s labels %v", u.GetNamespace(), u.GetName(), u.GetLabels())
			}
			if plan := u.Object["spec"].(map[string]any)["plan"]; plan != tc.plan {
				t.Errorf("spec.plan %v, want %s", plan, tc.plan)
			}
			if replicas := u.Object["spec"].(map[string]any)["replicas"]; replicas != int64(2) {
				t.Errorf("spec.replicas %#v, want int64 2 (as the API server's objects)", replicas)
			}
		})
	}
}

func TestPlace(t *testing.T) {
	tmpl, err := ParseTemplate([]byte(tenantJSON), testKeys)
	if err != nil {
		t.Fatal(err)
	}
	noShard := regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "old"}}
	other := testRegion("other", "-o", nil)
	other.Spec.Shard.AnnotationDomain = "cloud.teleport.dev"
	cm := testRegion("cm", "-cm", nil)
	cm.Spec.Shard.Kinds = []string{"ConfigMap"}
	team := testRegion("team", "-team", nil)
	team.Spec.Shard.NamespacePrefix = "team-"
	sel := testRegion("sel", "-sel", nil)
	sel.Spec.Shard.LabelSelector = "env=prod"
	badSel := testRegion("badsel", "-bs", nil)
	badSel.Spec.Shard.LabelSelector = "a in ("
	long := testRegion("long", "-"+strings.Repeat("x", 250), nil)
	regions := []regionsyncv1alpha1.Region{testRegion("us", "-us", nil), noShard, other, cm, team, sel, badSel, long}
	d := &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "acme"}}
	want := map[string]string{ // region → reason ("" = placeable)
		"us": "", "old": regionsyncv1alpha1.ReasonNoShard, "other": regionsyncv1alpha1.ReasonOtherAnnotationDomain,
		"cm": regionsyncv1alpha1.ReasonKindNotSynced, "team": regionsyncv1alpha1.ReasonNamespaceOutOfScope,
		"sel": regionsyncv1alpha1.ReasonSelectorMismatch, "badsel": regionsyncv1alpha1.ReasonInvalidShard,
		"long": regionsyncv1alpha1.ReasonInvalidName, "gone": regionsyncv1alpha1.ReasonRegionNotFound,
	}
	selected, err := Selected(regionsyncv1alpha1.Placement{Regions: []string{"gone"}, RegionSelector: &metav1.LabelSelector{}}, regions)
	if err != nil {
		t.Fatal(err)
	}
	if len(selected) != len(want) {
		t.Fatalf("selected %v", selected)
	}
	for _, tg := range Place(RenderingOf(d), tmpl, selected, regions, testKeys) {
		if tg.Reason != want[tg.Region] {
			t.Errorf("region %s: reason %q (%s), want %q", tg.Region, tg.Reason, tg.Message, want[tg.Region])
		}
		if (tg.Object != nil) != (want[tg.Region] == "") {
			t.Errorf("region %s: object %v", tg.Region, tg.Object)
		}
	}
	if _, err := Selected(regionsyncv1alpha1.Placement{RegionSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bad"}}}}, regions); err == nil ||
		!strings.Contains(err.Error(), "spec.placement.regionSelector") {
		t.Errorf("an invalid selector: %v", err)
	}
}

func TestObserve(t *testing.T) {
	for name, tc := range map[string]struct {
		annotations map[string]any
		status      map[string]any
		current     bool
		health      string
		deleting    bool
	}{
		"never synced":         {nil, nil, false, "Unknown", false},
		"current and observed": {map[string]any{"regionsync.dev/sync-remote-generation": "4", "regionsync.dev/sync-local-generation": "2"}, map[string]any{"observedGeneration": int64(2)}, true, "Current", false},
		"copied, status old":   {map[string]any{"regionsync.dev/sync-remote-generation": "4", "regionsync.dev/sync-local-generation": "2"}, map[string]any{"observedGeneration": int64(1)}, false, "InProgress", false},
		"older generation":     {map[string]any{"regionsync.dev/sync-remote-generation": "3", "regionsync.dev/sync-local-generation": "2"}, map[string]any{"observedGeneration": int64(2)}, false, "Current", false},
		"stalled": {map[string]any{"regionsync.dev/sync-remote-generation": "4", "regionsync.dev/sync-local-generation": "2"},
			map[string]any{"observedGeneration": int64(2), "conditions": []any{map[string]any{"type": "Stalled", "status": "True", "reason": "Quota"}}}, true, "Failed", false},
		"terminating": {map[string]any{"regionsync.dev/sync-remote-generation": "4", "regionsync.dev/sync-local-generation": "2"}, nil, true, "Terminating", true},
	} {
		t.Run(name, func(t *testing.T) {
			obj := map[string]any{"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
				"metadata": map[string]any{"name": "a", "generation": int64(4)}}
			if tc.annotations != nil {
				obj["metadata"].(map[string]any)["annotations"] = tc.annotations
			}
			if tc.deleting {
				obj["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
			}
			if tc.status != nil {
				obj["status"] = tc.status
			}
			o := Observe(&unstructured.Unstructured{Object: obj}, testKeys, nil)
			if o.Current != tc.current || o.Health != tc.health || o.Generation != 4 {
				t.Errorf("Observe = %+v, want current %v health %s", o, tc.current, tc.health)
			}
		})
	}
}

func TestStatusBounded(t *testing.T) {
	d := &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	var in StatusInput
	for i := range 1000 {
		e := regionsyncv1alpha1.DistributionRegionStatus{Region: fmt.Sprintf("r%04d", i), State: regionsyncv1alpha1.PlacementApplied, Current: true, Health: "Current", Generation: 1}
		if i%100 == 0 {
			e.Current = false
		}
		in.Entries = append(in.Entries, e)
	}
	in.Selected = 1000
	now := time.Now()
	st := ComputeStatus(d, in, now)
	if st.Counts.Placed != 1000 || st.Counts.Ready != 990 || len(st.Regions) != 10 || st.RegionsOmitted != 990 {
		t.Fatalf("counts %+v, %d listed, %d omitted", st.Counts, len(st.Regions), st.RegionsOmitted)
	}
	d.Status = st
	if again := ComputeStatus(d, in, now.Add(time.Minute)); statusChanged(&d.Status, &again) {
		t.Error("the same findings a minute later change the status (a write at rest)")
	}
}

// FuzzRender: whatever an override patches, the rendered object keeps the name, namespace and
// the hub's labels, or Render refuses it; it never panics.
func FuzzRender(f *testing.F) {
	f.Add(`{"spec":{"plan":"free"}}`, "replace", "/spec/plan", `"x"`)
	f.Add(`{"metadata":{"name":"y"}}`, "add", "/metadata/labels/regionsync.dev~1region", `"eu"`)
	f.Add(`null`, "remove", "/metadata", ``)
	f.Add(`{"metadata":{"annotations":{"regionsync.dev/traceparent":"t"}}}`, "move", "/spec", `1`)
	tmpl, err := ParseTemplate([]byte(tenantJSON), testKeys)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, merge, op, path, value string) {
		r := testRegion("us", "-us", nil)
		overrides := []regionsyncv1alpha1.Override{{Regions: []string{"us"}, JSONPatch: []regionsyncv1alpha1.JSONPatchOperation{{Op: op, Path: path, From: "/spec", Value: &apiextensionsv1.JSON{Raw: []byte(value)}}}}}
		if op == "merge" {
			overrides = []regionsyncv1alpha1.Override{{Regions: []string{"us"}, MergePatch: &apiextensionsv1.JSON{Raw: []byte(merge)}}}
		} else if len(merge)%2 == 0 {
			overrides = append(overrides, regionsyncv1alpha1.Override{Regions: []string{"us"}, MergePatch: &apiextensionsv1.JSON{Raw: []byte(merge)}})
		}
		d := &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "acme"},
			Spec: regionsyncv1alpha1.DistributionSpec{Overrides: overrides}}
		u, err := Render(RenderingOf(d), tmpl, &r, testKeys)
		if err != nil {
			return
		}
		if u.GetName() != "acme-us" || u.GetNamespace() != "tenant-a" || u.GetLabels()["regionsync.dev/region"] != "us" || u.GetLabels()[testKeys.Distribution] != "acme" {
			t.Fatalf("rendered %s/%s labels %v", u.GetNamespace(), u.GetName(), u.GetLabels())
		}
		for k := range u.GetAnnotations() {
			if strings.HasPrefix(k, "regionsync.dev/") && k != testKeys.TraceParent {
				t.Fatalf("rendered annotation %s", k)
			}
		}
		if _, ok := u.Object["status"]; ok {
			t.Fatal("rendered a status")
		}
	})
}

func TestConfig(t *testing.T) {
	c, err := ParseConfig([]byte("apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\n"))
	if err != nil {
		t.Fatal(err)
	}
	// The file defaults its own fields; the ones it shares with Options are Options.WithDefaults'.
	if c.AnnotationDomain != "" || c.Liveness.Grace.Duration != 0 || !*c.LeaderElection.Enabled || c.Telemetry.MetricsAddr != ":8080" {
		t.Errorf("file defaults %+v", c)
	}
	if o := OptionsFromConfig(c).WithDefaults(); o.AnnotationDomain != "regionsync.dev" || o.LivenessGrace != DefaultLivenessGrace ||
		o.ShrinkWindow != DefaultShrinkWindow || o.Concurrency != DefaultConcurrency || o.Namespace != "regionsync-system" {
		t.Errorf("options defaults %+v", o)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown field":   {"apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\nannotationDomians: x\n", `unknown field "annotationDomians"`},
		"duplicate field": {"apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\nconcurrency: 1\nconcurrency: 2\n", `key "concurrency" already set`},
		"wrong kind":      {"apiVersion: regionsyncdev/v1alpha1\nkind: AgentConfig\n", "kind: Invalid value"},
		"bad domain":      {"apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\nannotationDomain: Not_A_Domain\n", "annotationDomain: Invalid value"},
		"bad timings":     {"apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\nleaderElection: {leaseDuration: 5s, renewDeadline: 10s}\n", "leaderElection.leaseDuration"},
		"bad grace":       {"apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\nliveness: {grace: 10ms}\n", "liveness.grace: Invalid value"},
		"bad window":      {"apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\nshrinkGuard: {window: 10ms}\n", "shrinkGuard.window: Invalid value"},
		"bad concurrency": {"apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\nconcurrency: -1\n", "concurrency: Invalid value"},
		"bad account":     {"apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\ndefaultServiceAccountName: Placer!\n", "defaultServiceAccountName: Invalid value"},
		"bad address":     {"apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\ntelemetry: {metricsAddr: nope}\n", "telemetry.metricsAddr"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseConfig([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseConfig: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestRenderNamespaces checks that spec.namespaces reaches every placed region's object as the
// fan-out annotation, and that an override cannot set or change it.
func TestRenderNamespaces(t *testing.T) {
	tmpl, err := ParseTemplate([]byte(tenantJSON), testKeys)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		namespaces string
		overrides  []regionsyncv1alpha1.Override
		want       string // the annotation; "-": absent
		err        string
	}{
		"unset":       {"", nil, "-", ""},
		"every":       {"*", nil, "*", ""},
		"by selector": {"team=a,env in (prod)", nil, "team=a,env in (prod)", ""},
		"an override may not set it": {"", []regionsyncv1alpha1.Override{{Regions: []string{"us"},
			MergePatch: &apiextensionsv1.JSON{Raw: []byte(`{"metadata":{"annotations":{"regionsync.dev/fan-out-namespaces":"*"}}}`)}}}, "", "Forbidden"},
	} {
		t.Run(name, func(t *testing.T) {
			d := &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "acme"},
				Spec: regionsyncv1alpha1.DistributionSpec{Namespaces: tc.namespaces, Overrides: tc.overrides}}
			r := testRegion("us", "-us", nil)
			u, err := Render(RenderingOf(d), tmpl, &r, testKeys)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Render: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			got, ok := u.GetAnnotations()[testKeys.FanOutNamespaces]
			if !ok {
				got = "-"
			}
			if got != tc.want {
				t.Errorf("annotation %s = %q, want %q", testKeys.FanOutNamespaces, got, tc.want)
			}
		})
	}
}
