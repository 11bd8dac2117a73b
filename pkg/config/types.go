// Package config is the agent's configuration file format (docs/configuration.md): its types,
// strict decoding, and the defaults and checks of the fields only the file has (leader election,
// telemetry, the management kubeconfig and client limits). Every field the file shares with the
// library is defaulted and validated by pkg/regionsync, once: AgentConfig.Options turns a file
// into regionsync.Options, and Validate runs the library's own checks on them, naming the file's
// fields. cmd/agent loads a file and hands its Options to regionsync.New.
package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/regionsync"
)

// APIVersion and Kind identify an agent configuration file.
const (
	APIVersion = fleetspec.APIVersion
	Kind       = "AgentConfig"
)

// The vocabulary the file shares with the library (the shard, fan-out, strategies) and with the
// hub's configuration file (leases, leader election, tracing).
type (
	// ShardConfig is the shard definition, the library's regionsync.Shard.
	ShardConfig = regionsync.Shard
	// ResourceConfig is one kind to sync, named by its group, version and kind (the agent syncs
	// every kind of a file as an unstructured object); its other fields are regionsync.Resource's.
	// It is the engine's own description of a kind: the file's value reaches Options one way
	// (AgentConfig.Options), and the engine's settings are built from Options, never from it.
	ResourceConfig = fleetspec.Resource
	// FanOutConfig configures namespace fan-out for one kind, the library's regionsync.FanOut.
	FanOutConfig = regionsync.FanOut
	// LeaseTimings times a Lease.
	LeaseTimings = fleetspec.LeaseTimings
	// LeaderElectionConfig configures the local leader election.
	LeaderElectionConfig = fleetspec.LeaderElection
	// TracingConfig configures the OTLP trace exporter.
	TracingConfig = fleetspec.Tracing
	// Strategy says how spec is written to the local copy.
	Strategy = regionsync.Strategy
	// AdoptionPolicy says what happens to a pre-existing, unmarked local object.
	AdoptionPolicy = regionsync.Adoption
	// ValidationError lists every invalid field of a configuration, one per line.
	ValidationError = fleetspec.ValidationError
)

// The strategies and adoption policies a resource may name.
const (
	StrategyReplace = regionsync.StrategyReplace
	StrategyApply   = regionsync.StrategyApply
	AdoptionAdopt   = regionsync.AdoptionAdopt
	AdoptionRefuse  = regionsync.AdoptionRefuse
)

// TypeMeta is the apiVersion and kind every configuration file carries.
func TypeMeta() metav1.TypeMeta { return metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind} }

// AgentConfig is the whole configuration file of one regional agent.
type AgentConfig struct {
	metav1.TypeMeta `json:",inline"`

	// Region names the regional cluster this agent runs in (a DNS label, e.g. "us-east-1").
	Region string `json:"region"`
	// AnnotationDomain is the prefix of every annotation, label and finalizer the agent writes.
	// "cloud.teleport.dev" gives gravitational/sync-controller's keys.
	AnnotationDomain string `json:"annotationDomain,omitempty"`
	// Management says how to reach the management cluster.
	Management ManagementConfig `json:"management"`
	// Shard selects which management objects belong to this region and how their names map.
	Shard ShardConfig `json:"shard"`
	// Resources lists the kinds to sync; at least one.
	Resources []ResourceConfig `json:"resources"`
	// LeaderElection configures the election among this region's replicas.
	LeaderElection LeaderElectionConfig `json:"leaderElection,omitempty"`
	// DeletionBudget limits deletions caused by objects vanishing from management.
	DeletionBudget DeletionBudgetConfig `json:"deletionBudget,omitempty"`
	// ResyncPeriod is how often every cached object is reconciled again (a resync writes nothing
	// when the object is in sync).
	ResyncPeriod metav1.Duration `json:"resyncPeriod,omitempty"`
	// Telemetry configures metrics, health probes and tracing.
	Telemetry TelemetryConfig `json:"telemetry,omitempty"`
}

