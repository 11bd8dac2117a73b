package syncer

import (
	"encoding/json"
	"fmt"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// cacheTransform is the transform of every cache the engine reads its kinds from: managedFields
// are dropped (the agent never reads them) and an unstructured object of one of kinds is stored
// compacted (compactObject). Other objects (typed kinds, kinds a host caches for itself) are
// only stripped of managedFields.
func cacheTransform(kinds []schema.GroupVersionKind) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	compacted := make(map[schema.GroupVersionKind]bool, len(kinds))
	for _, gvk := range kinds {
		compacted[gvk] = true
	}
	return func(in any) (any, error) {
		out, err := strip(in)
		if err != nil {
			return out, err
		}
		u, ok := out.(*unstructured.Unstructured)
		if !ok || !compacted[u.GroupVersionKind()] {
			return out, nil
		}
		c, err := compact(u)
		if err != nil {
			// Never expected (the object was just decoded from JSON); the full object still serves.
			return u, nil //nolint:nilerr // the uncompacted object is a correct cache entry
		}
		return c, nil
	}
}

// compactObject is how the engine's caches hold an object of a synced kind. An unstructured
// object is a tree of maps decoded from JSON: every map, key and value is its own allocation, and
// for the small objects a region syncs the tree costs several times the object's JSON. The
// compact form keeps the metadata typed (what informers, indexes, selectors and the event
// handlers read, with the truthful metav1.Object accessors of ObjectMeta) and the rest of the
// object (spec, status, any other top-level field) as the JSON it arrived in; short strings shared
// across objects (label and annotation keys and values, finalizers, namespaces, the kind) are
// interned, so ten thousand copies hold one of each.
//
// Readers never see it: DeepCopyObject, which controller-runtime's cache reader calls on every
// Get and List, expands it into the *unstructured.Unstructured the caller asked for (the same
// content as the object the API server sent, managedFields aside). Event handlers receive it
// as a client.Object and read its metadata only.
type compactObject struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// rest is the JSON of the object's top-level fields other than apiVersion, kind and metadata.
	rest []byte
}

var _ runtime.Object = &compactObject{}

// compact converts u (managedFields already dropped) into its compact form.
func compact(u *unstructured.Unstructured) (*compactObject, error) {
	c := &compactObject{}
	c.APIVersion = intern(u.GetAPIVersion())
	c.Kind = intern(u.GetKind())
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &c.ObjectMeta); err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
	}
	c.ManagedFields = nil
	c.Namespace = intern(c.Namespace)
	c.Labels = internStrings(c.Labels)
	c.Annotations = internStrings(c.Annotations)
	for i := range c.Finalizers {
		c.Finalizers[i] = intern(c.Finalizers[i])
	}
	for i := range c.OwnerReferences {
		r := &c.OwnerReferences[i]
		r.APIVersion, r.Kind = intern(r.APIVersion), intern(r.Kind)
	}
	rest := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		switch k {
		case "apiVersion", "kind", "metadata":
		default:
			rest[k] = v
		}
	}
	if len(rest) > 0 {
		raw, err := json.Marshal(rest)
		if err != nil {
			return nil, err
		}
		c.rest = raw
	}
	return c, nil
}

// DeepCopyObject returns the object expanded: a new *unstructured.Unstructured sharing nothing
// with the cache (the type every reader of the engine's caches asks for).
func (c *compactObject) DeepCopyObject() runtime.Object {
	u, err := c.expand()
	if err != nil {
		// rest was encoded by compact from decoded JSON values: it always decodes.
		panic(fmt.Sprintf("cached %s %s/%s does not expand: %v", c.Kind, c.Namespace, c.Name, err))
	}
	return u
}

// expand rebuilds the unstructured object c was compacted from.
func (c *compactObject) expand() (*unstructured.Unstructured, error) {
	obj := map[string]any{}
	if len(c.rest) > 0 {
		if err := utiljson.Unmarshal(c.rest, &obj); err != nil {
			return nil, err
		}
	}
	md, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c.ObjectMeta)
	if err != nil {
		return nil, err
	}
	if md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	obj["metadata"] = md
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(c.APIVersion)
	u.SetKind(c.Kind)
	return u, nil
}

// maxInterned is the longest name (key, kind, namespace, finalizer) interned, and
// maxInternedValue the longest label or annotation value: short values (generations, flags,
// region names, tiers) repeat across objects, longer ones (UIDs, hashes, trace parents,
// documents) rarely do, and interning a unique string only adds a table entry.
const (
	maxInterned      = 64
	maxInternedValue = 31
)

// intern returns the canonical copy of a name no longer than maxInterned. Strings are
// immutable, so sharing them between cached objects is safe.
func intern(s string) string { return internUpTo(s, maxInterned) }

func internUpTo(s string, limit int) string {
	if len(s) > limit {
		return s
	}
	return unique.Make(s).Value()
}

// internStrings returns m with interned keys and short values (nil stays nil).
func internStrings(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = internUpTo(v, maxInternedValue)
	}
	return out
}
