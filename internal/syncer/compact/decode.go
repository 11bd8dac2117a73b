package compact

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"
)

// decodeJSON decodes an object's JSON straight into its compact form: the metadata into typed
// fields (managedFields cut out before decoding), the other top-level fields kept as the JSON
// they arrived in. It holds what compact holds for the same object decoded as unstructured,
// without building the tree of maps first: the document is validated once, its top-level
// members (and the metadata's) are found by a scan that trusts that validation, and only the
// metadata is decoded. What is not a JSON object is an error naming what is wrong.
func decodeJSON(data []byte) (*compactObject, error) {
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v) // the syntax error, with its offset
		return nil, fmt.Errorf("object: %w", err)
	}
	var apiVersion, kind, meta, rest []byte
	if !members(data, func(key, value []byte) {
		switch k := keyName(key); { // the comparisons do not copy k
		case string(k) == "apiVersion":
			apiVersion = value
		case string(k) == "kind":
			kind = value
		case string(k) == "metadata":
			meta = value
		default:
			if rest == nil {
				rest = append(make([]byte, 0, len(data)), '{')
			} else {
				rest = append(rest, ',')
			}
			rest = append(append(append(rest, key...), ':'), value...)
		}
	}) {
		return nil, fmt.Errorf("object: not a JSON object: %.20q", data)
	}
	c := &compactObject{}
	av, err := stringValue("apiVersion", apiVersion)
	if err != nil {
		return nil, err
	}
	k, err := stringValue("kind", kind)
	if err != nil {
		return nil, err
	}
	c.setType(av, k)
	var m metav1.ObjectMeta
	if meta != nil {
		// Without managedFields (most of an object's metadata, never held): decoding them only
		// to drop them costs more than the rest of the object.
		type member struct{ key, value []byte }
		var fields []member
		isObject := members(meta, func(key, value []byte) {
			if string(keyName(key)) == "managedFields" {
				return
			}
			for i := range fields {
				if string(fields[i].key) == string(key) { // a key given twice: the last one counts
					fields = slices.Delete(fields, i, i+1)
					break
				}
			}
			fields = append(fields, member{key, value})
		})
		// Metadata that is not an object (null) is none, as compact reads it.
		if isObject && len(fields) > 0 {
			kept := append(make([]byte, 0, len(meta)), '{')
			for i, f := range fields {
				if i > 0 {
					kept = append(kept, ',')
				}
				kept = append(append(append(kept, f.key...), ':'), f.value...)
			}
			kept = append(kept, '}')
			if err := kjson.UnmarshalCaseSensitivePreserveInts(kept, &m); err != nil {
				return nil, fmt.Errorf("metadata: %w", err)
			}
		}
	}
	c.setMeta(&m)
	if rest != nil {
		c.rest = string(append(rest, '}'))
	}
	return c, nil
}

// stringValue is a top-level string field's value: "" when absent or null; any other JSON
// value is an error naming the field.
func stringValue(field string, raw []byte) (string, error) {
	if raw == nil || string(raw) == "null" {
		return "", nil
	}
	if len(raw) >= 2 && raw[0] == '"' && !slices.Contains(raw, '\\') && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &s); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return s, nil
}

// keyName is a member's key (a JSON string, quotes included) unquoted: a slice of it, decoded
// only when it holds escapes.
func keyName(key []byte) []byte {
	if !slices.Contains(key, '\\') {
		return key[1 : len(key)-1]
	}
	var s string
	_ = json.Unmarshal(key, &s) // a valid document's key always decodes
	return []byte(s)
}

// members calls f with each member of the JSON object data (valid JSON: json.Valid said so), its
// key as the JSON string it is (quotes included) and its value's JSON, in document order. It
// reports false when data is not an object.
func members(data []byte, f func(key, value []byte)) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	for {
		i = skipSpace(data, i)
		switch data[i] {
		case '}':
			return true
		case ',':
			i = skipSpace(data, i+1)
		}
		end := skipString(data, i)
		key := data[i:end]
		i = skipSpace(data, end) + 1 // the colon
		i = skipSpace(data, i)
		end = skipValue(data, i)
		f(key, data[i:end])
		i = end
	}
}

// skipSpace is the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString is the index just past the JSON string starting at i.
func skipString(data []byte, i int) int {
	for i++; ; i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// skipValue is the index just past the JSON value starting at i.
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // a number, true, false or null
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// decodeWatched decodes an object a watch or list of a compacted kind sent: a metav1.Status (what
// a watch's ERROR event carries, "410 Gone" included) as itself, anything else compacted.
func decodeWatched(data []byte) (runtime.Object, error) {
	c, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	tm := c.typeMeta()
	if tm.Kind == "Status" && tm.APIVersion == "v1" {
		status := &metav1.Status{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, status); err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		return status, nil
	}
	return c, nil
}
