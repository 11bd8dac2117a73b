// Package telemetry holds regionsync's Prometheus metrics (on controller-runtime's registry, so
// they are served with its built-ins) and, with the observability work, its tracing setup. Labels
// are bounded: resource kind, direction, result, state; never object names.
package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Directions of a sync write.
const (
	DirectionClaim  = "claim" // finalizer added on management
	DirectionUp     = "up"    // status to management
	DirectionDown   = "down"  // spec to the region
	DirectionMeta   = "generations"
	DirectionDelete = "delete" // local copy or namespace deleted, finalizer released
)

// Results of one sync step.
const (
	ResultWritten   = "written"
	ResultUnchanged = "unchanged"
	ResultError     = "error"
	ResultPaused    = "paused"
	ResultInvalid   = "invalid"
	ResultHeld      = "held"
	ResultRefused   = "refused"
)

// Results of a management credential renewal (besides ResultError).
const (
	CredentialRenewed = "renewed" // a new token from management
	CredentialLoaded  = "loaded"  // a newer token found in the kubeconfig Secret
)

// labelResource is the label that names the resource kind on every per-kind metric, labelResult
// the outcome on every counter of outcomes.
const (
	labelResource = "resource"
	labelResult   = "result"
)

var (
	// Syncs counts sync steps by resource kind, direction and result.
	Syncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regionsync_syncs_total",
		Help: "Sync steps by resource kind, direction (claim, up, down, generations, delete) and result.",
	}, []string{labelResource, "direction", labelResult})

	// SyncDuration observes whole reconciles.
	SyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "regionsync_sync_duration_seconds",
		Help:    "Duration of one object's reconcile, by resource kind.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{labelResource})

	// WriteLag observes the time from the watch event that caused a reconcile to each write it
	// made, by resource kind and write (create local, update local, upload status, ...).
	WriteLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "regionsync_watch_to_write_seconds",
		Help:    "Time from the watch event that triggered a reconcile to each API write it made, by resource kind and write.",
		Buckets: []float64{.001, .0025, .005, .01, .015, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{labelResource, "write"})

	// SecretUploads counts secret uploads by result.
	SecretUploads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regionsync_secret_uploads_total",
		Help: "Secret uploads to management by resource kind and result (written, unchanged, refused, error).",
	}, []string{labelResource, labelResult})

	// DeletionsHeld is the number of local deletions the budget holds, by resource kind.
	DeletionsHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regionsync_deletions_held",
		Help: "Local copies whose remote object vanished and whose deletion the deletion budget holds.",
	}, []string{labelResource})

	// Objects is the number of shard objects per resource kind and state (synced, pending,
	// failed, paused, invalid) after their last reconcile, on the leading replica.
	Objects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regionsync_objects",
		Help: "Shard objects by resource kind and state after their last reconcile (leader only).",
	}, []string{labelResource, "state"})

	// ShardClaimed is 1 while this replica holds the region's shard claim and syncs it.
	ShardClaimed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "regionsync_shard_claimed",
		Help: "1 while this agent holds its region's shard Lease on management and syncs it.",
	})

	// ShardConflict is 1 for the reason this agent cannot claim its shard (held by another fleet,
	// overlapping another shard), else 0.
	ShardConflict = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regionsync_shard_conflict",
		Help: "1 when the shard cannot be claimed, by reason (HeldByOtherFleet, ShardOverlap).",
	}, []string{"reason"})

	// WriteFights counts writes held back because another writer keeps undoing them (a write
	// loop), by resource kind and the cluster written (management: status; local: spec).
	WriteFights = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regionsync_write_fights_total",
		Help: "Writes held back because another writer keeps undoing the agent's writes on an object, by resource kind and cluster (management, local).",
	}, []string{labelResource, "cluster"})

	// KindWarm is 1 once a kind's informers on both clusters and its secrets' caches have synced
	// on this replica (leader or standby), with its event handlers registered: the replica can
	// sync the kind at once, a standby can take over without listing anything. 0 until then.
	KindWarm = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regionsync_kind_warm",
		Help: "1 once the kind's caches on both clusters (and its secrets' caches) have synced on this replica, leader or warm standby; 0 while they are retried.",
	}, []string{labelResource})

	// PassBacklog is how many requests of a low-priority pass (an informer's initial list, a
	// resync, a claim period's full pass) wait to be handed to a kind's workqueue: the backlog of
	// an initial sync or a takeover. The workqueue itself holds only a window of them (its
	// workqueue_depth does not show the backlog).
	PassBacklog = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regionsync_pass_backlog",
		Help: "Objects of an initial list, resync or full pass not yet handed to the kind's workqueue (leader only).",
	}, []string{labelResource})

	// ManagementConnected is 1 while the management cluster answers.
	ManagementConnected = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "regionsync_management_connected",
		Help: "1 when the management cluster's API server answers, else 0.",
	})

	// RegionStatusPublished is 1 while the leader publishes its Region status on management.
	RegionStatusPublished = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "regionsync_region_status_published",
		Help: "1 when the leader's last attempt to publish the Region status on management succeeded, 0 when it failed (the Region kind not installed, management unreachable, the write refused). 0 also on a replica that publishes nothing (a standby, or the Region status turned off): read it with regionsync_shard_claimed.",
	})

	// ManagementIdentityMismatch is 1 while the agent refuses a management cluster whose identity
	// differs from the recorded or configured one (it writes and deletes nothing meanwhile).
	ManagementIdentityMismatch = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "regionsync_management_identity_mismatch",
		Help: "1 while the management cluster's identity (kube-system UID) differs from the recorded or configured one and the agent writes and deletes nothing, else 0.",
	})

	// ManagementCredentialExpiry is when the management credential this replica uses expires
	// (Unix seconds; 0 when it is not a ServiceAccount token, whose expiry the agent cannot read).
	ManagementCredentialExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "regionsync_management_credential_expiry_timestamp_seconds",
		Help: "When the management credential (ServiceAccount token) this replica uses expires, in Unix seconds; 0 when unknown (not a ServiceAccount token). With credential renewal on it moves forward at every renewal.",
	})

	// FanOutNamespaces counts, per resource kind, the namespaces of the region that fan-out
	// objects' selectors match, the copies there that are current, and the namespaces where a
	// copy failed (an unmarked object in the way, a refused write), summed over the kind's
	// fan-out objects.
	FanOutNamespaces = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regionsync_fanout_namespaces",
		Help: "Namespace fan-out by resource kind, summed over its fan-out objects: namespaces matching (state=matching), current copies (state=current), namespaces whose copy failed (state=failed).",
	}, []string{labelResource, "state"})

	// CredentialRenewals counts management credential renewals by result: renewed (a new token
	// from management), loaded (a newer token found in the kubeconfig Secret), error.
	CredentialRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regionsync_management_credential_renewals_total",
		Help: "Management credential renewals by result: renewed (a new token from management), loaded (a newer token found in the kubeconfig Secret), error.",
	}, []string{labelResult})
)

// Collectors are every regionsync metric.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{Syncs, SyncDuration, SecretUploads, DeletionsHeld, ManagementConnected,
		Objects, ShardClaimed, ShardConflict, WriteLag, WriteFights, ManagementIdentityMismatch, KindWarm, PassBacklog, RegionStatusPublished,
		ManagementCredentialExpiry, CredentialRenewals, FanOutNamespaces}
}

func init() {
	metrics.Registry.MustRegister(Collectors()...)
}
