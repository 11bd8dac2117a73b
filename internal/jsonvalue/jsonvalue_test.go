package jsonvalue

import "testing"

func TestIsSubset(t *testing.T) {
	got := map[string]any{"a": int64(1), "b": map[string]any{"c": "x", "d": []any{"y", int64(2)}}, "e": true}
	cases := []struct {
		name string
		want any
		ok   bool
	}{
		{"empty", map[string]any{}, true},
		{"scalar", map[string]any{"a": int64(1)}, true},
		{"nested", map[string]any{"b": map[string]any{"c": "x"}}, true},
		{"list equal", map[string]any{"b": map[string]any{"d": []any{"y", int64(2)}}}, true},
		{"list shorter", map[string]any{"b": map[string]any{"d": []any{"y"}}}, false},
		{"other value", map[string]any{"e": false}, false},
		{"missing key", map[string]any{"z": nil}, false},
		{"other type", map[string]any{"b": "x"}, false},
	}
	for _, tc := range cases {
		if IsSubset(tc.want, got) != tc.ok {
			t.Errorf("%s: IsSubset = %v, want %v", tc.name, !tc.ok, tc.ok)
		}
	}
}

func TestDeepCopyAndHash(t *testing.T) {
	v := map[string]any{"b": []any{map[string]any{"x": int64(1)}}, "a": "s"}
	c := DeepCopy(v).(map[string]any)
	if Hash(c) != Hash(v) {
		t.Fatal("a copy hashes differently")
	}
	c["b"].([]any)[0].(map[string]any)["x"] = int64(2)
	if v["b"].([]any)[0].(map[string]any)["x"] != int64(1) {
		t.Fatal("the copy shares nested values with the original")
	}
	if Hash(c) == Hash(v) {
		t.Fatal("different values hash alike")
	}
	if Hash(map[string]any{"a": "s", "b": int64(1)}) != Hash(map[string]any{"b": int64(1), "a": "s"}) {
		t.Fatal("the hash depends on map order")
	}
	if Hash(map[string]any{"f": func() {}}) != "unhashable" {
		t.Fatal("a value that does not marshal must hash to unhashable")
	}
}
