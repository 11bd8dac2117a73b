// Package compact holds the objects of the engine's caches (and of the hub's cache of per-region
// objects) in a compact form: the metadata every object has as fields of their own, label and
// annotation key sets interned once, rare fields behind one pointer, UIDs as 16 bytes. Transform
// and TransformAllUnstructured are the caches' transforms; a compact object expands back into
// the unstructured object it was made from when a client reads it.
package compact

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// Transform is the transform of every cache the engine reads its kinds from: managedFields
// are dropped (the agent never reads them) and an unstructured object of one of kinds is stored
// compacted (compactObject). Other objects (typed kinds, kinds a host caches for itself) are
// only stripped of managedFields.
func Transform(kinds []schema.GroupVersionKind) toolscache.TransformFunc {
	compacted := make(map[schema.GroupVersionKind]bool, len(kinds))
	for _, gvk := range kinds {
		compacted[gvk] = true
	}
	return transform(func(gvk schema.GroupVersionKind) bool { return compacted[gvk] })
}

// TransformAllUnstructured is Transform for a cache whose unstructured objects are all held
// compacted, whatever their kind (the hub's per-region objects, of the kinds Distributions
// place); typed objects are only stripped of managedFields.
func TransformAllUnstructured() toolscache.TransformFunc {
	return transform(func(schema.GroupVersionKind) bool { return true })
}