// ManagementConfig locates the management cluster.
type ManagementConfig struct {
	// Kubeconfig is the path of the management cluster's kubeconfig file (mounted from a Secret).
	Kubeconfig string `json:"kubeconfig"`
	// Namespace holds the shard Leases on management.
	Namespace string `json:"namespace,omitempty"`
	// QPS and Burst limit the agent's requests to management client-side. QPS 0 (the default):
	// no client-side limit; API Priority and Fairness on management queues the fleet's requests.
	// Burst 0: twice QPS.
	QPS   float32 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// ClusterID confirms the management cluster's identity (the UID of its kube-system
	// namespace). Empty: the identity the agent recorded at its first claim is the expected one.
	// Set it to accept a new management cluster after the agent refused one whose identity
	// differs from its record (docs/design/safety.md#management-identity-pinning).
	ClusterID string `json:"clusterID,omitempty"`
	// Claim times the shard claim, the Lease "region-<region>" on management that the local
	// leader renews (defaults 75s, 35s, 25s: one management write per 25 s per idle region, its
	// only periodic one; the renewal is the region's heartbeat). A new local leader of the same
	// fleet takes the claim over at once whatever these are; they bound how long another fleet
	// waits for a silent one, how long a leader cut off from management keeps its claim, and
	// when the hub judges the region silent (lease duration + its grace).
	Claim LeaseTimings `json:"claim,omitempty"`
	// StartJitter spreads a fleet's start on management: at start the agent waits a random time
	// between 0 and this before its first request to management, so that regions restarted
	// together (a fleet upgraded at once, management restored and every agent restarted) do not
	// all connect, verify management and claim in the same second. Default 5s; 0s: no wait.
	StartJitter *metav1.Duration `json:"startJitter,omitempty"`
	// CredentialRenewal renews the kubeconfig's token (the region's ServiceAccount token on
	// management) before it expires and writes the new one into the Secret the kubeconfig is
	// mounted from. Off by default; the shipped overlays turn it on.
	CredentialRenewal CredentialRenewalConfig `json:"credentialRenewal,omitempty"`
}

// CredentialRenewalConfig configures the renewal of the management credential
// (docs/operations/credentials.md). With it on, the kubeconfig's token
// must be a ServiceAccount token (scripts/region-kubeconfig.sh makes one); the agent asks
// management for a new token of that ServiceAccount (the TokenRequest API: its identity needs
// create on its own serviceaccounts/token), uses it at once and writes it into the Secret (its
// identity in the region needs get and update on that Secret), so that a restart starts with it.
type CredentialRenewalConfig struct {
	// Enabled turns the renewal on.
	Enabled bool `json:"enabled,omitempty"`
	// SecretName and SecretNamespace name the regional Secret holding the management kubeconfig
	// (defaults: fleetspec.DefaultCredentialSecret in leaderElection.namespace).
	SecretName      string `json:"secretName,omitempty"`
	SecretNamespace string `json:"secretNamespace,omitempty"`
	// SecretKey is the Secret's key holding the kubeconfig (default fleetspec.DefaultCredentialSecretKey).
	SecretKey string `json:"secretKey,omitempty"`
	// Lifetime is requested for every new token (default: the lifetime of the token in use; at
	// least 10m; the API server may cap it).
	Lifetime metav1.Duration `json:"lifetime,omitempty"`
	// RenewBefore: a token is renewed when less than this is left of it (default: a third of its
	// lifetime, that is at two thirds of it).
	RenewBefore metav1.Duration `json:"renewBefore,omitempty"`
}

// DeletionBudgetConfig bounds the local deletions the remote side causes, per kind: copies whose
// remote object vanished without passing through the finalizer (orphans) and copies of remote
// objects terminating en masse (docs/design/safety.md#deletion-budget).
type DeletionBudgetConfig struct {
	// MaxFraction of a kind's managed local objects that may be orphaned at once before
	// deletions are held (0 < f <= 1, default 0.5).
	MaxFraction *float64 `json:"maxFraction,omitempty"`
	// MinObjects is the number of orphans always allowed, so small shards can delete (default 10).
	MinObjects *int `json:"minObjects,omitempty"`
	// Window is the sliding window over which budgeted deletions (orphans and mass termination)
	// are counted (default 10m).
	Window metav1.Duration `json:"window,omitempty"`
}

// TelemetryConfig configures the agent's HTTP endpoints and tracing.
type TelemetryConfig struct {
	// MetricsAddr serves /metrics ("0" disables).
	MetricsAddr string `json:"metricsAddr,omitempty"`
	// SecureMetrics serves metrics over HTTPS with Kubernetes authn/authz.
	SecureMetrics bool `json:"secureMetrics,omitempty"`
	// HealthAddr serves /healthz and /readyz ("0" disables, for tests only).
	HealthAddr string `json:"healthAddr,omitempty"`
	// HeartbeatInterval, when set, makes the leader also rewrite its Region's
	// status.heartbeatTime this often when nothing changed. Default 0: the Region status is
	// written only when it changes (within seconds), and the region's heartbeat is its shard
	// Lease's renewal (management.claim), an idle region's only periodic management write.
	HeartbeatInterval metav1.Duration `json:"heartbeatInterval,omitempty"`
	// Tracing configures OpenTelemetry traces.
	Tracing TracingConfig `json:"tracing,omitempty"`
}
