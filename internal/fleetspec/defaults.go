package fleetspec

import "time"

// Defaults of the durations and client limits (the management client limits apply where
// management.qps and management.burst are 0).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	// DefaultRetryPeriod is how often the local leader renews its Lease (a write to the region's
	// own API server, 2.5 writes/s) and how often a standby tries to take it (client-go waits
	// 1–2.2 × this between tries): a standby notices a released Lease within about a second, and
	// takes a crashed leader's Lease between leaseDuration − 0.4 s and leaseDuration + 1.8 s after
	// the crash (it counts the lease from when it saw the last renewal). At 1 s the crash takeover
	// spread to leaseDuration + 4.4 s, past the target of leaseDuration + 2 s
	// (docs/decisions/2026-11-25-crash-takeover-retry-period.md).
	DefaultRetryPeriod = 400 * time.Millisecond
	// DefaultClaimLeaseDuration, DefaultClaimRenewDeadline and DefaultClaimRetryPeriod time the
	// shard claim on management (management.claim). Its renewal, every 25 s, is an idle region's
	// only periodic management write and its heartbeat: 0.04 writes/s per idle region (the
	// fleet target is <= 0.05, docs/decisions/2026-11-26-idle-management-cost.md). A leader that cannot renew gives up at the
	// latest 25 + 35 = 60 s after its last renewal, 15 s before another fleet may take the
	// Lease (75 s after the renewal it saw); the hub judges a region silent after the lease
	// duration plus its grace. A failover within a fleet does not wait for them: the new local
	// leader has the claim's identity.
	DefaultClaimLeaseDuration = 75 * time.Second
	DefaultClaimRenewDeadline = 35 * time.Second
	DefaultClaimRetryPeriod   = 25 * time.Second
	// DefaultStartJitter is management.startJitter's default: an agent's first request to
	// management waits a random 0–5 s, so that a fleet restarted at once spreads its
	// connections, identity checks and claims over 5 s (docs/decisions/2026-11-26-restart-storm.md).
	DefaultStartJitter  = 5 * time.Second
	DefaultResyncPeriod = 10 * time.Minute
	// DefaultHeartbeatInterval is telemetry.heartbeatInterval's default: 0, the Region status
	// is written only when it changes (the shard Lease's renewal is the heartbeat).
	DefaultHeartbeatInterval time.Duration = 0
	// DefaultRegionRecheck is how often the Region status reporter looks again for a Region
	// kind that management does not serve.
	DefaultRegionRecheck = 30 * time.Second
	// DefaultDeletionWindow is the deletion budget's sliding window.
	DefaultDeletionWindow = 10 * time.Minute
	// DefaultManagementQPS is the management client's request rate where management.qps is 0:
	// negative, no client-side limit (as controller-runtime does for the local cluster). API
	// Priority and Fairness on management (deploy/kustomize/management/flowcontrol.yaml) queues a
	// fleet's requests fairly, per region, so that no client-side limiter bounds one region's
	// initial sync (a 50 requests/s limit capped it at 25 objects/s: docs/decisions/2026-11-25-initial-sync-write-path.md).
	DefaultManagementQPS = -1
	// DefaultManagementBurstPerQPS sets management.burst, where it is 0 and management.qps is set,
	// to this multiple of management.qps.
	DefaultManagementBurstPerQPS = 2
)

// Defaults of the names, counts and addresses.
const (
	DefaultAnnotationDomain    = "regionsync.dev"
	DefaultManagementNamespace = "regionsync-system"
	DefaultLeaderNamespace     = "regionsync-system"
	DefaultConcurrency         = 4
	DefaultDeletionMaxFraction = 0.5
	DefaultDeletionMinObjects  = 10
	DefaultMetricsAddr         = ":8080"
	DefaultHealthAddr          = ":8081"
	DefaultSamplingRatio       = 1.0
	// DefaultCredentialSecret is the regional Secret the management kubeconfig is mounted from
	// (the overlays' name), and DefaultCredentialSecretKey its key.
	DefaultCredentialSecret    = "regionsync-management-kubeconfig"
	DefaultCredentialSecretKey = "kubeconfig"
)
