package compact

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// tenantJSON decodes a Tenant the way an informer does (a fresh allocation per string).
func tenantJSON(t *testing.T, name, uid string) *unstructured.Unstructured {
	t.Helper()
	doc := `{"apiVersion":"demo.regionsync.dev/v1alpha1","kind":"Tenant","metadata":{"name":"` + name + `","namespace":"tenant-a","uid":"` + uid + `","resourceVersion":"12","generation":3,
	"labels":{"regionsync.dev/region":"us-east-1"},"annotations":{"regionsync.dev/sync-remote-generation":"3","note":"` + strings.Repeat("x", 100) + `"},
	"finalizers":["regionsync.dev/sync-local"],
	"managedFields":[{"manager":"kubectl","operation":"Update"}]},
	"spec":{"displayName":"Acme","replicas":2},"status":{"conditions":[{"type":"Ready","status":"True","reason":"Synced"}]}}`
	obj, _, err := unstructured.UnstructuredJSONScheme.Decode([]byte(doc), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured)
}

func sameBacking(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

var tenantGVK = schema.GroupVersionKind{Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant"}

// TestCacheTransform: an object of a synced kind is cached compacted, its metadata readable as
// metav1.Object, and expands on DeepCopyObject into the object as served (managedFields aside),
// sharing nothing with the cache; short shared strings (and short value sets) are interned,
// unique and long ones not;
// other kinds and typed objects are only stripped of managedFields.
func TestCacheTransform(t *testing.T) {
	a, b := tenantJSON(t, "acme", "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a00"), tenantJSON(t, "beta", "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a01")
	want := a.DeepCopy()
	unstructured.RemoveNestedField(want.Object, "metadata", "managedFields")
	tr := Transform([]schema.GroupVersionKind{tenantGVK})
	ca, cb := compacted(t, tr, a), compacted(t, tr, b)

	// What informers, indexes, selectors and handlers read.
	var obj metav1.Object = ca
	if obj.GetName() != "acme" || obj.GetNamespace() != "tenant-a" || obj.GetResourceVersion() != "12" ||
		obj.GetGeneration() != 3 || obj.GetLabels()["regionsync.dev/region"] != "us-east-1" ||
		len(obj.GetFinalizers()) != 1 || obj.GetManagedFields() != nil {
		t.Fatalf("compacted metadata: %+v", ca)
	}
	if ca.rare != nil { // a UUID, no generateName, selfLink, deletion or owners: nothing rare to hold
		t.Fatalf("rare metadata held for an object without any: %+v", ca.rare)
	}
	if acc, err := meta.Accessor(ca); err != nil || acc.GetAnnotations()["regionsync.dev/sync-remote-generation"] != "3" ||
		ca.GetObjectMeta().GetLabels()["regionsync.dev/region"] != "us-east-1" {
		t.Fatalf("metadata accessors: %v", err)
	}
	set := &compactObject{}
	set.SetLabels(map[string]string{"b": "2", "a": "1"})
	set.SetAnnotations(map[string]string{})
	if !reflect.DeepEqual(set.GetLabels(), map[string]string{"a": "1", "b": "2"}) || set.GetAnnotations() == nil || len(set.GetAnnotations()) != 0 {
		t.Fatalf("set: labels %v, annotations %#v", set.GetLabels(), set.GetAnnotations())
	}
	if set.SetLabels(nil); set.GetLabels() != nil {
		t.Fatal("nil labels read back as a map")
	}
	if ca.GetObjectKind().GroupVersionKind() != tenantGVK {
		t.Fatalf("GVK %v", ca.GetObjectKind().GroupVersionKind())
	}

	// Readers get the object back, as the API server sent it, and a fresh one each time.
	got, ok := ca.DeepCopyObject().(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("DeepCopyObject returned %T", ca.DeepCopyObject())
	}
	if !reflect.DeepEqual(got.Object, want.Object) {
		t.Fatalf("expanded object differs:\n got %v\nwant %v", got.Object, want.Object)
	}
	got.Object["spec"].(map[string]any)["replicas"] = int64(9)
	if err := unstructured.SetNestedField(got.Object, "x", "metadata", "labels", "regionsync.dev/region"); err != nil {
		t.Fatal(err)
	}
	again := ca.DeepCopyObject().(*unstructured.Unstructured)
	if !reflect.DeepEqual(again.Object, want.Object) || ca.GetLabels()["regionsync.dev/region"] != "us-east-1" {
		t.Fatal("changing an expanded object changed the cache")
	}

	// The namespace and the name are parts of the one "namespace/name" string the entry holds.
	if ca.ref != "tenant-a/acme" || unsafe.StringData(ca.GetNamespace()) != unsafe.StringData(ca.ref) ||
		unsafe.StringData(ca.GetName()) != unsafe.StringData(ca.ref[len("tenant-a/"):]) {
		t.Fatalf("namespace and name are not parts of the ref %q", ca.ref)
	}
	for _, c := range []struct {
		what   string
		x, y   string
		shared bool
	}{
		{"the kind", ca.typeMeta().Kind, cb.typeMeta().Kind, true},
		{"a label key", keyOf(t, ca.GetLabels(), "regionsync.dev/region"), keyOf(t, cb.GetLabels(), "regionsync.dev/region"), true},
		{"a label value", ca.GetLabels()["regionsync.dev/region"], cb.GetLabels()["regionsync.dev/region"], true},
		{"the annotation values (one of them long)", ca.annotations.values, cb.annotations.values, false},
		{"a finalizer", ca.GetFinalizers()[0], cb.GetFinalizers()[0], true},
		{"the finalizer list", ca.finalizers.packed.Value(), cb.finalizers.packed.Value(), true},
		{"the short label values", ca.labels.values, cb.labels.values, true},
		{"the annotation key set", ca.annotations.keys.Value(), cb.annotations.keys.Value(), true},
		{"a long value", ca.GetAnnotations()["note"], cb.GetAnnotations()["note"], false},
	} {
		if got := sameBacking(c.x, c.y); got != c.shared {
			t.Errorf("%s: shared %v, want %v", c.what, got, c.shared)
		}
	}

	// A kind the engine does not sync stays unstructured (a host's own informers see it as
	// served); a typed object passes unchanged; both lose managedFields.
	other := tenantJSON(t, "gamma", "uid-c")
	other.SetKind("Other")
	if out, err := tr(other); err != nil || out != other || other.GetManagedFields() != nil {
		t.Fatalf("other kind: %T, %v, managedFields %v", out, err, other.GetManagedFields())
	}
	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	if out, err := tr(typed); err != nil || out != typed || typed.ManagedFields != nil {
		t.Fatalf("typed object: %T, %v", out, err)
	}
}

// TestCacheTransformAllUnstructured: the hub's transform compacts an unstructured object of any
// kind (a ConfigMap as well as a Tenant), expanding back to the object as served; a typed object
// (a ControllerRevision in the hub's cache) only loses managedFields.
func TestCacheTransformAllUnstructured(t *testing.T) {
	tr := TransformAllUnstructured()
	for _, kind := range []string{"Tenant", "Other"} {
		u := tenantJSON(t, "acme", "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a00")
		u.SetKind(kind)
		want := u.DeepCopy()
		unstructured.RemoveNestedField(want.Object, "metadata", "managedFields")
		got := compacted(t, tr, u).DeepCopyObject().(*unstructured.Unstructured)
		if !reflect.DeepEqual(got.Object, want.Object) {
			t.Fatalf("%s: expanded object differs:\n got %v\nwant %v", kind, got.Object, want.Object)
		}
	}
	cm, _, err := unstructured.UnstructuredJSONScheme.Decode([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"n","managedFields":[{"manager":"m"}]},"data":{"k":"v"}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := compacted(t, tr, cm.(*unstructured.Unstructured)).DeepCopyObject().(*unstructured.Unstructured); got.Object["data"].(map[string]any)["k"] != "v" || got.GetManagedFields() != nil {
		t.Fatalf("ConfigMap expanded as %v", got.Object)
	}
	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	if out, err := tr(typed); err != nil || out != typed || typed.ManagedFields != nil {
		t.Fatalf("typed object: %T, %v", out, err)
	}
}

// compacted runs the cache transform on u and returns the compact object it must make.
func compacted(t *testing.T, tr func(any) (any, error), u *unstructured.Unstructured) *compactObject {
	t.Helper()
	out, err := tr(u)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := out.(*compactObject)
	if !ok {
		t.Fatalf("%s is cached as %T, want *compactObject", u.GetName(), out)
	}
	return c
}

func keyOf(t *testing.T, m map[string]string, k string) string {
	t.Helper()
	for key := range m {
		if key == k {
			return key
		}
	}
	t.Fatalf("no key %q", k)
	return ""
}

// FuzzCompactRoundTrip: whatever object the API server may send, the cache gives readers back
// exactly that object (managedFields aside).
func FuzzCompactRoundTrip(f *testing.F) {
	f.Add(`{"metadata":{"name":"a","namespace":"n","labels":{"k":"v"},"annotations":{"a":""},"finalizers":["f"],"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u","controller":true}],"creationTimestamp":"2026-01-02T03:04:05Z","deletionTimestamp":"2026-01-02T03:04:06Z","deletionGracePeriodSeconds":0},"spec":{"f":1.5,"i":7,"b":true,"n":null,"l":[1,"x",{"y":[]}]},"status":{}}`)
	f.Add(`{"metadata":{"name":"b","generation":9,"resourceVersion":"3"},"data":{"x":"y"},"type":"t"}`)
	f.Add(`{"metadata":{"name":"c"}}`)
	f.Add(`{"metadata":{"name":"e","resourceVersion":"0","finalizers":[],"labels":{},"annotations":{"a":"` + "x" + `"}}}`)
	f.Add(`{"metadata":{"name":"f","resourceVersion":"a7","finalizers":["","x"]}}`)
	f.Add(`{"metadata":{"name":"g/h","namespace":"i/j"}}`)
	f.Add(`{"metadata":{"name":"d","uid":"0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a00","generateName":"d-","selfLink":"/x"}}`)
	tr := Transform([]schema.GroupVersionKind{tenantGVK})
	f.Fuzz(func(t *testing.T, doc string) {
		u := unstructuredDoc(doc)
		if u == nil {
			return
		}
		u.SetGroupVersionKind(tenantGVK)
		md, ok := u.Object["metadata"].(map[string]any)
		if !ok {
			return
		}
		var typed metav1.ObjectMeta
		if runtime.DefaultUnstructuredConverter.FromUnstructured(md, &typed) != nil {
			return // not metadata an API server serves
		}
		back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&typed)
		if err != nil || !reflect.DeepEqual(withoutNilTimestamp(back), md) {
			return // metadata the API server would have normalised (unknown fields, nulls)
		}
		want := u.DeepCopy()
		unstructured.RemoveNestedField(want.Object, "metadata", "managedFields")
		got := compacted(t, tr, u).DeepCopyObject().(*unstructured.Unstructured)
		if !reflect.DeepEqual(got.Object, want.Object) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got.Object, want.Object)
		}
	})
}

