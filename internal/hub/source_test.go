package hub

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func sourceDist(name string, s *regionsyncv1alpha1.DistributionSource, template string) *regionsyncv1alpha1.Distribution {
	d := &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name}}
	d.Spec.Source = s
	if template != "" {
		d.Spec.Template = runtime.RawExtension{Raw: []byte(template)}
	}
	return d
}

func TestSpecKind(t *testing.T) {
	byLabel := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	for name, tc := range map[string]struct {
		d            *regionsyncv1alpha1.Distribution
		allowSecrets bool
		want         schema.GroupVersionKind
		err          string
	}{
		"a template":              {d: sourceDist("d", nil, tenantJSON), want: schema.GroupVersionKind{Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant"}},
		"a source by name":        {d: sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, ""), want: configMapGVK},
		"a source by selector":    {d: sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: byLabel}, ""), want: configMapGVK},
		"both":                    {d: sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, tenantJSON), err: "exactly one of spec.template and spec.source"},
		"neither":                 {d: sourceDist("d", nil, ""), err: "spec.template: Required value"},
		"name and selector":       {d: sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: "x", LabelSelector: byLabel}, ""), err: "spec.source: Invalid value"},
		"no kind":                 {d: sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Name: "x"}, ""), err: "spec.source.kind: Required value"},
		"bad apiVersion":          {d: sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "a/b/c", Kind: "X", Name: "x"}, ""), err: "spec.source.apiVersion: Invalid value"},
		"bad selector":            {d: sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bad"}}}}, ""), err: "spec.source.labelSelector"},
		"a Secret source refused": {d: sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "Secret", Name: "x"}, ""), err: "spec.source.kind: Forbidden: Secrets are placed only where the hub's configuration allows them (allowSecrets: true)"},
		"a Secret template refused": {d: sourceDist("d", nil, `{"apiVersion":"v1","kind":"Secret","data":{}}`),
			err: "spec.template.kind: Forbidden: Secrets are placed only where the hub's configuration allows them (allowSecrets: true)"},
		"a Secret allowed": {d: sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "Secret", Name: "x"}, ""), allowSecrets: true, want: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := SpecKind(tc.d, testKeys, tc.allowSecrets)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestNotASource(t *testing.T) {
	r := &DistributionReconciler{Keys: testKeys}
	shards := shardMappers([]regionsyncv1alpha1.Region{
		{ObjectMeta: metav1.ObjectMeta{Name: "r-a"}, Spec: regionsyncv1alpha1.RegionSpec{Shard: &regionsyncv1alpha1.RegionShard{NamespacePrefix: "tenant-", RemoteResourceSuffix: "-ra", Kinds: []string{"ConfigMap"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "r-x"}, Spec: regionsyncv1alpha1.RegionSpec{Shard: &regionsyncv1alpha1.RegionShard{LabelSelector: "zone=x", Kinds: []string{"ConfigMap"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "r-none"}},
	})
	obj := func(ns, name string, labels, annotations map[string]string, finalizers ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(configMapGVK)
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		u.SetFinalizers(finalizers)
		return u
	}
	for name, tc := range map[string]struct {
		u    *unstructured.Unstructured
		want string
	}{
		"a plain object":                       {obj("tenant-a", "web", map[string]string{"app": "web"}, map[string]string{"note": "x", "regionsync.dev/traceparent": "00-x"}), ""},
		"a per-region object (region label)":   {obj("tenant-a", "web", map[string]string{"regionsync.dev/region": "r-a"}, nil), "the label regionsync.dev/region"},
		"a per-region object (distribution)":   {obj("tenant-a", "web", map[string]string{"regionsync.dev/distribution": "d"}, nil), "the label regionsync.dev/distribution"},
		"an uploaded Secret":                   {obj("tenant-a", "web", nil, map[string]string{"regionsync.dev/last-uploaded-hash": "h"}), "the annotation regionsync.dev/last-uploaded-hash"},
		"an object an agent syncs":             {obj("tenant-a", "web", nil, nil, "regionsync.dev/sync-local"), "the finalizer regionsync.dev/sync-local"},
		"a name inside r-a's shard":            {obj("tenant-a", "web-ra", nil, nil), "inside Region r-a's shard"},
		"that suffix outside r-a's namespaces": {obj("other", "web-ra", nil, nil), ""},
		"r-x's selector (no suffix)":           {obj("other", "web", map[string]string{"zone": "x"}, nil), "inside Region r-x's shard"},
	} {
		t.Run(name, func(t *testing.T) {
			got := r.notASource(tc.u, shards)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("%q, want %q", got, tc.want)
			}
		})
	}
}

func TestFromSource(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "web", "namespace": "tenant-a", "uid": "u", "resourceVersion": "3",
			"labels":      map[string]any{"app": "web"},
			"annotations": map[string]any{"note": "n", lastApplied: "{}"}},
		"data":   map[string]any{"k": "v"},
		"status": map[string]any{"x": "y"},
	}}
	got := fromSource(u)
	want := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"},
		"metadata": map[string]any{"labels": map[string]any{"app": "web"}, "annotations": map[string]any{"note": "n"}}}
	if d := cmp.Diff(want, got.Object); d != "" {
		t.Errorf("template (-want +got):\n%s", d)
	}
	if got.Name != "web" || got.GVK != configMapGVK || got.field() != "spec.source" {
		t.Errorf("%+v", got)
	}
	rs := &regionsyncv1alpha1.RegionShard{RemoteResourceSuffix: "-ra", Kinds: []string{"ConfigMap"}}
	obj, err := Render(RenderingOf(sourceDist("dist", nil, "")), got, &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "r-a"}, Spec: regionsyncv1alpha1.RegionSpec{Shard: rs}}, testKeys)
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetName() != "web-ra" || obj.GetLabels()[testKeys.Distribution] != "dist" || obj.GetLabels()["app"] != "web" {
		t.Errorf("rendered %s %v", obj.GetName(), obj.GetLabels())
	}
}

