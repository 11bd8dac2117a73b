package shard

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
)

// CheckRegistered compares an agent's shard (its annotation domain, shard configuration and
// synced kinds) with the shard an operator registered on its Region (spec.shard). The hub places
// objects by the registered shard only, so an agent whose configuration differs must not claim:
// it would sync other objects than the ones placed for it. It returns nil when they agree, or
// when nothing is registered (a Region made before spec.shard existed keeps working as before),
// and otherwise an error naming every field that differs.
//
// The agent calls it before every claim (pkg/regionsync, as leader), reading its Region first
// (docs/design/hub.md#hub-and-distribution).
func CheckRegistered(domain string, s fleetspec.Shard, kinds []schema.GroupVersionKind, registered *regionsyncv1alpha1.RegionShard) error {
	if registered == nil {
		return nil
	}
	var diffs []string
	differs := func(field, configured, onRegion string) {
		if configured != onRegion {
			diffs = append(diffs, fmt.Sprintf("%s: configured %q, registered %q", field, configured, onRegion))
		}
	}
	differs("annotationDomain", cmp.Or(domain, fleetspec.DefaultAnnotationDomain), cmp.Or(registered.AnnotationDomain, fleetspec.DefaultAnnotationDomain))
	differs("shard.namespacePrefix", s.NamespacePrefix, registered.NamespacePrefix)
	differs("shard.remoteResourceSuffix", s.RemoteResourceSuffix, registered.RemoteResourceSuffix)
	differs("shard.remoteNamespaceSuffix", s.RemoteNamespaceSuffix, registered.RemoteNamespaceSuffix)
	differs("shard.localNamespaceSuffix", s.LocalNamespaceSuffix, registered.LocalNamespaceSuffix)
	differs("shard.labelSelector", s.LabelSelector, registered.LabelSelector)
	configured := make([]string, 0, len(kinds))
	for _, gvk := range kinds {
		configured = append(configured, KindName(gvk))
	}
	slices.Sort(configured)
	configured = slices.Compact(configured)
	onRegion := slices.Clone(registered.Kinds)
	slices.Sort(onRegion)
	onRegion = slices.Compact(onRegion)
	differs("resources (kinds)", strings.Join(configured, ","), strings.Join(onRegion, ","))
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("the agent's shard differs from the Region's spec.shard (registered by the operator; the hub places objects by it): %s", strings.Join(diffs, "; "))
}