// unstructuredDoc is doc decoded as an informer of an unstructured kind decodes it, nil when it
// is not an object.
func unstructuredDoc(doc string) *unstructured.Unstructured {
	obj, _, err := unstructured.UnstructuredJSONScheme.Decode([]byte(doc), &tenantGVK, nil)
	if err != nil {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

func withoutNilTimestamp(m map[string]any) map[string]any {
	if m["creationTimestamp"] == nil {
		delete(m, "creationTimestamp")
	}
	return m
}

// TestStringPairs: a label or annotation map survives the compact form exactly — nil and empty
// stay apart, keys of any length and content (long keys take a multi-byte length), values as
// given — and equal key sets share one interned string.
func TestStringPairs(t *testing.T) {
	long := strings.Repeat("k", 300)
	for name, m := range map[string]map[string]string{
		"nil":             nil,
		"empty":           {},
		"one":             {"regionsync.dev/region": "us-east-1"},
		"sorted on write": {"b": "2", "a": "1", "c": ""},
		"empty key":       {"": "v", "a": "w"},
		"long key":        {long: "x", "a": strings.Repeat("v", 200), "z" + long: "y"},
		"odd bytes":       {"k\x00\x80\xff": "v\x00", "\x7f": "\x81"},
	} {
		t.Run(name, func(t *testing.T) {
			p := pairsOf(m)
			if got := p.toMap(); !reflect.DeepEqual(got, m) {
				t.Fatalf("toMap: %#v, want %#v", got, m)
			}
			if got, want := p.toAnyMap(), len(m); len(got) != want {
				t.Fatalf("toAnyMap: %d entries, want %d", len(got), want)
			}
			var keys []string
			p.each(func(k, _ string) { keys = append(keys, k) })
			if !slices.IsSorted(keys) {
				t.Fatalf("keys out of order: %q", keys)
			}
		})
	}
	a := pairsOf(map[string]string{"x": "1", "y": "2"})
	b := pairsOf(map[string]string{"y": "3", "x": "4"})
	if a.keys != b.keys || !sameBacking(a.keys.Value(), b.keys.Value()) {
		t.Fatal("equal key sets are not shared")
	}
}

// FuzzStringPairs: any map of strings survives pairsOf and toMap.
func FuzzStringPairs(f *testing.F) {
	f.Add("a", "1", "b", "2", "")
	f.Add(strings.Repeat("k", 200), "", "\x00", "\xff", "v")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3 string) {
		m := map[string]string{k1: v1, k2: v2, k3: v1 + v2}
		if got := pairsOf(m).toMap(); !reflect.DeepEqual(got, m) {
			t.Fatalf("toMap: %#v, want %#v", got, m)
		}
	})
}

