package compact

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tenantEvent is a watch event as the API server sends a Tenant's, managedFields included.
const tenantEvent = `{"type":"MODIFIED","object":{"apiVersion":"demo.regionsync.dev/v1alpha1","kind":"Tenant","metadata":{"annotations":{"regionsync.dev/remote-generation":"1","regionsync.dev/local-generation":"1"},"creationTimestamp":"2026-11-26T12:00:00Z","finalizers":["regionsync.dev/sync"],"generation":1,"labels":{"regionsync.dev/region":"us-east-1","bench.regionsync.dev/set":"tenant-base"},"managedFields":[{"apiVersion":"demo.regionsync.dev/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:displayName":{},"f:plan":{},"f:replicas":{}},"f:metadata":{"f:labels":{".":{},"f:regionsync.dev/region":{}}}},"manager":"bench.test","operation":"Update","time":"2026-11-26T12:00:00Z"},{"apiVersion":"demo.regionsync.dev/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:regionsync.dev/local-generation":{},"f:regionsync.dev/remote-generation":{}},"f:finalizers":{".":{},"v:\"regionsync.dev/sync\"":{}}}},"manager":"regionsync","operation":"Update","time":"2026-11-26T12:00:01Z"}],"name":"t00001-us-east-1","namespace":"tenant-base-000","resourceVersion":"123456","uid":"0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a00"},"spec":{"displayName":"Tenant t00001","plan":"team","replicas":1},"status":{"conditions":[{"type":"Ready","status":"True","reason":"Synced","lastTransitionTime":"2026-11-26T12:00:02Z"}],"endpoint":"https://t00001.example"}}}` + "\n"

// FuzzDecodeLikeTransform: an object decoded straight into the compact form holds what the
// transform makes of the same object decoded as unstructured: its metadata reads the same and it
// expands into the same object.
func FuzzDecodeLikeTransform(f *testing.F) {
	f.Add(`{"apiVersion":"demo.regionsync.dev/v1alpha1","kind":"Tenant","metadata":{"name":"a","namespace":"n","labels":{"k":"v"},"annotations":{"a":""},"finalizers":["f"],"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u","controller":true}],"creationTimestamp":"2026-01-02T03:04:05Z","deletionTimestamp":"2026-01-02T03:04:06Z","deletionGracePeriodSeconds":0,"managedFields":[{"manager":"m"}]},"spec":{"f":1.5,"i":7,"b":true,"n":null,"l":[1,"x",{"y":[]}],"big":12345678901234567890},"status":{}}`)
	f.Add(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","generation":9,"resourceVersion":"3"},"data":{"x":"y<&>"},"type":"t","z\u00e9":"\u2028"}`)
	f.Add(`{"metadata":{"name":"c"}}`)
	f.Add(`{"kind":"Tenant","metadata":{"name":"e","resourceVersion":"0","finalizers":[],"labels":{},"annotations":{"a":"x"}},"status":null}`)
	f.Add(`{"metadata":{"name":"f","resourceVersion":"a7","uid":"not-a-uuid","finalizers":["","x"]}}`)
	f.Add(`{"metadata":{"name":"g/h","namespace":"i/j","generateName":"g-","selfLink":"/x"}}`)
	f.Add(`{"metadata":{"resourceVersion":"77","annotations":{"k8s.io/initial-events-end":"true"},"creationTimestamp":null}}`)
	tr := TransformAllUnstructured() // whatever the kind, as the document says it

	f.Fuzz(func(t *testing.T, doc string) {
		u := unstructuredDoc(doc)
		if u == nil {
			return
		}
		served := true // metadata as an API server serves it: it converts to ObjectMeta and back
		if md, ok := u.Object["metadata"].(map[string]any); ok {
			var typed metav1.ObjectMeta
			if runtime.DefaultUnstructuredConverter.FromUnstructured(md, &typed) != nil {
				return // not metadata at all
			}
			back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&typed)
			served = err == nil && reflect.DeepEqual(withoutNilTimestamp(back), withoutNilTimestamp(md))
		}
		want := compacted(t, tr, u)
		got, err := decodeJSON([]byte(doc))
		if err != nil {
			if served {
				t.Fatalf("decoded as unstructured but not compacted: %v", err)
			}
			return // refused, not misread (a grace period past int64, a generation of 1.5)
		}
		if !reflect.DeepEqual(snapshot(got), snapshot(want)) || got.typeMeta() != want.typeMeta() {
			t.Fatalf("metadata:\n got %v %v\nwant %v %v", got.typeMeta(), snapshot(got), want.typeMeta(), snapshot(want))
		}
		// Expanded: the metadata as the transform's object expands it, every other field as
		// the document has it (the transform re-encodes them, turning a 1.0 into a 1; this
		// decoder keeps their JSON).
		g, w := got.DeepCopyObject().(*unstructured.Unstructured), want.DeepCopyObject().(*unstructured.Unstructured)
		for k, v := range u.Object {
			if k != "metadata" && k != "apiVersion" && k != "kind" {
				w.Object[k] = v
			}
		}
		if !reflect.DeepEqual(g.Object, w.Object) {
			t.Fatalf("expanded:\n got %#v\nwant %#v", g.Object, w.Object)
		}
	})
}

