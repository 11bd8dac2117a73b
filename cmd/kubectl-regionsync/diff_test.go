package main

import (
	"strings"
	"testing"
)

// TestDecodeObjects: the documents of a diff file, a List's items each an object, and each bad
// document named.
func TestDecodeObjects(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string // kind/name
		err      string
	}{
		{name: "two documents", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
			want: []string{"ConfigMap/a", "ConfigMap/b"}},
		{name: "a List, as kubectl get -o yaml writes", in: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- apiVersion: regionsync.dev/v1alpha1\n  kind: Distribution\n  metadata: {name: d}\n",
			want: []string{"ConfigMap/a", "Distribution/d"}},
		{name: "JSON", in: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, want: []string{"ConfigMap/a"}},
		{name: "no name", in: "apiVersion: v1\nkind: ConfigMap\n", err: "f.yaml, document 1: apiVersion, kind and metadata.name are required"},
		{name: "a List item without a name", in: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n", err: "document 1, item 0: apiVersion, kind and metadata.name"},
		{name: "empty", in: "---\n", err: "f.yaml holds no object"},
		{name: "not YAML", in: "a: [\n", err: "f.yaml, document 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := decodeObjects("f.yaml", strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, 0, len(objs))
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("objects %v, want %v", got, tc.want)
			}
		})
	}
}