func TestSourceSelects(t *testing.T) {
	byLabel := sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"distribute": "web"}}}, "")
	byName := sourceDist("d", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: "web"}, "")
	template := sourceDist("d", nil, tenantJSON)
	for name, tc := range map[string]struct {
		d      *regionsyncv1alpha1.Distribution
		gvk    schema.GroupVersionKind
		object string
		labels map[string]string
		want   bool
	}{
		"by label":             {byLabel, configMapGVK, "any", map[string]string{"distribute": "web"}, true},
		"by label, no match":   {byLabel, configMapGVK, "any", map[string]string{"distribute": "api"}, false},
		"by label, other kind": {byLabel, schema.GroupVersionKind{Group: "x", Version: "v1", Kind: "ConfigMap"}, "any", map[string]string{"distribute": "web"}, false},
		"by name":              {byName, configMapGVK, "web", nil, true},
		"by name, another":     {byName, configMapGVK, "api", nil, false},
		"a template":           {template, configMapGVK, "d", nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := sourceSelects(tc.d, tc.gvk, tc.object, tc.labels); got != tc.want {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}

func TestWantsAndOlder(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	regions := []regionsyncv1alpha1.Region{{ObjectMeta: metav1.ObjectMeta{Name: "r-a", Labels: map[string]string{"tier": "prod"}}}}
	at := func(d *regionsyncv1alpha1.Distribution, ts metav1.Time, regions ...string) *regionsyncv1alpha1.Distribution {
		d.CreationTimestamp = ts
		d.Spec.Placement.Regions = regions
		return d
	}
	zeta := at(sourceDist("zeta", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: "shared"}, ""), t0, "r-a")
	alpha := at(sourceDist("alpha", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: "shared"}, ""), metav1.NewTime(t0.Add(time.Second)), "r-a")
	beta := at(sourceDist("beta", nil, tenantJSON), t0, "r-a")
	if !older(zeta, alpha) || older(alpha, zeta) {
		t.Error("the earlier creation is older")
	}
	if !older(beta, zeta) || older(zeta, beta) {
		t.Error("at the same time, the first name is older")
	}
	if !wants(zeta, configMapGVK, "shared", nil, "r-a", regions, testKeys) {
		t.Error("zeta wants shared in r-a")
	}
	if wants(zeta, configMapGVK, "shared", nil, "r-b", regions, testKeys) || wants(zeta, configMapGVK, "other", nil, "r-a", regions, testKeys) {
		t.Error("zeta wants only shared, in r-a")
	}
	tenant := schema.GroupVersionKind{Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant"}
	if !wants(beta, tenant, "beta", nil, "r-a", regions, testKeys) || wants(beta, configMapGVK, "beta", nil, "r-a", regions, testKeys) {
		t.Error("a template wants its own name, of its kind")
	}
	deleting := zeta.DeepCopy()
	deleting.DeletionTimestamp = &t0
	if wants(deleting, configMapGVK, "shared", nil, "r-a", regions, testKeys) {
		t.Error("a Distribution being deleted wants nothing")
	}
}

func TestRegionEntries(t *testing.T) {
	applied := func(region, name string, current bool, health string) regionsyncv1alpha1.DistributionRegionStatus {
		return regionsyncv1alpha1.DistributionRegionStatus{Region: region, Name: name, State: regionsyncv1alpha1.PlacementApplied, Current: current, Health: health}
	}
	got := regionEntries([]regionsyncv1alpha1.DistributionRegionStatus{
		applied("r-a", "web-b-ra", true, "Current"),
		applied("r-a", "web-a-ra", false, "InProgress"),
		{Region: "r-a", Name: "old-ra", State: regionsyncv1alpha1.PlacementRemoving},
		applied("r-b", "web-a-rb", true, "Current"),
		applied("r-c", "web-a-rc", true, "Current"),
		{Region: "r-c", Name: "web-b-rc", State: regionsyncv1alpha1.PlacementConflict, Message: "ConfigMap ns/web-b-rc is held by Distribution x"},
		{Region: "r-d", Name: "a-rd", State: regionsyncv1alpha1.PlacementRemovalHeld},
		{Region: "r-d", Name: "b-rd", State: regionsyncv1alpha1.PlacementRemovalHeld},
		{Region: "r-d", Name: "c-rd", State: regionsyncv1alpha1.PlacementRemovalHeld},
		{Region: "r-d", Name: "d-rd", State: regionsyncv1alpha1.PlacementRemovalHeld},
	})
	want := []regionsyncv1alpha1.DistributionRegionStatus{
		{Region: "r-a", Name: "old-ra, web-a-ra, web-b-ra", State: regionsyncv1alpha1.PlacementApplied, Current: false, Health: "InProgress"},
		applied("r-b", "web-a-rb", true, "Current"),
		{Region: "r-c", Name: "web-a-rc, web-b-rc", State: regionsyncv1alpha1.PlacementConflict, Message: "ConfigMap ns/web-b-rc is held by Distribution x"},
		{Region: "r-d", Name: "a-rd, b-rd, c-rd, and 1 more", State: regionsyncv1alpha1.PlacementRemovalHeld},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
