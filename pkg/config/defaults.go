package config

import "time"

// Defaults of the durations and client limits (Default fills the durations; the management
// client limits apply where management.qps and management.burst are 0).
const (
	DefaultLeaseDuration     = 15 * time.Second
	DefaultRenewDeadline     = 10 * time.Second
	DefaultRetryPeriod       = 2 * time.Second
	DefaultResyncPeriod      = 10 * time.Minute
	DefaultHeartbeatInterval = 30 * time.Second
	// DefaultDeletionWindow is the deletion budget's sliding window.
	DefaultDeletionWindow = 10 * time.Minute
	// Management client limits: client-go's 5 requests/s would throttle initial syncs.
	DefaultManagementQPS   = 50
	DefaultManagementBurst = 100
)
