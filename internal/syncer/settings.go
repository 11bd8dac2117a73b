package syncer

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/budget"
)

// Settings are the engine's configuration, complete (every default applied) and valid.
// pkg/regionsync builds them from its Options, where each default is applied and each field
// validated, once; nothing in the engine defaults or checks them again.
type Settings struct {
	// Region names the regional cluster: the mark on every copy, the name of the shard Lease
	// and of the Region on management.
	Region string
	// AnnotationDomain prefixes every annotation, label and finalizer the engine writes.
	AnnotationDomain string
	// ManagementNamespace holds the shard Leases on management.
	ManagementNamespace string
	// ClusterID is management's identity as confirmed by an operator; empty: the recorded one.
	ClusterID string
	// FleetNamespace is the local namespace the fleet runs in: it holds the identity record,
	// names the claim under ClaimPerFleet, and is never written by a sync.
	FleetNamespace string
	// Shard selects the management objects of this region and maps their names.
	Shard fleetspec.Shard
	// Resources are the kinds to sync, every field set.
	Resources []fleetspec.Resource
	// DeletionBudget bounds, per kind, the local deletions the remote side causes.
	DeletionBudget budget.Budget
	// ResyncPeriod is how often every cached object is reconciled again.
	ResyncPeriod time.Duration
	// HeartbeatInterval is how often the Region's heartbeat is refreshed.
	HeartbeatInterval time.Duration
	// StartJitter bounds the random wait before the first request to management.
	StartJitter time.Duration
	// Claim times the shard claim, as client-go's leader election times a Lease.
	Claim LeaseTimings
}

// LeaseTimings time a Lease as client-go's leader election does.
type LeaseTimings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// GVKs are the configured kinds, in configuration order.
func (s *Settings) GVKs() []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, len(s.Resources))
	for i, r := range s.Resources {
		out[i] = r.GroupVersionKind()
	}
	return out
}

// Definition is the shard definition recorded on the shard Lease.
func (s *Settings) Definition() shard.Definition {
	return shard.DefinitionOf(s.Region, s.Shard, s.GVKs())
}

// ProtectedNamespaces are the local namespaces of the namespace scope's exclusions: the system
// namespaces, the fleet's own and the configured exclusions.
func (s *Settings) ProtectedNamespaces() sets.Set[string] {
	return sets.New(fleetspec.ProtectedNamespaces(s.FleetNamespace, s.Shard.ExcludedNamespaces)...)
}

// IsProtectedNamespace reports whether ns is one of ProtectedNamespaces.
func (s *Settings) IsProtectedNamespace(ns string) bool {
	return slices.Contains(fleetspec.ProtectedNamespaces(s.FleetNamespace, s.Shard.ExcludedNamespaces), ns)
}