// TestDecodeBadInput: what is not a JSON object is an error naming the part that is wrong, never
// a panic or a half-filled object.
func TestDecodeBadInput(t *testing.T) {
	for doc, want := range map[string]string{
		`[]`:                                     "object:",
		`null`:                                   "object: not a JSON object",
		`{"kind":1}`:                             "kind:",
		`{"apiVersion":{}}`:                      "apiVersion:",
		`{"metadata":{"generation":"x"}}`:        "metadata:",
		`{"metadata":{"labels":{"a":1}}}`:        "metadata:",
		`{"metadata":{"creationTimestamp":"x"}}`: "metadata:",
		`{"spec":`:                               "object:",
	} {
		obj, err := decodeWatched([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, %v; want an error with %q", doc, obj, err, want)
		}
	}
}

// TestWatchStream: a stream of watch events, as the API server frames them, decodes through the
// compact serializer: objects compacted, an event of another shape (spaces) and one longer than
// every buffer (a 200 KB annotation) whole, a bookmark's resourceVersion and annotation readable,
// an ERROR event's Status (a watch that expired) as a *metav1.Status the reflector relists on.
func TestWatchStream(t *testing.T) {
	long := strings.Repeat("y", 200<<10)
	stream := tenantEvent +
		`{ "object" : {"kind":"Tenant","metadata":{"name":"spaced","annotations":{"long":"` + long + `"}}}, "type" : "ADDED" }` + "\n\n" +
		`{"type":"BOOKMARK","object":{"kind":"Tenant","apiVersion":"demo.regionsync.dev/v1alpha1","metadata":{"resourceVersion":"123460","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (123456)","reason":"Expired","code":410}}` + "\n"
	w := watch.NewStreamWatcher(eventDecoder(io.NopCloser(strings.NewReader(stream))), nil)
	defer w.Stop()

	e := <-w.ResultChan()
	c, ok := e.Object.(*compactObject)
	if e.Type != watch.Modified || !ok {
		t.Fatalf("first event: %s %T", e.Type, e.Object)
	}
	if c.GetName() != "t00001-us-east-1" || c.GetNamespace() != "tenant-base-000" || c.GetResourceVersion() != "123456" ||
		c.GetLabels()["regionsync.dev/region"] != "us-east-1" || c.GetFinalizers()[0] != "regionsync.dev/sync" ||
		c.GetObjectKind().GroupVersionKind() != tenantGVK || c.GetManagedFields() != nil {
		t.Fatalf("first event's object: %+v", c)
	}
	u := c.DeepCopyObject().(*unstructured.Unstructured)
	if v, _, _ := unstructured.NestedString(u.Object, "status", "endpoint"); v != "https://t00001.example" {
		t.Fatalf("status.endpoint: %q", v)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "managedFields"); found {
		t.Fatal("managedFields held")
	}

	e = <-w.ResultChan()
	if sp, ok := e.Object.(*compactObject); e.Type != watch.Added || !ok || sp.GetName() != "spaced" || sp.GetAnnotations()["long"] != long {
		t.Fatalf("second event: %s %T", e.Type, e.Object)
	}

	e = <-w.ResultChan()
	b, ok := e.Object.(*compactObject)
	if e.Type != watch.Bookmark || !ok || b.GetResourceVersion() != "123460" || b.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("bookmark: %s %#v", e.Type, e.Object)
	}

	e = <-w.ResultChan()
	s, ok := e.Object.(*metav1.Status)
	if e.Type != watch.Error || !ok || s.Code != http.StatusGone || s.Reason != metav1.StatusReasonExpired {
		t.Fatalf("error event: %s %#v", e.Type, e.Object)
	}
	if _, open := <-w.ResultChan(); open {
		t.Fatal("watch still open after the stream ended")
	}
}

// TestWatchStreamCut: an answer that ends inside an event (a proxy cutting the connection) ends
// the watch quietly, as client-go's framer does, so the reflector resumes from the last
// resourceVersion rather than seeing a decoding error and listing everything again.
func TestWatchStreamCut(t *testing.T) {
	w := watch.NewStreamWatcher(eventDecoder(io.NopCloser(strings.NewReader(tenantEvent+`{"type":"ADDED","object":{"kind":"Ten`))), nil)
	defer w.Stop()
	if e := <-w.ResultChan(); e.Type != watch.Modified {
		t.Fatalf("first event: %s %#v", e.Type, e.Object)
	}
	if e, open := <-w.ResultChan(); open {
		t.Fatalf("after the cut: %s %#v; want the watch closed", e.Type, e.Object)
	}
}

