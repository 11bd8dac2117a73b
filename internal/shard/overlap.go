package shard

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/regionsync/regionsync/internal/fleetspec"
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
func DefinitionOf(region string, s fleetspec.Shard, kinds []schema.GroupVersionKind) Definition {
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

// Overlap reports whether two shards conflict, and why: they share a kind, their namespace
// prefixes are compatible (one starts the other) and both suffix pairs are compatible (one ends
// the other: "-east" and "-us-east", or an empty suffix). Label selectors do not separate two
// such shards, even when provably disjoint: a region's management identity is scoped by its
// suffix (its RBAC on uploaded Secrets, named "<secret><suffix>"), so each of two regions whose
// names can end with both suffixes could read and write the other's uploaded Secrets.
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
	why := fmt.Sprintf("both shards can hold %s objects named *%s and *%s", strings.Join(sets.List(common), ","),
		orEmpty(a.RemoteResourceSuffix), orEmpty(b.RemoteResourceSuffix))
	if a.LabelSelector != "" || b.LabelSelector != "" {
		why += " (label selectors do not separate shards: each region's credential is scoped by its name suffix, so it could reach the other's uploaded Secrets)"
	}
	return true, why
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
