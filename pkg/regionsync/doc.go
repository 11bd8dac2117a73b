// Package regionsync embeds regionsync in a regional controller manager: it keeps local copies
// of this region's shard of a management cluster's objects, returns their status and selected
// secrets with generation annotations, claims the shard on management and publishes the
// region's health there. It is what the agent binary (cmd/agent) runs, and what a host that
// already runs a controller manager adds to it instead of running a second process and cache,
// as gravitational/sync-controller's users do today (MIGRATION.md).
//
// # Use
//
// Build the host's manager as usual, then:
//
//	s, err := regionsync.New(mgr, regionsync.Options{
//		Region:     "us-east-1",
//		Management: regionsync.Management{Config: managementRestConfig},
//		Shard:      regionsync.Shard{RemoteResourceSuffix: "-us-east-1"},
//		Resources:  []regionsync.Resource{{Object: &tenantv1.Tenant{}, Secrets: []string{"tenant-token"}}},
//	})
//	_ = mgr.AddHealthzCheck("regionsync", s.Healthz())
//	_ = mgr.AddReadyzCheck("regionsync", s.Readyz())
//	err = mgr.Start(ctx)
//
// # What it adds to the manager
//
//   - On every replica: a management session, connected lazily (the host starts and serves
//     health while management is unreachable) and probed; the management cache of the shard
//     (narrowed server-side by Shard.LabelSelector); the local informers of the synced kinds, so
//     that a standby becomes leader without listing anything again.
//   - On the elected leader only (every replica when the host runs without leader election):
//     the shard claim, a Lease "region-<region>" on management; while it is held, one controller
//     per kind and the Region status reporter.
//
// # The Region status is optional
//
// The Region kind (regions.regionsync.dev, deploy/crds) carries each region's health on
// management. A host that has not installed it loses nothing but that status: the leader logs
// one warning saying how to install it or turn it off (Options.DisableRegionStatus), publishes
// nothing, looks for the kind again every 30 s, and syncs as usual; the
// gauge regionsync_region_status_published is 0 meanwhile. The same holds for an outage:
// failures of the status and of every object's sync are retried with backoff and logged once
// when they start and once when they end (per-object retries at V(1)); an error with a stack
// trace is for a refusal or a bug.
//
// # The host's cache
//
// Typed kinds are read through the host's own informer for that Go type. The manager's cache
// need not be filtered: an object without this region's mark is never treated as a copy (the
// adoption rules decide whether it becomes one) and only marked objects are ever written or
// deleted. A host whose manager exists only for regionsync (the agent) may build it with
// LocalCacheOptions, so that it caches copies only, and with LocalNewCache, so that the watches
// of the kinds given as unstructured objects are decoded straight into the form the cache holds
// them in.
//
// # A guest in the host process
//
// The package reads no flags and, of the environment, only POD_NAME (the replica's name on the
// shard Lease and the Region; host name and process ID without it), never exits the process, builds no trace exporter
// (Options.TracerProvider is the host's), names its controllers "regionsync-<kind>", and
// registers its metrics (prefix regionsync_) in controller-runtime's registry, which the
// manager serves.
//
// # Decommissioning
//
// Decommission releases a region's claim on management when the region is removed (and, with
// DecommissionOptions.OutOfShardOnly, the finalizers of objects that left a running region's
// shard): the finalizers, optionally the local copies first, and the shard Lease. The agent
// binary runs it as "agent decommission".
//
// The sync rules, the shard mapping, the safety model and the health model are described in
// docs/design/; the configuration file in docs/configuration.md.
package regionsync