// eventDecoder is the watch decoder client-go builds from the compact serializer (as
// rest.Request.Watch does for an answer of its media type).
func eventDecoder(body io.ReadCloser) watch.Decoder {
	info := watchSerializer.SupportedMediaTypes()[0]
	frames := info.StreamSerializer.NewFrameReader(body)
	return restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), info.Serializer)
}

// BenchmarkWatchEvent compares, per Tenant watch event (1.8 KB with its managedFields), what an
// informer of a compacted kind spends before the object is in its store: client-go's unstructured
// decoding followed by the cache transform, against the compact decoder.
func BenchmarkWatchEvent(b *testing.B) {
	tr := Transform([]schema.GroupVersionKind{tenantGVK})
	run := func(b *testing.B, decoder func(io.ReadCloser) watch.Decoder) {
		d := decoder(io.NopCloser(bytes.NewReader(bytes.Repeat([]byte(tenantEvent), b.N))))
		b.ReportAllocs()
		b.SetBytes(int64(len(tenantEvent)))
		b.ResetTimer()
		for range b.N {
			_, obj, err := d.Decode()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tr(obj); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("unstructured+transform", func(b *testing.B) {
		// The dynamic client's decoding of a watch answer (controller-runtime's unstructured
		// informers): its JSON framer, envelope and object decoders.
		var info runtime.SerializerInfo
		for _, i := range dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer.SupportedMediaTypes() {
			if i.MediaType == runtime.ContentTypeJSON {
				info = i
			}
		}
		run(b, func(body io.ReadCloser) watch.Decoder {
			frames := info.StreamSerializer.NewFrameReader(body)
			return restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), info.Serializer)
		})
	})
	b.Run("compact", func(b *testing.B) { run(b, eventDecoder) })
}

// TestOwnedKinds: the decoder serves a compacted kind only where controller-runtime's request
// would carry nothing but the cache's default label selector.
func TestOwnedKinds(t *testing.T) {
	configMap, secret := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	cm := &unstructured.Unstructured{}
	cm.SetGroupVersionKind(configMap)
	compacted := func(gvk schema.GroupVersionKind) bool { return gvk != secret }
	for name, tc := range map[string]struct {
		opts cache.Options
		want map[schema.GroupVersionKind]bool // nil: the decoder serves no kind
	}{
		"label selector only":     {cache.Options{DefaultLabelSelector: labels.Everything()}, map[schema.GroupVersionKind]bool{tenantGVK: true, configMap: true, secret: false}},
		"a kind's own options":    {cache.Options{ByObject: map[client.Object]cache.ByObject{cm: {Label: labels.Everything()}}}, map[schema.GroupVersionKind]bool{tenantGVK: true, configMap: false}},
		"namespaces":              {cache.Options{DefaultNamespaces: map[string]cache.Config{"a": {}}}, nil},
		"a field selector":        {cache.Options{DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", "x")}, nil},
		"an empty field selector": {cache.Options{DefaultFieldSelector: fields.Everything()}, map[schema.GroupVersionKind]bool{tenantGVK: true}},
		"bookmarks off":           {cache.Options{DefaultEnableWatchBookmarks: ptr.To(false)}, nil},
		"bookmarks on":            {cache.Options{DefaultEnableWatchBookmarks: ptr.To(true)}, map[schema.GroupVersionKind]bool{tenantGVK: true}},
	} {
		tc.opts.Scheme = runtime.NewScheme()
		own, err := ownedKinds(compacted, tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tc.want == nil {
			if own != nil {
				t.Errorf("%s: the decoder serves kinds; want none", name)
			}
			continue
		}
		for gvk, want := range tc.want {
			if got := own(gvk); got != want {
				t.Errorf("%s: %s served %v, want %v", name, gvk.Kind, got, want)
			}
		}
	}
}

// TestWatchRefused: a watch the API server refuses (its answer a Status, not a stream) is the
// API error it names, as with client-go's own decoding, so the reflector backs off or relists as
// it would; the request carries the cache's label selector and the reflector's options.
func TestWatchRefused(t *testing.T) {
	var query url.Values
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Query()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"tenants.demo.regionsync.dev is forbidden","reason":"Forbidden","code":403}`)
	}))
	defer server.Close()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(tenantGVK, meta.RESTScopeNamespace)
	lw, err := newListWatch(&rest.Config{Host: server.URL}, cache.Options{Mapper: mapper, HTTPClient: server.Client()}, tenantGVK, "regionsync.dev/region=us-east-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "12", SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if !apierrors.IsForbidden(err) || w != nil {
		t.Fatalf("watch: %v, %v; want the API server's Forbidden", w, err)
	}
	for k, want := range map[string]string{"labelSelector": "regionsync.dev/region=us-east-1", "watch": "true", "allowWatchBookmarks": "true",
		"resourceVersion": "12", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"} {
		if got := query.Get(k); got != want {
			t.Errorf("query %s=%q, want %q", k, got, want)
		}
	}
}
