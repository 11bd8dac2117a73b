package syncer

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
// handlers read, through truthful metav1.Object accessors: the fields every object has on their
// own, the rarely present ones behind one pointer, labels and annotations as interned key sets
// with their values rather than maps) and the rest of the object (spec, status, any other
// top-level field) as the JSON it arrived in; short strings shared across objects (label and
// annotation keys and values, finalizers, namespaces, the kind) are interned, so ten thousand
// copies hold one of each. An entry is 232 bytes plus its strings and JSON (metav1.ObjectMeta
// alone is 232).
//
// Readers never see it: DeepCopyObject, which controller-runtime's cache reader calls on every
// Get and List, expands it into the *unstructured.Unstructured the caller asked for (the same
// content as the object the API server sent, managedFields aside). Event handlers receive it
// as a client.Object and read its metadata only.
type compactObject struct {
	metav1.TypeMeta
	// The metadata every object has, as fields of their own: metav1.ObjectMeta is 232 bytes,
	// most of it for fields few objects carry (rare).
	name, namespace, resourceVersion string
	// uid is the UID as the 16 bytes of the UUID API servers generate; any other UID (none is
	// empty) is in rare.
	uid        [16]byte
	generation int64
	// created is the creationTimestamp in Unix seconds, the API's precision (a zero time
	// included: time.Time{}.Unix() converts back to the zero time).
	created    int64
	finalizers []string
	// labels and annotations as stringPairs: interned key sets and the values.
	labels, annotations stringPairs
	// rare is the metadata most objects lack (nil when they do): generateName, selfLink,
	// deletion timestamp and grace period, owner references.
	rare *rareMeta
	// rest is the JSON of the object's top-level fields other than apiVersion, kind and metadata.
	rest []byte
}

// rareMeta is the metadata of a compactObject that most objects lack.
type rareMeta struct {
	generateName, selfLink     string
	uid                        string // a UID that is not a canonical UUID
	deletionTimestamp          *metav1.Time
	deletionGracePeriodSeconds *int64
	ownerReferences            []metav1.OwnerReference
}

var (
	_ runtime.Object            = &compactObject{}
	_ metav1.Object             = &compactObject{}
	_ metav1.ObjectMetaAccessor = &compactObject{}
)

// GetObjectMeta returns c itself.
func (c *compactObject) GetObjectMeta() metav1.Object { return c }

// GetNamespace returns the namespace.
func (c *compactObject) GetNamespace() string { return c.namespace }

// SetNamespace sets the namespace.
func (c *compactObject) SetNamespace(namespace string) { c.namespace = intern(namespace) }

// GetName returns the name.
func (c *compactObject) GetName() string { return c.name }

// SetName sets the name.
func (c *compactObject) SetName(name string) { c.name = name }

// GetGenerateName returns the generateName.
func (c *compactObject) GetGenerateName() string {
	if c.rare == nil {
		return ""
	}
	return c.rare.generateName
}

// SetGenerateName sets the generateName.
func (c *compactObject) SetGenerateName(name string) {
	c.setRare(func(r *rareMeta) { r.generateName = name })
}

// GetUID returns the UID.
func (c *compactObject) GetUID() types.UID {
	if c.rare != nil && c.rare.uid != "" {
		return types.UID(c.rare.uid)
	}
	if c.uid == ([16]byte{}) {
		return ""
	}
	return types.UID(formatUUID(c.uid))
}

// SetUID sets the UID.
func (c *compactObject) SetUID(uid types.UID) {
	b, ok := parseUUID(string(uid))
	if !ok || b == ([16]byte{}) {
		b, ok = [16]byte{}, false
	}
	c.uid = b
	other := ""
	if !ok {
		other = string(uid)
	}
	if other != "" || (c.rare != nil && c.rare.uid != "") {
		c.setRare(func(r *rareMeta) { r.uid = other })
	}
}

