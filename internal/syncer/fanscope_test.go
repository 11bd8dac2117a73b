package syncer

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestParseFanOutSelector(t *testing.T) {
	for name, tc := range map[string]struct {
		value   string
		matches map[string]string // labels the selector must match (nil: skip)
		misses  map[string]string // labels it must not match (nil: skip)
		err     string
	}{
		"every":          {value: "*", matches: map[string]string{}},
		"every, spaced":  {value: " * ", matches: map[string]string{"a": "b"}},
		"equality":       {value: "team=a", matches: map[string]string{"team": "a"}, misses: map[string]string{"team": "b"}},
		"set":            {value: "env in (prod,staging),!legacy", matches: map[string]string{"env": "prod"}, misses: map[string]string{"env": "prod", "legacy": ""}},
		"empty":          {value: "", err: "empty selector"},
		"blank":          {value: "   ", err: "empty selector"},
		"not a selector": {value: "team in (a", err: "not a label selector"},
		"a star inside":  {value: "team=*", err: "not a label selector"},
	} {
		t.Run(name, func(t *testing.T) {
			sel, err := parseFanOutSelector(tc.value)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseFanOutSelector(%q) = %v, %v; want an error containing %q", tc.value, sel, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.matches != nil && !sel.Matches(labels.Set(tc.matches)) {
				t.Errorf("%q does not match %v", tc.value, tc.matches)
			}
			if tc.misses != nil && sel.Matches(labels.Set(tc.misses)) {
				t.Errorf("%q matches %v", tc.value, tc.misses)
			}
		})
	}
}

// FuzzParseFanOutSelector: any value parses or is refused with an error, never panics, and an
// empty value is never "every namespace".
func FuzzParseFanOutSelector(f *testing.F) {
	for _, s := range []string{"*", "", "a=b", "a in (b,c)", "!a", " ", "a=b,", "*,a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sel, err := parseFanOutSelector(v)
		if strings.TrimSpace(v) == "" && err == nil {
			t.Fatalf("empty value %q accepted as %v", v, sel)
		}
		if err == nil && sel == nil {
			t.Fatalf("%q: no selector and no error", v)
		}
	})
}

func TestSelectTargets(t *testing.T) {
	nss := []namespaceInfo{
		{name: "tenant-a", labels: map[string]string{"ca": "yes"}},
		{name: "tenant-b", labels: map[string]string{"ca": "no"}},
		{name: "tenant-c", labels: map[string]string{"ca": "yes"}, terminating: true},
		{name: "tenant-src", labels: map[string]string{"ca": "yes"}},
		{name: "kube-system", labels: map[string]string{"ca": "yes"}},
		{name: "istio-system", labels: map[string]string{"ca": "yes"}},
		{name: "default"},
	}
	protected := sets.New("kube-system", "default", "regionsync-system")
	prefix := func(ns string) bool { return strings.HasPrefix(ns, "tenant-") }
	every := func(string) bool { return true }
	sel := func(s string) labels.Selector {
		out, err := parseFanOutSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for name, tc := range map[string]struct {
		sel   labels.Selector
		scope fanOutScope
		want  []string
	}{
		"selector within the prefix": {sel("ca=yes"), fanOutScope{protected: protected, inScope: prefix}, []string{"tenant-a", "tenant-src"}},
		"every within the prefix":    {sel("*"), fanOutScope{protected: protected, inScope: prefix}, []string{"tenant-a", "tenant-b", "tenant-src"}},
		"wide: never protected":      {sel("ca=yes"), fanOutScope{protected: protected, inScope: every}, []string{"istio-system", "tenant-a", "tenant-src"}},
		"wide, every":                {sel("*"), fanOutScope{protected: protected, inScope: every}, []string{"istio-system", "tenant-a", "tenant-b", "tenant-src"}},
		"one cluster: not the source's namespace": {sel("*"), fanOutScope{protected: protected, inScope: prefix, skip: "tenant-src"},
			[]string{"tenant-a", "tenant-b"}},
		"nothing matches": {sel("ca=maybe"), fanOutScope{protected: protected, inScope: every}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			got, terminating := selectTargets(nss, tc.sel, tc.scope)
			if !slices.Equal(got, tc.want) {
				t.Errorf("targets %v, want %v", got, tc.want)
			}
			if !terminating.Equal(sets.New("tenant-c")) {
				t.Errorf("terminating %v", sets.List(terminating))
			}
		})
	}
}

// TestFanOutSourceKey: a copy names its source by a label (a hash of the key) and an annotation
// (the key); a copy whose two marks disagree, or that lacks one, names no source.
func TestFanOutSourceKey(t *testing.T) {
	key := types.NamespacedName{Namespace: "tenant-a", Name: "ca-us"}
	other := types.NamespacedName{Namespace: "tenant-b", Name: "ca-us"}
	for name, tc := range map[string]struct {
		labels, annotations map[string]string
		ok                  bool
	}{
		"both":       {map[string]string{testKeys.FanOutSource: fanOutSourceHash(key)}, map[string]string{testKeys.FanOutSourceKey: key.String()}, true},
		"disagree":   {map[string]string{testKeys.FanOutSource: fanOutSourceHash(other)}, map[string]string{testKeys.FanOutSourceKey: key.String()}, false},
		"no label":   {nil, map[string]string{testKeys.FanOutSourceKey: key.String()}, false},
		"no key":     {map[string]string{testKeys.FanOutSource: fanOutSourceHash(key)}, nil, false},
		"not a key":  {map[string]string{testKeys.FanOutSource: fanOutSourceHash(key)}, map[string]string{testKeys.FanOutSourceKey: "ca-us"}, false},
		"empty name": {map[string]string{testKeys.FanOutSource: fanOutSourceHash(key)}, map[string]string{testKeys.FanOutSourceKey: "tenant-a/"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{}}
			u.SetLabels(tc.labels)
			u.SetAnnotations(tc.annotations)
			got, ok := fanOutSourceKey(testKeys, u)
			if ok != tc.ok || ok && got != key {
				t.Errorf("fanOutSourceKey = %v, %v; want %v", got, ok, tc.ok)
			}
		})
	}
	if h := fanOutSourceHash(key); len(h) > 63 || fanOutSourceHash(key) != h {
		t.Errorf("hash %q is not a stable label value", h)
	}
}

func TestEncodeFanOutReport(t *testing.T) {
	many := make([]string, maxReportedFailures+3)
	for i := range many {
		many[i] = "ns"
	}
	for name, tc := range map[string]struct {
		rep  fanOutResult
		want string
	}{
		"all current":    {fanOutResult{matching: 3, current: 3}, `{"matching":3,"current":3}`},
		"failed":         {fanOutResult{matching: 3, current: 2, failed: []string{"team-b"}}, `{"matching":3,"current":2,"failed":["team-b"]}`},
		"many failed":    {fanOutResult{matching: 30, current: 7, failed: many}, `"moreFailed":3}`},
		"a generation":   {fanOutResult{matching: 1, current: 1, generation: 4}, `{"matching":1,"current":1,"generation":4}`},
		"a content hash": {fanOutResult{matching: 1, current: 1, hash: "3f2a"}, `{"matching":1,"current":1,"hash":"3f2a"}`},
	} {
		t.Run(name, func(t *testing.T) {
			if got := encodeFanOutReport(&tc.rep); !strings.HasSuffix(got, tc.want) && got != tc.want {
				t.Errorf("report %s, want %s", got, tc.want)
			}
		})
	}
}
