package shard

import "testing"

func def(region, suffix string, mutate ...func(*Definition)) Definition {
	d := Definition{Region: region, RemoteResourceSuffix: suffix, Kinds: []string{"Tenant.demo.regionsync.dev"}}
	for _, m := range mutate {
		m(&d)
	}
	return d
}

func TestOverlap(t *testing.T) {
	cases := map[string]struct {
		a, b Definition
		want bool
	}{
		"different suffixes":          {def("us-east-1", "-us-east-1"), def("eu-west-1", "-eu-west-1"), false},
		"suffix of a longer suffix":   {def("east", "-east"), def("us-east", "-us-east"), true},
		"empty suffix":                {def("all", ""), def("us-east-1", "-us-east-1"), true},
		"same suffix, other region":   {def("a", "-x"), def("b", "-x"), true},
		"no common kind":              {def("a", "-x"), def("b", "-x", func(d *Definition) { d.Kinds = []string{"ConfigMap"} }), false},
		"disjoint namespace prefixes": {def("a", "-x", func(d *Definition) { d.NamespacePrefix = "team-a-" }), def("b", "-x", func(d *Definition) { d.NamespacePrefix = "team-b-" }), false},
		"nested namespace prefixes":   {def("a", "-x", func(d *Definition) { d.NamespacePrefix = "team-" }), def("b", "-x", func(d *Definition) { d.NamespacePrefix = "team-b-" }), true},
		"disjoint namespace suffixes": {def("a", "", func(d *Definition) { d.RemoteNamespaceSuffix = "-us" }), def("b", "", func(d *Definition) { d.RemoteNamespaceSuffix = "-eu" }), false},
		// Selectors never separate shards whose suffixes overlap (credentials are scoped by suffix).
		"disjoint label values, same suffix": {def("a", "-x", func(d *Definition) { d.LabelSelector = "regionsync.dev/region=a" }),
			def("b", "-x", func(d *Definition) { d.LabelSelector = "regionsync.dev/region=b" }), true},
		"disjoint label values": {def("a", "", func(d *Definition) { d.LabelSelector = "region=us" }),
			def("b", "", func(d *Definition) { d.LabelSelector = "region in (eu,ap)" }), true},
		"disjoint label values, disjoint suffixes": {def("a", "-us", func(d *Definition) { d.LabelSelector = "region=us" }),
			def("b", "-eu", func(d *Definition) { d.LabelSelector = "region=eu" }), false},
		"overlapping label values": {def("a", "", func(d *Definition) { d.LabelSelector = "region=us" }),
			def("b", "", func(d *Definition) { d.LabelSelector = "region in (us,eu)" }), true},
		"exists vs does not exist": {def("a", "", func(d *Definition) { d.LabelSelector = "canary" }),
			def("b", "", func(d *Definition) { d.LabelSelector = "!canary" }), true},
		"unrelated selectors": {def("a", "", func(d *Definition) { d.LabelSelector = "x=1" }),
			def("b", "", func(d *Definition) { d.LabelSelector = "y=2" }), true},
	}
	for name, tc := range cases {
		for _, pair := range [][2]Definition{{tc.a, tc.b}, {tc.b, tc.a}} {
			got, why := Overlap(pair[0], pair[1])
			if got != tc.want {
				t.Errorf("%s: Overlap(%s, %s) = %v (%s), want %v", name, pair[0], pair[1], got, why, tc.want)
			}
			if got && why == "" {
				t.Errorf("%s: an overlap must say why", name)
			}
		}
	}
}

// FuzzOverlap: overlap is symmetric, a shard always overlaps itself, and when two shards are
// reported disjoint no object name belongs to both.
func FuzzOverlap(f *testing.F) {
	f.Add("-east", "-us-east", "team-", "team-b-", "acme-us-east", "team-b-1")
	f.Fuzz(func(t *testing.T, s1, s2, p1, p2, name, ns string) {
		a := Definition{Region: "a", RemoteResourceSuffix: s1, NamespacePrefix: p1, Kinds: []string{"K"}}
		b := Definition{Region: "b", RemoteResourceSuffix: s2, NamespacePrefix: p2, Kinds: []string{"K"}}
		ab, _ := Overlap(a, b)
		ba, _ := Overlap(b, a)
		if ab != ba {
			t.Fatalf("not symmetric: %v %v", ab, ba)
		}
		if self, _ := Overlap(a, a); !self {
			t.Fatal("a shard does not overlap itself")
		}
		inA := len(name) >= len(s1) && name[len(name)-len(s1):] == s1 && len(ns) >= len(p1) && ns[:len(p1)] == p1
		inB := len(name) >= len(s2) && name[len(name)-len(s2):] == s2 && len(ns) >= len(p2) && ns[:len(p2)] == p2
		if inA && inB && !ab {
			t.Fatalf("%s/%s belongs to both %s and %s, reported disjoint", ns, name, a, b)
		}
	})
}