// parseUUID parses the canonical form of a UUID (lowercase hex, 8-4-4-4-12), the form
// formatUUID gives back: other spellings are not UUIDs here.
func parseUUID(s string) ([16]byte, bool) {
	var b [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := fromHex(s[i])
		lo, ok2 := fromHex(s[i+1])
		if !ok1 || !ok2 {
			return b, false
		}
		b[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return b, true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// formatUUID is the canonical form of b.
func formatUUID(b [16]byte) string {
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// GetResourceVersion returns the resourceVersion.
func (c *compactObject) GetResourceVersion() string { return c.resourceVersion }

// SetResourceVersion sets the resourceVersion.
func (c *compactObject) SetResourceVersion(version string) { c.resourceVersion = version }

// GetGeneration returns the generation.
func (c *compactObject) GetGeneration() int64 { return c.generation }

// SetGeneration sets the generation.
func (c *compactObject) SetGeneration(generation int64) { c.generation = generation }

// GetSelfLink returns the selfLink.
func (c *compactObject) GetSelfLink() string {
	if c.rare == nil {
		return ""
	}
	return c.rare.selfLink
}

// SetSelfLink sets the selfLink.
func (c *compactObject) SetSelfLink(selfLink string) {
	c.setRare(func(r *rareMeta) { r.selfLink = selfLink })
}

// GetCreationTimestamp returns the creationTimestamp (to the second, the API's precision).
func (c *compactObject) GetCreationTimestamp() metav1.Time {
	return metav1.NewTime(time.Unix(c.created, 0).UTC())
}

// SetCreationTimestamp sets the creationTimestamp (to the second).
func (c *compactObject) SetCreationTimestamp(timestamp metav1.Time) { c.created = timestamp.Unix() }

// GetDeletionTimestamp returns the deletionTimestamp (nil when the object is not being deleted).
func (c *compactObject) GetDeletionTimestamp() *metav1.Time {
	if c.rare == nil {
		return nil
	}
	return c.rare.deletionTimestamp
}

// SetDeletionTimestamp sets the deletionTimestamp.
func (c *compactObject) SetDeletionTimestamp(timestamp *metav1.Time) {
	c.setRare(func(r *rareMeta) { r.deletionTimestamp = timestamp })
}

// GetDeletionGracePeriodSeconds returns the deletion grace period (nil when unset).
func (c *compactObject) GetDeletionGracePeriodSeconds() *int64 {
	if c.rare == nil {
		return nil
	}
	return c.rare.deletionGracePeriodSeconds
}

// SetDeletionGracePeriodSeconds sets the deletion grace period.
func (c *compactObject) SetDeletionGracePeriodSeconds(seconds *int64) {
	c.setRare(func(r *rareMeta) { r.deletionGracePeriodSeconds = seconds })
}

// GetLabels returns a new map of the labels (nil when there are none).
func (c *compactObject) GetLabels() map[string]string { return c.labels.toMap() }

// SetLabels replaces the labels.
func (c *compactObject) SetLabels(labels map[string]string) { c.labels = pairsOf(labels) }

// GetAnnotations returns a new map of the annotations (nil when there are none).
func (c *compactObject) GetAnnotations() map[string]string { return c.annotations.toMap() }

// SetAnnotations replaces the annotations.
func (c *compactObject) SetAnnotations(annotations map[string]string) {
	c.annotations = pairsOf(annotations)
}

// GetFinalizers returns the finalizers.
func (c *compactObject) GetFinalizers() []string { return c.finalizers }

// SetFinalizers replaces the finalizers.
func (c *compactObject) SetFinalizers(finalizers []string) { c.finalizers = internAll(finalizers) }

// GetOwnerReferences returns the owner references.
func (c *compactObject) GetOwnerReferences() []metav1.OwnerReference {
	if c.rare == nil {
		return nil
	}
	return c.rare.ownerReferences
}

// SetOwnerReferences replaces the owner references.
func (c *compactObject) SetOwnerReferences(references []metav1.OwnerReference) {
	c.setRare(func(r *rareMeta) { r.ownerReferences = references })
}

// GetManagedFields returns nil: the caches drop managedFields.
func (c *compactObject) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }

// SetManagedFields does nothing: the caches drop managedFields.
func (c *compactObject) SetManagedFields([]metav1.ManagedFieldsEntry) {}

// setRare applies set to the rare metadata, which exists only while one of its fields is set.
func (c *compactObject) setRare(set func(*rareMeta)) {
	r := rareMeta{}
	if c.rare != nil {
		r = *c.rare
	}
	set(&r)
	if r.generateName == "" && r.selfLink == "" && r.uid == "" && r.deletionTimestamp == nil && r.deletionGracePeriodSeconds == nil && r.ownerReferences == nil {
		c.rare = nil
		return
	}
	c.rare = &r
}

// internAll interns every string of list in place and returns it.
func internAll(list []string) []string {
	for i := range list {
		list[i] = intern(list[i])
	}
	return list
}

// stringPairs is a string map held as its keys, sorted and joined into one interned string
// (the objects of a kind carry the same few sets of label and annotation keys, so ten thousand
// objects share one copy of each set and hold 8 bytes for it), and the values in key order. A
// Go map would cost a whole group of eight slots (~340 bytes) even for the single label most
// objects carry, and a key string per entry. No values (nil) is no map; an empty slice, an empty
// one.
type stringPairs struct {
	// keys is every key, in sorted order, each preceded by its length as a uvarint; unset when
	// values is empty.
	keys   unique.Handle[string]
	values []string
}

func pairsOf(m map[string]string) stringPairs {
	if m == nil {
		return stringPairs{}
	}
	keys := make([]string, 0, len(m))
	n := 0
	for k := range m {
		keys = append(keys, k)
		n += len(k) + binary.MaxVarintLen64
	}
	slices.Sort(keys)
	p := stringPairs{values: make([]string, len(keys))}
	if len(keys) == 0 {
		return p
	}
	joined := make([]byte, 0, n)
	for i, k := range keys {
		joined = binary.AppendUvarint(joined, uint64(len(k)))
		joined = append(joined, k...)
		p.values[i] = internUpTo(m[k], maxInternedValue)
	}
	p.keys = unique.Make(string(joined))
	return p
}

// each calls f with every key and value in key order.
func (p stringPairs) each(f func(k, v string)) {
	if len(p.values) == 0 {
		return
	}
	keys := p.keys.Value()
	for _, v := range p.values {
		// The key's length, a uvarint written by pairsOf.
		n, shift, i := 0, 0, 0
		for ; keys[i] >= 0x80; i++ {
			n |= int(keys[i]&0x7f) << shift
			shift += 7
		}
		n |= int(keys[i]) << shift
		keys = keys[i+1:]
		f(keys[:n], v)
		keys = keys[n:]
	}
}

// toAnyMap is the pairs as an unstructured object's map.
func (p stringPairs) toAnyMap() map[string]any {
	m := make(map[string]any, len(p.values))
	p.each(func(k, v string) { m[k] = v })
	return m
}

func (p stringPairs) toMap() map[string]string {
	if p.values == nil {
		return nil
	}
	m := make(map[string]string, len(p.values))
	p.each(func(k, v string) { m[k] = v })
	return m
}

// compact converts u (managedFields already dropped) into its compact form.
func compact(u *unstructured.Unstructured) (*compactObject, error) {
	c := &compactObject{}
	c.APIVersion = intern(u.GetAPIVersion())
	c.Kind = intern(u.GetKind())
	var m metav1.ObjectMeta
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &m); err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
	}
	c.name, c.namespace, c.resourceVersion = m.Name, intern(m.Namespace), m.ResourceVersion
	c.generation, c.created = m.Generation, m.CreationTimestamp.Unix()
	c.finalizers = internAll(m.Finalizers)
	c.labels, c.annotations = pairsOf(m.Labels), pairsOf(m.Annotations)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = intern(r.APIVersion), intern(r.Kind)
	}
	var otherUID string
	if b, ok := parseUUID(string(m.UID)); ok && b != ([16]byte{}) {
		c.uid = b
	} else {
		otherUID = string(m.UID)
	}
	if m.GenerateName != "" || m.GetSelfLink() != "" || otherUID != "" || m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil || m.OwnerReferences != nil {
		c.rare = &rareMeta{generateName: m.GenerateName, selfLink: m.GetSelfLink(), uid: otherUID, deletionTimestamp: m.DeletionTimestamp,
			deletionGracePeriodSeconds: m.DeletionGracePeriodSeconds, ownerReferences: m.OwnerReferences}
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
		panic(fmt.Sprintf("cached %s %s/%s does not expand: %v", c.Kind, c.namespace, c.name, err))
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
	// The embedded ObjectMeta has no labels or annotations: they go into the map directly, as
	// the API server omits them (empty maps included).
	m := metav1.ObjectMeta{
		Name: c.name, Namespace: c.namespace, UID: c.GetUID(), ResourceVersion: c.resourceVersion,
		Generation: c.generation, CreationTimestamp: c.GetCreationTimestamp(), Finalizers: c.finalizers,
	}
	if r := c.rare; r != nil {
		m.GenerateName, m.DeletionTimestamp = r.generateName, r.deletionTimestamp
		m.SetSelfLink(r.selfLink) // no longer set by API servers, kept as served
		m.DeletionGracePeriodSeconds, m.OwnerReferences = r.deletionGracePeriodSeconds, r.ownerReferences
	}
	md, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&m)
	if err != nil {
		return nil, err
	}
	if md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	if len(c.labels.values) > 0 {
		md["labels"] = c.labels.toAnyMap()
	}
	if len(c.annotations.values) > 0 {
		md["annotations"] = c.annotations.toAnyMap()
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
