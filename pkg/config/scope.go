package config

import (
	"slices"

	"github.com/regionsync/regionsync/internal/fleetspec"
)

// ProtectedNamespaces lists, sorted and without duplicates, every local namespace the agent must
// leave alone: fleetspec.SystemNamespaces, the leader-election namespace (where the agent runs) and
// shard.excludedNamespaces. The management namespace is on another cluster and not included.
func (c *AgentConfig) ProtectedNamespaces() []string {
	return fleetspec.ProtectedNamespaces(c.LeaderElection.Namespace, c.Shard.ExcludedNamespaces)
}

// IsProtectedNamespace reports whether ns is one of ProtectedNamespaces.
func (c *AgentConfig) IsProtectedNamespace(ns string) bool {
	return slices.Contains(c.ProtectedNamespaces(), ns)
}
