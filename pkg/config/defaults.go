package config

import "time"

// Defaults of the durations and client limits (Default fills the durations; the management
// client limits apply where management.qps and management.burst are 0).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	// DefaultRetryPeriod is how often the local leader renews its Lease (a write to the region's
	// own API server, 2.5 writes/s) and how often a standby tries to take it (client-go waits
	// 1–2.2 × this between tries): a standby notices a released Lease within about a second, and
	// takes a crashed leader's Lease between leaseDuration − 0.4 s and leaseDuration + 1.8 s after
	// the crash (it counts the lease from when it saw the last renewal). At 1 s the crash takeover
	// spread to leaseDuration + 4.4 s, past the target of leaseDuration + 2 s
	// (docs/performance.md).
	DefaultRetryPeriod = 400 * time.Millisecond
	// DefaultClaimLeaseDuration, DefaultClaimRenewDeadline and DefaultClaimRetryPeriod time the
	// shard claim on management (management.claim): renewed every 10 s, 0.1 management writes/s
	// per idle region (the fleet target is <= 0.2, docs/performance.md). A failover within a fleet
	// does not wait for them: the new local leader has the claim's identity.
	DefaultClaimLeaseDuration = 60 * time.Second
	DefaultClaimRenewDeadline = 40 * time.Second
	DefaultClaimRetryPeriod   = 10 * time.Second
	DefaultResyncPeriod       = 10 * time.Minute
	DefaultHeartbeatInterval  = 30 * time.Second
	// DefaultDeletionWindow is the deletion budget's sliding window.
	DefaultDeletionWindow = 10 * time.Minute
	// DefaultManagementQPS is the management client's request rate where management.qps is 0:
	// negative, no client-side limit (as controller-runtime does for the local cluster). API
	// Priority and Fairness on management (deploy/kustomize/management/flowcontrol.yaml) queues a
	// fleet's requests fairly, per region, so that no client-side limiter bounds one region's
	// initial sync (a 50 requests/s limit capped it at 25 objects/s: docs/performance.md).
	DefaultManagementQPS = -1
	// DefaultManagementBurstPerQPS sets management.burst, where it is 0 and management.qps is set,
	// to this multiple of management.qps.
	DefaultManagementBurstPerQPS = 2
)
