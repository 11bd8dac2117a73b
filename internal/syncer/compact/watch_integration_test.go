//go:build integration

package compact

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// TestCompactWatchOnAPIServer: on a real API server, a cache from NewCache streams its initial
// list and watches a compacted kind through the compact decoder, with the cache's label selector
// applied on the server: objects outside it never arrive, an object leaving it is removed, an
// update and a delete arrive, and every object is held compacted without managedFields. A cache
// with options the decoder does not apply (namespaces) keeps controller-runtime's list-watch and
// holds the same objects.
func TestCompactWatchOnAPIServer(t *testing.T) {
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{"a", "b"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(ns, name string, selected bool) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "v\n<&>"}}
		if selected {
			cm.Labels = map[string]string{"sel": "yes"}
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("a", "in-1", true)
	create("b", "in-2", true)
	create("a", "out", false)

	selector := labels.SelectorFromSet(labels.Set{"sel": "yes"})
	// given are opts with the client, scheme and mapper a manager gives its caches.
	given := func(opts cache.Options) cache.Options {
		t.Helper()
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
		if err != nil {
			t.Fatal(err)
		}
		opts.Scheme, opts.Mapper, opts.HTTPClient = clientgoscheme.Scheme, mapper, httpClient
		return opts
	}
	// start starts a cache from NewCache under opts, with the selector, and its ConfigMap informer.
	start := func(opts cache.Options) (cache.Cache, cache.Informer) {
		t.Helper()
		opts.DefaultLabelSelector, opts.DefaultTransform = selector, Transform([]schema.GroupVersionKind{configMapGVK})
		c, err := NewCache([]schema.GroupVersionKind{configMapGVK})(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = c.Start(ctx) }()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(configMapGVK)
		inf, err := c.GetInformer(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if !c.WaitForCacheSync(ctx) {
			t.Fatal("cache did not sync")
		}
		return c, inf
	}
	// held is what c holds: through its informer's store when it has one (objects as held),
	// else (a cache per namespace) through a List.
	held := func(c cache.Cache, inf cache.Informer) (map[string]string, error) {
		out := map[string]string{}
		var objs []any
		if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
			objs = s.GetStore().List()
		} else {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(configMapGVK.GroupVersion().WithKind("ConfigMapList"))
			if err := c.List(ctx, list); err != nil {
				return nil, err
			}
			for i := range list.Items {
				c, err := compact(&list.Items[i])
				if err != nil {
					return nil, err
				}
				objs = append(objs, c)
			}
		}
		for _, obj := range objs {
			c, ok := obj.(*compactObject)
			if !ok {
				return nil, fmt.Errorf("held as %T", obj)
			}
			u := c.DeepCopyObject().(*unstructured.Unstructured)
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "managedFields"); found {
				return nil, fmt.Errorf("%s holds managedFields", c.GetName())
			}
			v, _, _ := unstructured.NestedString(u.Object, "data", "k")
			out[c.GetNamespace()+"/"+c.GetName()] = v
		}
		return out, nil
	}
	eventually := func(c cache.Cache, inf cache.Informer, want map[string]string) {
		t.Helper()
		var got map[string]string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got, err = held(c, inf); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
		}
		t.Fatalf("held %v, want %v", got, want)
	}

	before := decoded.Load()
	c1, inf := start(given(cache.Options{}))
	eventually(c1, inf, map[string]string{"a/in-1": "v\n<&>", "b/in-2": "v\n<&>"})
	if decoded.Load() == before {
		t.Fatal("the initial list did not go through the compact decoder")
	}
	c2, other := start(given(cache.Options{DefaultNamespaces: map[string]cache.Config{"a": {}}}))
	eventually(c2, other, map[string]string{"a/in-1": "v\n<&>"})

	// A cache given none of the client, scheme and mapper (cache.New's defaults) watches
	// through the decoder with the same credentials.
	beforeBare := decoded.Load()
	bare, bareInformer := start(cache.Options{})
	eventually(bare, bareInformer, map[string]string{"a/in-1": "v\n<&>", "b/in-2": "v\n<&>"})
	if decoded.Load() == beforeBare {
		t.Fatal("the cache from default options did not watch through the compact decoder")
	}

	afterStart := decoded.Load()
	in1, err := cs.CoreV1().ConfigMaps("a").Get(ctx, "in-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in1.Data["k"] = "changed"
	if _, err := cs.CoreV1().ConfigMaps("a").Update(ctx, in1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	create("b", "in-3", true)
	if err := cs.CoreV1().ConfigMaps("b").Delete(ctx, "in-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := cs.CoreV1().ConfigMaps("a").Get(ctx, "out", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out.Labels = map[string]string{"sel": "yes"}
	if out, err = cs.CoreV1().ConfigMaps("a").Update(ctx, out, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(c1, inf, map[string]string{"a/in-1": "changed", "a/out": "v\n<&>", "b/in-3": "v\n<&>"})
	eventually(c2, other, map[string]string{"a/in-1": "changed", "a/out": "v\n<&>"})
	// Leaving the selector is a delete to a watch that selects.
	out.Labels = nil
	if _, err := cs.CoreV1().ConfigMaps("a").Update(ctx, out, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(c1, inf, map[string]string{"a/in-1": "changed", "b/in-3": "v\n<&>"})
	eventually(c2, other, map[string]string{"a/in-1": "changed"})
	eventually(bare, bareInformer, map[string]string{"a/in-1": "changed", "b/in-3": "v\n<&>"})
	// The first cache's and the bare one's watches decode compacted, each the five changes
	// (in-1 updated, in-3 created, in-2 deleted, out selected, then not); the namespaced cache's
	// are not counted.
	if n := decoded.Load() - afterStart; n < 10 {
		t.Fatalf("the compact decoder read %d objects of the watches' changes, want at least 10", n)
	}
}