// TestCompactObjectAccessors: the compact form's metav1.Object methods behave as
// metav1.ObjectMeta's (managedFields aside, which the caches drop, and timestamps to the second,
// the API's precision), whatever is set, and the rare fields cost nothing once cleared.
func TestCompactObjectAccessors(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	grace := int64(30)
	steps := []struct {
		name string
		set  func(metav1.Object)
	}{
		{"name", func(o metav1.Object) { o.SetName("acme") }},
		{"namespace", func(o metav1.Object) { o.SetNamespace("tenant-a") }},
		{"no name", func(o metav1.Object) { o.SetName("") }},
		{"no namespace", func(o metav1.Object) { o.SetNamespace("") }},
		{"name alone", func(o metav1.Object) { o.SetName("acme") }},
		{"namespace with a slash", func(o metav1.Object) { o.SetNamespace("a/b") }},
		{"name with a slash", func(o metav1.Object) { o.SetName("c/d") }},
		{"namespace again", func(o metav1.Object) { o.SetNamespace("tenant-a") }},
		{"name again", func(o metav1.Object) { o.SetName("acme") }},
		{"generateName", func(o metav1.Object) { o.SetGenerateName("acme-") }},
		{"uid", func(o metav1.Object) { o.SetUID("6f0e1b2c-0000-4000-8000-000000000001") }},
		{"uid not a UUID", func(o metav1.Object) { o.SetUID("uid-a") }},
		{"uid in capitals", func(o metav1.Object) { o.SetUID("6F0E1B2C-0000-4000-8000-00000000000A") }},
		{"uid of zeros", func(o metav1.Object) { o.SetUID("00000000-0000-0000-0000-000000000000") }},
		{"uid again", func(o metav1.Object) { o.SetUID("6f0e1b2c-0000-4000-8000-0000000000ff") }},
		{"resourceVersion", func(o metav1.Object) { o.SetResourceVersion("42") }},
		{"resourceVersion not a number", func(o metav1.Object) { o.SetResourceVersion("a1") }},
		{"resourceVersion 0", func(o metav1.Object) { o.SetResourceVersion("0") }},
		{"resourceVersion with a leading zero", func(o metav1.Object) { o.SetResourceVersion("042") }},
		{"resourceVersion past uint64", func(o metav1.Object) { o.SetResourceVersion("99999999999999999999") }},
		{"resourceVersion largest", func(o metav1.Object) { o.SetResourceVersion("9999999999999999999") }},
		{"resourceVersion again", func(o metav1.Object) { o.SetResourceVersion("1234567") }},
		{"generation", func(o metav1.Object) { o.SetGeneration(7) }},
		{"selfLink", func(o metav1.Object) { o.SetSelfLink("/apis/x") }},
		{"creationTimestamp", func(o metav1.Object) {
			o.SetCreationTimestamp(metav1.NewTime(time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)))
		}},
		{"deletionTimestamp", func(o metav1.Object) { o.SetDeletionTimestamp(&deleted) }},
		{"grace", func(o metav1.Object) { o.SetDeletionGracePeriodSeconds(&grace) }},
		{"labels", func(o metav1.Object) { o.SetLabels(map[string]string{"a": "1"}) }},
		{"annotations", func(o metav1.Object) { o.SetAnnotations(map[string]string{"b": "2", "c": ""}) }},
		{"finalizers", func(o metav1.Object) { o.SetFinalizers([]string{"x/y"}) }},
		{"no finalizers", func(o metav1.Object) { o.SetFinalizers([]string{}) }},
		{"finalizers again", func(o metav1.Object) { o.SetFinalizers([]string{"a", "", "b/c"}) }},
		{"kind", func(o metav1.Object) {
			if k, ok := o.(runtime.Object); ok {
				k.GetObjectKind().SetGroupVersionKind(tenantGVK)
			}
		}},
		{"owners", func(o metav1.Object) {
			o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "K", Name: "o", UID: "u"}})
		}},
		{"clear rare", func(o metav1.Object) {
			o.SetGenerateName("")
			o.SetSelfLink("")
			o.SetDeletionTimestamp(nil)
			o.SetDeletionGracePeriodSeconds(nil)
			o.SetOwnerReferences(nil)
		}},
		{"clear maps", func(o metav1.Object) { o.SetLabels(nil); o.SetAnnotations(map[string]string{}) }},
	}
	c, m := &compactObject{}, &metav1.ObjectMeta{}
	c.SetCreationTimestamp(metav1.Time{})
	for _, step := range steps {
		step.set(c)
		step.set(m)
		got, want := snapshot(c), snapshot(m)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after %s:\n got %#v\nwant %#v", step.name, got, want)
		}
	}
	if c.rare != nil {
		t.Fatalf("rare metadata kept after every rare field was cleared: %+v", c.rare)
	}
	if got := c.GetUID(); got != "6f0e1b2c-0000-4000-8000-0000000000ff" || c.uid == ([16]byte{}) {
		t.Fatalf("a UUID is held as 16 bytes and given back as set: %q %x", got, c.uid)
	}
	if c.resourceVersion != 1234567 {
		t.Fatalf("a numeric resourceVersion is held as %d", c.resourceVersion)
	}
	if got := c.GetObjectKind().GroupVersionKind(); got != tenantGVK {
		t.Fatalf("kind %v", got)
	}
	// An entry's size is what every cached object costs (make bench's heap figure): 144 bytes,
	// a Go size class; a field more moves every entry to the next class.
	if size := unsafe.Sizeof(compactObject{}); size > 144 {
		t.Fatalf("compactObject is %d bytes, more than 144", size)
	}
}

