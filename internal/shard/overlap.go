package shard

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/regionsync/regionsync/pkg/config"
)

// Definition is what a region claims on management: recorded on its shard Lease so that other
// agents can tell whether their shards collide.
type Definition struct {
	Region                string   `json:"region"`
	NamespacePrefix       string   `json:"namespacePrefix,omitempty"`
	RemoteNamespaceSuffix string   `json:"remoteNamespaceSuffix,omitempty"`
	RemoteResourceSuffix  string   `json:"remoteResourceSuffix,omitempty"`
	LabelSelector         string   `json:"labelSelector,omitempty"`
	Kinds                 []string `json:"kinds"`
}

// DefinitionOf is the definition of region's shard s over kinds; kinds are recorded dotted
// ("Tenant.demo.regionsync.dev").
func DefinitionOf(region string, s config.ShardConfig, kinds []schema.GroupVersionKind) Definition {
	d := Definition{
		Region:                region,
		NamespacePrefix:       s.NamespacePrefix,
		RemoteNamespaceSuffix: s.RemoteNamespaceSuffix,
		RemoteResourceSuffix:  s.RemoteResourceSuffix,
		LabelSelector:         s.LabelSelector,
	}
	for _, gvk := range kinds {
		d.Kinds = append(d.Kinds, KindName(gvk))
	}
	slices.Sort(d.Kinds)
	return d
}

// String describes the shard for people: "region us-east-1 (names *-us-east-1, Tenant.demo.regionsync.dev)".
func (d Definition) String() string {
	var parts []string
	if d.NamespacePrefix != "" || d.RemoteNamespaceSuffix != "" {
		parts = append(parts, fmt.Sprintf("namespaces %s*%s", d.NamespacePrefix, d.RemoteNamespaceSuffix))
	}
	parts = append(parts, "names *"+d.RemoteResourceSuffix)
	if d.LabelSelector != "" {
		parts = append(parts, "labels "+d.LabelSelector)
	}
	parts = append(parts, strings.Join(d.Kinds, ","))
	return fmt.Sprintf("region %s (%s)", d.Region, strings.Join(parts, ", "))
}

// Overlap reports whether some management object could belong to both shards, and why. Two
// shards overlap when they share a kind, their namespace prefixes are compatible (one starts the
// other), both suffix pairs are compatible (one ends the other: "-east" and "-us-east", or an
// empty suffix), and their label selectors are not provably disjoint.
func Overlap(a, b Definition) (bool, string) {
	common := sets.New(a.Kinds...).Intersection(sets.New(b.Kinds...))
	if common.Len() == 0 {
		return false, ""
	}
	if !strings.HasPrefix(a.NamespacePrefix, b.NamespacePrefix) && !strings.HasPrefix(b.NamespacePrefix, a.NamespacePrefix) {
		return false, ""
	}
	if !suffixCompatible(a.RemoteNamespaceSuffix, b.RemoteNamespaceSuffix) || !suffixCompatible(a.RemoteResourceSuffix, b.RemoteResourceSuffix) {
		return false, ""
	}
	if selectorsDisjoint(a.LabelSelector, b.LabelSelector) {
		return false, ""
	}
	return true, fmt.Sprintf("both shards can hold %s objects named *%s and *%s", strings.Join(sets.List(common), ","),
		orEmpty(a.RemoteResourceSuffix), orEmpty(b.RemoteResourceSuffix))
}

func orEmpty(s string) string {
	if s == "" {
		return " (any name)"
	}
	return s
}

func suffixCompatible(a, b string) bool {
	return strings.HasSuffix(a, b) || strings.HasSuffix(b, a)
}

// selectorsDisjoint reports whether no label set can match both selectors, as far as equality
// and existence requirements can tell (conservative: unknown means "may overlap").
func selectorsDisjoint(a, b string) bool {
	sa, errA := labels.Parse(a)
	sb, errB := labels.Parse(b)
	if errA != nil || errB != nil {
		return false
	}
	ra, _ := sa.Requirements()
	rb, _ := sb.Requirements()
	for _, x := range ra {
		for _, y := range rb {
			if x.Key() == y.Key() && requirementsDisjoint(x, y) {
				return true
			}
		}
	}
	return false
}

func requirementsDisjoint(x, y labels.Requirement) bool {
	values := func(r labels.Requirement) (sets.Set[string], bool) {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			return sets.New(r.ValuesUnsorted()...), true
		}
		return nil, false
	}
	vx, okx := values(x)
	vy, oky := values(y)
	switch {
	case okx && oky:
		return vx.Intersection(vy).Len() == 0
	case okx && y.Operator() == selection.DoesNotExist, oky && x.Operator() == selection.DoesNotExist:
		return true
	case x.Operator() == selection.Exists && y.Operator() == selection.DoesNotExist,
		y.Operator() == selection.Exists && x.Operator() == selection.DoesNotExist:
		return true
	}
	return false
}