func transform(compacted func(schema.GroupVersionKind) bool) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(in any) (any, error) {
		if c, ok := in.(*compactObject); ok {
			return c, nil // decoded compacted from a watch (NewCache)
		}
		u, ok := in.(*unstructured.Unstructured)
		if !ok {
			return strip(in)
		}
		// Deleted from the map directly: the accessor's GetManagedFields, which
		// cache.TransformStripManagedFields calls to learn whether there are any, converts them
		// all into Go structs first (a tenth of a warm standby's CPU during an initial sync).
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
		if !compacted(u.GroupVersionKind()) {
			return u, nil
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
// annotation keys and values, finalizer lists, namespaces, the kind) are interned, so ten
// thousand copies hold one of each. An entry is 144 bytes plus its "namespace/name" and what it
// holds uniquely (long label and annotation values, the JSON); metav1.ObjectMeta alone is 232.
//
// Readers never see it: DeepCopyObject, which controller-runtime's cache reader calls on every
// Get and List, expands it into the *unstructured.Unstructured the caller asked for (the same
// content as the object the API server sent, managedFields aside). Event handlers receive it
// as a client.Object and read its metadata only.
type compactObject struct {
	// typ is the apiVersion and kind, interned (the zero handle: neither is set).
	typ unique.Handle[metav1.TypeMeta]
	// The metadata every object has, as fields of their own: metav1.ObjectMeta is 232 bytes,
	// most of it for fields few objects carry (rare).
	//
	// ref is the namespace and the name as "namespace/name", one string for both; "" when
	// neither is set. A namespace holding a "/" (no API server serves one) is in rare.
	ref string
	// resourceVersion is the resourceVersion when it is a canonical decimal number other than 0
	// (what etcd-backed API servers serve); 0 with rare.resourceVersion for any other string.
	resourceVersion uint64
	// uid is the UID as the 16 bytes of the UUID API servers generate; any other UID (none is
	// empty) is in rare.
	uid        [16]byte
	generation int64
	// created is the creationTimestamp in Unix seconds, the API's precision (a zero time
	// included: time.Time{}.Unix() converts back to the zero time).
	created int64
	// finalizers is the finalizer list, interned (objects of a kind share one or two lists).
	finalizers stringList
	// labels and annotations as stringPairs: interned key sets and the values.
	labels, annotations stringPairs
	// rare is the metadata most objects lack (nil when they do): generateName, selfLink,
	// deletion timestamp and grace period, owner references, a UID or resourceVersion of an
	// unusual form.
	rare *rareMeta
	// rest is the JSON of the object's top-level fields other than apiVersion, kind and metadata
	// (a string: it is never changed, and a string header is a word shorter than a slice's).
	rest string
}

// rareMeta is the metadata of a compactObject that most objects lack.
type rareMeta struct {
	generateName, selfLink     string
	uid                        string // a UID that is not a canonical UUID
	namespace                  string // a namespace holding a "/"
	resourceVersion            string // a resourceVersion compactObject cannot hold as a number
	deletionTimestamp          *metav1.Time
	deletionGracePeriodSeconds *int64
	ownerReferences            []metav1.OwnerReference
}

// GetObjectKind returns the object's apiVersion and kind, settable.
func (c *compactObject) GetObjectKind() schema.ObjectKind { return compactKind{c} }

// typeMeta is the object's apiVersion and kind.
func (c *compactObject) typeMeta() metav1.TypeMeta {
	if c.typ == (unique.Handle[metav1.TypeMeta]{}) {
		return metav1.TypeMeta{}
	}
	return c.typ.Value()
}

// compactKind is a compactObject's schema.ObjectKind: setting the kind interns the new pair.
type compactKind struct{ c *compactObject }

// SetGroupVersionKind sets the apiVersion and kind.
func (k compactKind) SetGroupVersionKind(gvk schema.GroupVersionKind) {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	k.c.setType(apiVersion, kind)
}

// GroupVersionKind returns the apiVersion and kind as a GroupVersionKind.
func (k compactKind) GroupVersionKind() schema.GroupVersionKind {
	tm := k.c.typeMeta()
	return schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
}

func (c *compactObject) setType(apiVersion, kind string) {
	if apiVersion == "" && kind == "" {
		c.typ = unique.Handle[metav1.TypeMeta]{}
		return
	}
	c.typ = unique.Make(metav1.TypeMeta{APIVersion: apiVersion, Kind: kind})
}

var (
	_ runtime.Object            = &compactObject{}
	_ metav1.Object             = &compactObject{}
	_ metav1.ObjectMetaAccessor = &compactObject{}
)

// GetObjectMeta returns c itself.
func (c *compactObject) GetObjectMeta() metav1.Object { return c }

// GetNamespace returns the namespace.
func (c *compactObject) GetNamespace() string {
	namespace, _ := c.split()
	return namespace
}

// SetNamespace sets the namespace.
func (c *compactObject) SetNamespace(namespace string) { c.setRef(namespace, c.GetName()) }

// GetName returns the name.
func (c *compactObject) GetName() string {
	_, name := c.split()
	return name
}

// SetName sets the name.
func (c *compactObject) SetName(name string) { c.setRef(c.GetNamespace(), name) }

// split is the namespace and the name, substrings of ref.
func (c *compactObject) split() (namespace, name string) {
	namespace, name, _ = strings.Cut(c.ref, "/")
	if c.rare != nil && c.rare.namespace != "" {
		namespace = c.rare.namespace
	}
	return namespace, name
}

func (c *compactObject) setRef(namespace, name string) {
	other := ""
	if strings.Contains(namespace, "/") {
		namespace, other = "", namespace
	}
	if other != "" || (c.rare != nil && c.rare.namespace != "") {
		c.setRare(func(r *rareMeta) { r.namespace = other })
	}
	if namespace == "" && name == "" {
		c.ref = ""
		return
	}
	c.ref = namespace + "/" + name
}

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
func (c *compactObject) GetResourceVersion() string {
	if c.resourceVersion != 0 {
		return strconv.FormatUint(c.resourceVersion, 10)
	}
	if c.rare != nil {
		return c.rare.resourceVersion
	}
	return ""
}

// SetResourceVersion sets the resourceVersion.
func (c *compactObject) SetResourceVersion(version string) {
	n, ok := parseResourceVersion(version)
	c.resourceVersion = n
	other := ""
	if !ok {
		other = version
	}
	if other != "" || (c.rare != nil && c.rare.resourceVersion != "") {
		c.setRare(func(r *rareMeta) { r.resourceVersion = other })
	}
}

// parseResourceVersion parses a resourceVersion that is a canonical decimal number other than 0
// (no sign, no leading zero, below 10^19), the form GetResourceVersion gives back; any other
// string is not held as a number.
func parseResourceVersion(s string) (uint64, bool) {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	return n, true
}

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

// GetFinalizers returns a new slice of the finalizers (nil when there are none).
func (c *compactObject) GetFinalizers() []string { return c.finalizers.slice() }

// SetFinalizers replaces the finalizers.
func (c *compactObject) SetFinalizers(finalizers []string) { c.finalizers = listOf(finalizers) }

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
	if r.generateName == "" && r.selfLink == "" && r.uid == "" && r.namespace == "" && r.resourceVersion == "" &&
		r.deletionTimestamp == nil && r.deletionGracePeriodSeconds == nil && r.ownerReferences == nil {
		c.rare = nil
		return
	}
	c.rare = &r
}

// A packed list is a list of strings in one string, each preceded by its length as a uvarint:
// one allocation however many strings, and one comparable value that can be interned.

// appendPacked appends s to a packed list.
func appendPacked(packed []byte, s string) []byte {
	packed = binary.AppendUvarint(packed, uint64(len(s)))
	return append(packed, s...)
}

// nextPacked splits the first string off a non-empty packed list.
func nextPacked(packed string) (first, rest string) {
	// The length, a uvarint written by appendPacked.
	n, shift, i := 0, 0, 0
	for ; packed[i] >= 0x80; i++ {
		n |= int(packed[i]&0x7f) << shift
		shift += 7
	}
	n |= int(packed[i]) << shift
	packed = packed[i+1:]
	return packed[:n], packed[n:]
}

// stringList is a list of strings packed and interned: the objects of a kind carry one or two
// finalizer lists between them. The zero value is a nil list; an empty list is not nil.
type stringList struct {
	packed unique.Handle[string]
}

func listOf(list []string) stringList {
	if list == nil {
		return stringList{}
	}
	var packed []byte
	for _, s := range list {
		packed = appendPacked(packed, s)
	}
	return stringList{packed: unique.Make(string(packed))}
}

// slice is the list as a new slice (nil for a nil list).
func (l stringList) slice() []string {
	if l.packed == (unique.Handle[string]{}) {
		return nil
	}
	out := []string{}
	for rest := l.packed.Value(); rest != ""; {
		var s string
		s, rest = nextPacked(rest)
		out = append(out, s)
	}
	return out
}

// stringPairs is a string map held as its keys, sorted and packed into one interned string
// (the objects of a kind carry the same few sets of label and annotation keys, so ten thousand
// objects share one copy of each set and hold 8 bytes for it), and the values packed in key
// order, interned when short (values such as regions, generations and flags repeat across
// objects). A Go map would cost a whole group of eight slots (~340 bytes) even for the single
// label most objects carry, and a key string per entry. No map (nil) is the zero value; an
// empty map has the key set "".
type stringPairs struct {
	keys   unique.Handle[string]
	values string
}

func pairsOf(m map[string]string) stringPairs {
	if m == nil {
		return stringPairs{}
	}
	keys := make([]string, 0, len(m))
	nk, nv := 0, 0
	for k, v := range m {
		keys = append(keys, k)
		nk += len(k) + binary.MaxVarintLen64
		nv += len(v) + binary.MaxVarintLen64
	}
	slices.Sort(keys)
	packedKeys, packedValues := make([]byte, 0, nk), make([]byte, 0, nv)
	for _, k := range keys {
		packedKeys = appendPacked(packedKeys, k)
		packedValues = appendPacked(packedValues, m[k])
	}
	return stringPairs{keys: unique.Make(string(packedKeys)), values: internUpTo(string(packedValues), maxInternedValue)}
}

// isNil reports whether p is no map at all.
func (p stringPairs) isNil() bool { return p.keys == (unique.Handle[string]{}) }

// len is the number of pairs (the keys are counted, the values not read).
func (p stringPairs) len() int {
	if p.isNil() {
		return 0
	}
	n := 0
	for keys := p.keys.Value(); keys != ""; n++ {
		_, keys = nextPacked(keys)
	}
	return n
}

// each calls f with every key and value in key order.
func (p stringPairs) each(f func(k, v string)) {
	if p.isNil() {
		return
	}
	keys, values := p.keys.Value(), p.values
	for keys != "" {
		var k, v string
		k, keys = nextPacked(keys)
		v, values = nextPacked(values)
		f(k, v)
	}
}

// toAnyMap is the pairs as an unstructured object's map (nil when there are none).
func (p stringPairs) toAnyMap() map[string]any {
	n := p.len()
	if n == 0 {
		return nil
	}
	m := make(map[string]any, n)
	p.each(func(k, v string) { m[k] = v })
	return m
}

func (p stringPairs) toMap() map[string]string {
	if p.isNil() {
		return nil
	}
	m := make(map[string]string, p.len())
	p.each(func(k, v string) { m[k] = v })
	return m
}

// compact converts u (managedFields already dropped) into its compact form.
func compact(u *unstructured.Unstructured) (*compactObject, error) {
	c := &compactObject{}
	c.setType(u.GetAPIVersion(), u.GetKind())
	var m metav1.ObjectMeta
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &m); err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
	}
	c.setMeta(&m)
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
		c.rest = string(raw)
	}
	return c, nil
}

