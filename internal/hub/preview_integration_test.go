//go:build integration

package hub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestPreviewMatchesTheHub: a preview (hub.PreviewDistribution, what `kubectl regionsync diff`
// prints) says exactly what the hub then writes. For a new Distribution, a template change, an
// override change, a source object edited locally and a shrinking placement (one removal the
// shrink guard allows, then one it holds because the window already counted the first), each
// object the preview creates or updates is, once the change is written, as the preview's result;
// each it removes is gone; each it holds stays. A preview of what is placed changes nothing, and
// a spec the hub refuses is Invalid with the field named.
func TestPreviewMatchesTheHub(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	prod := map[string]string{"tier": "prod"}
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		region("r-a", prod, tenantShard("-ra", "r-a", tenantKind, "ConfigMap")),
		region("r-b", prod, tenantShard("-rb", "r-b", tenantKind, "ConfigMap")),
		region("r-c", prod, tenantShard("-rc", "r-c", tenantKind, "ConfigMap")),
	)
	tenantWriter(t, c, ns, "placer", writeTenants, writeConfigMaps)
	hubReads(t, c, "hub-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	startHub(t, mgmt, hub.Options{ShrinkWindow: time.Hour})

	req := hub.PreviewRequest{
		Client: c, Writers: hub.NewWriters(mgmt.Config, client.Options{Scheme: c.Scheme()}), Keys: keys,
		Guard: &hub.ShrinkGuard{Window: time.Hour, Store: &hub.ConfigMapGuardStore{Reader: c,
			Key: types.NamespacedName{Namespace: "regionsync-system", Name: hub.GuardConfigMapName}}},
	}
	preview := func(d *regionsyncv1alpha1.Distribution, src *unstructured.Unstructured) *hub.Preview {
		t.Helper()
		r := req
		r.Distribution, r.Source, r.Now = d, src, time.Now()
		r.Guard = &hub.ShrinkGuard{Window: req.Guard.Window, Store: req.Guard.Store} // its memory read afresh
		p, err := hub.PreviewDistribution(bg, r)
		if err != nil {
			t.Fatal(err)
		}
		if p.Invalid != "" {
			t.Fatalf("preview of %s: invalid: %s", d.Name, p.Invalid)
		}
		return p
	}
	// changes lists, per region, the change of each object: "r-a:Update r-b:None".
	changes := func(p *hub.Preview) string {
		var out []string
		for _, r := range p.Regions {
			for _, o := range r.Objects {
				out = append(out, r.Region+":"+string(o.Change))
			}
		}
		return strings.Join(out, " ")
	}
	want := func(what string, p *hub.Preview, changed string) {
		t.Helper()
		if got := changes(p); got != changed {
			t.Fatalf("%s: the preview's changes are %q, want %q", what, got, changed)
		}
	}
	// lands: once the change is written, the hub's objects are as the preview said.
	lands := func(what string, p *hub.Preview) {
		t.Helper()
		i := strings.LastIndex(p.Kind, "/")
		gvk := schema.FromAPIVersionAndKind(p.Kind[:i], p.Kind[i+1:])
		testenv.Eventually(t, what+": the hub's objects as previewed", 30*time.Second, func() error {
			for _, r := range p.Regions {
				for _, o := range r.Objects {
					live := &unstructured.Unstructured{}
					live.SetGroupVersionKind(gvk)
					err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: o.Name}, live)
					switch o.Change {
					case hub.ChangeCreate, hub.ChangeUpdate, hub.ChangeNone:
						if err != nil {
							return err
						}
						if got := hub.Comparable(live, keys); !equality.Semantic.DeepEqual(got.Object, o.Result.Object) {
							return fmt.Errorf("%s in %s is\n%v\nthe preview said\n%v", o.Name, r.Region, got.Object, o.Result.Object)
						}
					case hub.ChangeRemove:
						if !apierrors.IsNotFound(err) {
							return fmt.Errorf("%s in %s: still there (%v)", o.Name, r.Region, err)
						}
					case hub.ChangeRemoveHeld:
						if err != nil || live.GetDeletionTimestamp() != nil {
							return fmt.Errorf("%s in %s: a held removal went ahead (%v)", o.Name, r.Region, err)
						}
					}
				}
			}
			return nil
		})
	}
	// current: a preview of the Distribution as it is now changes nothing.
	current := func(name string, src *unstructured.Unstructured) {
		t.Helper()
		testenv.Eventually(t, name+" as placed previews no change", 30*time.Second, func() error {
			if p := preview(getDist(t, c, name), src); p.Changed() {
				return fmt.Errorf("changes %s", changes(p))
			}
			return nil
		})
	}

	web := &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template:           tenantTemplate("basic", ""),
			Placement:          regionsyncv1alpha1.Placement{RegionSelector: &metav1.LabelSelector{MatchLabels: prod}},
			ServiceAccountName: "placer",
			Overrides: []regionsyncv1alpha1.Override{{Regions: []string{"r-b"},
				MergePatch: &apiextensionsv1.JSON{Raw: []byte(`{"spec":{"displayName":"Acme B"}}`)}}},
		},
	}
	p := preview(web, nil)
	if !p.New || p.Revision == "" {
		t.Fatalf("a new Distribution's preview: new %v revision %q", p.New, p.Revision)
	}
	want("new", p, "r-a:Create r-b:Create r-c:Create")
	create(t, c, web.DeepCopy())
	lands("new", p)
	current("web", nil)

	change := func(what string, mutate func(*regionsyncv1alpha1.Distribution), changed string) *hub.Preview {
		t.Helper()
		d := getDist(t, c, "web")
		mutate(d)
		p := preview(d, nil)
		want(what, p, changed)
		updateDist(t, c, "web", mutate)
		lands(what, p)
		return p
	}
	change("template change", func(d *regionsyncv1alpha1.Distribution) { d.Spec.Template = tenantTemplate("pro", "") },
		"r-a:Update r-b:Update r-c:Update")
	current("web", nil)
	// An override is part of the revision: every region's object gets the new revision's name,
	// and only r-b's content changes.
	p = change("override change", func(d *regionsyncv1alpha1.Distribution) {
		d.Spec.Overrides[0].MergePatch = &apiextensionsv1.JSON{Raw: []byte(`{"spec":{"displayName":"Acme Bee"}}`)}
	}, "r-a:Update r-b:Update r-c:Update")
	for _, r := range p.Regions {
		o := r.Objects[0]
		relabelled := o.Live.DeepCopy()
		a := relabelled.GetAnnotations()
		a[keys.Revision] = p.Revision
		relabelled.SetAnnotations(a)
		if same := equality.Semantic.DeepEqual(relabelled.Object, o.Result.Object); same != (r.Region != "r-b") {
			t.Errorf("override change in %s: only the revision changes: %v, want %v", r.Region, same, r.Region != "r-b")
		}
	}
	current("web", nil)

	// Shrinking: one of three regions goes (within max(1, 10 %)), then one of the two left,
	// which the window's count of the first removal makes too many: held.
	if p := change("placement shrinks by one", func(d *regionsyncv1alpha1.Distribution) {
		d.Spec.Placement = regionsyncv1alpha1.Placement{Regions: []string{"r-a", "r-b"}}
	}, "r-a:None r-b:None r-c:Remove"); p.Held {
		t.Fatalf("one removal of three previewed as held: %s", p.HeldWhy)
	}
	p = change("placement shrinks again", func(d *regionsyncv1alpha1.Distribution) {
		d.Spec.Placement = regionsyncv1alpha1.Placement{Regions: []string{"r-a"}}
	}, "r-a:None r-b:RemoveHeld")
	if !p.Held || !strings.Contains(p.HeldWhy, "1 already removed within the window") {
		t.Fatalf("the second removal: held %v why %q, want held for the window's earlier removal", p.Held, p.HeldWhy)
	}
	testenv.Eventually(t, "the hub holds the removal the preview said it would", 30*time.Second, func() error {
		if c := condition(t, c, "web", regionsyncv1alpha1.DistributionRemovalHeld); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("RemovalHeld %+v", c)
		}
		return nil
	})

	// A source object edited locally: previewed through the Distribution that places it.
	create(t, c, configMap("ca", nil, map[string]string{"ca.crt": "one"}))
	cfg := &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Source:             &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: "ca"},
			Placement:          regionsyncv1alpha1.Placement{Regions: []string{"r-a", "r-b"}},
			ServiceAccountName: "placer",
		},
	}
	p = preview(cfg, nil)
	want("new source Distribution", p, "r-a:Create r-b:Create")
	create(t, c, cfg.DeepCopy())
	lands("new source Distribution", p)
	edited := &unstructured.Unstructured{}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(configMap("ca", nil, map[string]string{"ca.crt": "two"}))
	if err != nil {
		t.Fatal(err)
	}
	edited.Object = obj
	edited.SetAPIVersion("v1")
	edited.SetKind("ConfigMap")
	ds, err := hub.DistributionsOfSource(bg, c, edited)
	if err != nil || len(ds) != 1 || ds[0].Name != "cfg" {
		t.Fatalf("the Distributions of source ca: %d (%v), want cfg", len(ds), err)
	}
	p = preview(&ds[0], edited)
	want("source change", p, "r-a:Update r-b:Update")
	live, err := getConfigMap(c, "ca")
	if err != nil {
		t.Fatal(err)
	}
	live.Data = map[string]string{"ca.crt": "two"}
	if err := c.Update(bg, live); err != nil {
		t.Fatal(err)
	}
	lands("source change", p)
	current("cfg", nil)

	// A spec the hub refuses is Invalid, naming the field; nothing is placed or changed.
	bad := getDist(t, c, "cfg")
	bad.Spec.Source.Name, bad.Spec.Source.LabelSelector = "", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	r := req
	r.Distribution, r.Now = bad, time.Now()
	switch bp, err := hub.PreviewDistribution(bg, r); {
	case err != nil:
		if !strings.Contains(err.Error(), "spec.source") {
			t.Errorf("a bad selector refused with %v, want the field named", err)
		}
	case !strings.Contains(bp.Invalid, "spec.source.labelSelector") || bp.Changed():
		t.Errorf("a bad selector previewed as invalid %q changed %v, want spec.source.labelSelector named and no change", bp.Invalid, bp.Changed())
	}
}