// snapshot is what metav1.Object's getters return, comparable across implementations.
func snapshot(o metav1.Object) []any {
	return []any{o.GetName(), o.GetNamespace(), o.GetGenerateName(), o.GetUID(), o.GetResourceVersion(),
		o.GetGeneration(), o.GetSelfLink(), o.GetCreationTimestamp().Unix(), o.GetCreationTimestamp().Time.IsZero(),
		o.GetDeletionTimestamp(), o.GetDeletionGracePeriodSeconds(), o.GetLabels(), o.GetAnnotations(),
		o.GetFinalizers(), o.GetOwnerReferences()}
}

// FuzzUUID: a UID held as 16 bytes gives back exactly the string it was parsed from; anything
// else is refused (and kept as a string).
func FuzzUUID(f *testing.F) {
	f.Add("0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a00")
	f.Add("0F1E2D3C-4B5A-4978-8A6B-5C4D3E2F1A00")
	f.Add("uid-a")
	f.Fuzz(func(t *testing.T, s string) {
		b, ok := parseUUID(s)
		if ok && formatUUID(b) != s {
			t.Fatalf("%q parsed, formats as %q", s, formatUUID(b))
		}
		c := &compactObject{}
		c.SetUID(types.UID(s))
		if got := c.GetUID(); got != types.UID(s) {
			t.Fatalf("SetUID(%q): GetUID %q", s, got)
		}
	})
}
