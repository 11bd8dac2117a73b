package syncer

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// sharing nothing with the cache; short shared strings are interned, unique and long ones not;
// other kinds and typed objects are only stripped of managedFields.
func TestCacheTransform(t *testing.T) {
	a, b := tenantJSON(t, "acme", "uid-a"), tenantJSON(t, "beta", "uid-b")
	want := a.DeepCopy()
	unstructured.RemoveNestedField(want.Object, "metadata", "managedFields")
	tr := cacheTransform([]schema.GroupVersionKind{tenantGVK})
	ca, cb := compacted(t, tr, a), compacted(t, tr, b)

	// What informers, indexes, selectors and handlers read.
	var obj metav1.Object = ca
	if obj.GetName() != "acme" || obj.GetNamespace() != "tenant-a" || obj.GetResourceVersion() != "12" ||
		obj.GetGeneration() != 3 || obj.GetLabels()["regionsync.dev/region"] != "us-east-1" ||
		len(obj.GetFinalizers()) != 1 || obj.GetManagedFields() != nil {
		t.Fatalf("compacted metadata: %+v", ca.ObjectMeta)
	}
	if ca.Labels != nil || ca.Annotations != nil { // the embedded ObjectMeta's maps
		t.Fatal("labels or annotations held twice (as maps in ObjectMeta too)")
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

	for _, c := range []struct {
		what   string
		x, y   string
		shared bool
	}{
		{"the kind", ca.Kind, cb.Kind, true},
		{"the namespace", ca.Namespace, cb.Namespace, true},
		{"a label key", keyOf(t, ca.GetLabels(), "regionsync.dev/region"), keyOf(t, cb.GetLabels(), "regionsync.dev/region"), true},
		{"a label value", ca.GetLabels()["regionsync.dev/region"], cb.GetLabels()["regionsync.dev/region"], true},
		{"an annotation value", ca.GetAnnotations()["regionsync.dev/sync-remote-generation"], cb.GetAnnotations()["regionsync.dev/sync-remote-generation"], true},
		{"a finalizer", ca.Finalizers[0], cb.Finalizers[0], true},
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
	tr := cacheTransform([]schema.GroupVersionKind{tenantGVK})
	f.Fuzz(func(t *testing.T, doc string) {
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode([]byte(doc), &tenantGVK, nil)
		if err != nil {
			return
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
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
