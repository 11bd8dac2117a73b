// Package jsonvalue holds the few operations the engine and the hub both need on JSON-compatible
// values (unstructured content: map[string]any, []any, scalars), written once.
package jsonvalue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
)

// IsSubset reports whether every field of want is present with the same value in got (maps
// recursively; lists element by element and of equal length; scalars equal).
func IsSubset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if gv, ok := g[k]; !ok || !IsSubset(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !IsSubset(w[i], g[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, got)
	}
}

// DeepCopy copies a JSON-compatible value (maps and lists recursively; scalars are values).
func DeepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = DeepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = DeepCopy(e)
		}
		return out
	default:
		return v
	}
}

// Hash is a stable hash of a JSON-compatible value (encoding/json sorts map keys). A value that
// does not marshal (a corrupt object) hashes to "unhashable", which never equals a real hash: it
// must never look "in sync".
func Hash(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return "unhashable"
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}
