package syncer

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/regionsync/regionsync/internal/shard"
)

// typedCacheReader lets the engine, which works on unstructured objects, read kinds the host
// caches as typed objects from the host's own informers: a typed kind is read as its Go type
// and converted, so the host's cache holds one informer per kind, not a typed and an
// unstructured one. Kinds not listed in typed pass through unchanged.
type typedCacheReader struct {
	reader client.Reader
	scheme *runtime.Scheme
	typed  map[schema.GroupVersionKind]bool
}

var _ client.Reader = typedCacheReader{}

// Get reads key into obj; an unstructured obj of a typed kind is read typed and converted.
func (t typedCacheReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !t.typed[u.GroupVersionKind()] {
		return t.reader.Get(ctx, key, obj, opts...)
	}
	gvk := u.GroupVersionKind()
	typed, err := t.newTyped(gvk)
	if err != nil {
		return err
	}
	if err := t.reader.Get(ctx, key, typed, opts...); err != nil {
		return err
	}
	return toUnstructured(typed, gvk, u)
}

// List lists into list; an unstructured list of a typed kind is listed typed and converted.
func (t typedCacheReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ul, ok := list.(*unstructured.UnstructuredList)
	if !ok {
		return t.reader.List(ctx, list, opts...)
	}
	listGVK := ul.GroupVersionKind()
	gvk := listGVK.GroupVersion().WithKind(strings.TrimSuffix(listGVK.Kind, "List"))
	if !t.typed[gvk] {
		return t.reader.List(ctx, list, opts...)
	}
	obj, err := t.scheme.New(listGVK)
	if err != nil {
		return fmt.Errorf("typed list of %s: %w", shard.KindName(gvk), err)
	}
	typedList, ok := obj.(client.ObjectList)
	if !ok {
		return fmt.Errorf("typed list of %s is not a list", shard.KindName(gvk))
	}
	if err := t.reader.List(ctx, typedList, opts...); err != nil {
		return err
	}
	items, err := meta.ExtractList(typedList)
	if err != nil {
		return err
	}
	ul.Items = make([]unstructured.Unstructured, len(items))
	for i, item := range items {
		if err := toUnstructured(item, gvk, &ul.Items[i]); err != nil {
			return err
		}
	}
	ul.SetResourceVersion(typedList.GetResourceVersion())
	return nil
}

func (t typedCacheReader) newTyped(gvk schema.GroupVersionKind) (client.Object, error) {
	return newTypedObject(t.scheme, gvk)
}

// newTypedObject is a new object of the Go type that s registers for gvk.
func newTypedObject(s *runtime.Scheme, gvk schema.GroupVersionKind) (client.Object, error) {
	obj, err := s.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("typed %s: %w", shard.KindName(gvk), err)
	}
	o, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("typed %s is not a client.Object", shard.KindName(gvk))
	}
	return o, nil
}

// toUnstructured converts a typed object into out. Top-level fields that the Go type renders as
// empty objects although the API server omits them ("status": {}) are dropped, so that a typed
// copy compares equal to what management serves for the same content.
func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind, out *unstructured.Unstructured) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %s: %w", shard.KindName(gvk), err)
	}
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(sub) == 0 && k != "metadata" {
			delete(m, k)
		}
	}
	if md, ok := m["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	out.SetUnstructuredContent(m)
	out.SetGroupVersionKind(gvk)
	return nil
}

// newLocalClient builds the engine's client for the local cluster: writes go to the API server,
// reads of the managed kinds come from the manager's cache (typed kinds through the host's typed
// informers), whatever client options the host built its manager with.
func newLocalClient(mgr manager.Manager, typed map[schema.GroupVersionKind]bool) (client.Client, error) {
	return client.New(mgr.GetConfig(), client.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		Cache: &client.CacheOptions{
			Reader:       typedCacheReader{reader: mgr.GetCache(), scheme: mgr.GetScheme(), typed: typed},
			Unstructured: true,
		},
	})
}