// setMeta sets c's metadata from m (its managedFields are not read); m's owner references are
// kept, their kinds interned.
func (c *compactObject) setMeta(m *metav1.ObjectMeta) {
	c.generation, c.created = m.Generation, m.CreationTimestamp.Unix()
	c.finalizers = listOf(m.Finalizers)
	c.labels, c.annotations = pairsOf(m.Labels), pairsOf(m.Annotations)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = intern(r.APIVersion), intern(r.Kind)
	}
	if m.GenerateName != "" || m.GetSelfLink() != "" || m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil || m.OwnerReferences != nil {
		c.rare = &rareMeta{generateName: m.GenerateName, selfLink: m.GetSelfLink(),
			deletionTimestamp: m.DeletionTimestamp, deletionGracePeriodSeconds: m.DeletionGracePeriodSeconds, ownerReferences: m.OwnerReferences}
	}
	// The setters put a namespace, UID or resourceVersion the compact fields cannot hold into
	// rare (the rare case: each such setter copies rare once).
	c.setRef(m.Namespace, m.Name)
	c.SetUID(m.UID)
	c.SetResourceVersion(m.ResourceVersion)
}

// DeepCopyObject returns the object expanded: a new *unstructured.Unstructured sharing nothing
// with the cache (the type every reader of the engine's caches asks for).
func (c *compactObject) DeepCopyObject() runtime.Object {
	u, err := c.expand()
	if err != nil {
		// rest was encoded by compact from decoded JSON values: it always decodes.
		panic(fmt.Sprintf("cached %s %s/%s does not expand: %v", c.typeMeta().Kind, c.GetNamespace(), c.GetName(), err))
	}
	return u
}

// expand rebuilds the unstructured object c was compacted from.
func (c *compactObject) expand() (*unstructured.Unstructured, error) {
	obj := map[string]any{}
	if len(c.rest) > 0 {
		if err := utiljson.Unmarshal([]byte(c.rest), &obj); err != nil {
			return nil, err
		}
	}
	// The embedded ObjectMeta has no labels or annotations: they go into the map directly, as
	// the API server omits them (empty maps included).
	m := metav1.ObjectMeta{
		Name: c.GetName(), Namespace: c.GetNamespace(), UID: c.GetUID(), ResourceVersion: c.GetResourceVersion(),
		Generation: c.generation, CreationTimestamp: c.GetCreationTimestamp(), Finalizers: c.finalizers.slice(),
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
	if m := c.labels.toAnyMap(); len(m) > 0 {
		md["labels"] = m
	}
	if m := c.annotations.toAnyMap(); len(m) > 0 {
		md["annotations"] = m
	}
	obj["metadata"] = md
	u := &unstructured.Unstructured{Object: obj}
	tm := c.typeMeta()
	u.SetAPIVersion(tm.APIVersion)
	u.SetKind(tm.Kind)
	return u, nil
}

// maxInterned is the longest name (namespace, owner kind and apiVersion) interned, and
// maxInternedValue the longest packed set of label or annotation values: short values
// (generations, flags, region names, tiers) repeat across objects, longer ones (UIDs, hashes,
// trace parents, documents) rarely do, and interning a unique string only adds a table entry.
// Key sets, finalizer lists and kinds are interned whatever their length.
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

// IsCompact reports whether obj is held in the compact form.
func IsCompact(obj any) bool { _, ok := obj.(*compactObject); return ok }
