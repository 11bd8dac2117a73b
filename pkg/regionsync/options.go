package regionsync

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/internal/syncer/budget"
)

// Sentinel errors. Errors returned by New and Decommission wrap one of them, so a host can
// tell a configuration mistake from a failure of its cluster.
var (
	// ErrInvalidOptions: the Options (or the configuration they came from) are invalid; the
	// error names the field.
	ErrInvalidOptions = errors.New("regionsync: invalid options")
	// ErrNoManagementSession: the management cluster has not been reached yet.
	ErrNoManagementSession = errors.New("regionsync: no management session")
	// ErrManagementIdentity: the management cluster's identity differs from the recorded (or
	// Management.ClusterID) one; nothing is written or deleted until an operator confirms.
	ErrManagementIdentity = errors.New("regionsync: management cluster identity refused")
)

// Options configure a Syncer. The zero value of every field but Region, Management.Config and
// Resources is a working default.
type Options struct {
	// Region names the regional cluster the host runs in (a DNS label, e.g. "us-east-1"). It is
	// the mark on every local copy and the name of the shard Lease and Region on management.
	Region string
	// AnnotationDomain prefixes every annotation, label and finalizer the syncer writes (default
	// "regionsync.dev"; "cloud.teleport.dev" gives gravitational/sync-controller's keys).
	AnnotationDomain string
	// Management is the management cluster.
	Management Management
	// Shard selects which management objects belong to this region and how their names map.
	Shard Shard
	// Resources are the kinds to sync; at least one.
	Resources []Resource
	// DeletionBudget bounds local deletions caused by objects vanishing from management.
	DeletionBudget DeletionBudget
	// ResyncPeriod is how often every cached object is reconciled again (default 10m; a resync
	// writes nothing when the object is in sync).
	ResyncPeriod time.Duration
	// Claim configures the shard claim on management.
	Claim Claim
	// HeartbeatInterval, when set, also rewrites the Region's status.heartbeatTime this often
	// when nothing changed. Default 0: the Region status is written only when it changes, and
	// the region's heartbeat is the shard Lease's renewal (Claim.RetryPeriod), an idle region's
	// only periodic management write.
	HeartbeatInterval time.Duration
	// DisableRegionStatus turns off the Region status on management (the Region kind's CRD
	// need not be installed then). By default the leader publishes its health on the Region
	// named after the region; when management does not serve the Region kind it logs one
	// warning saying so, publishes nothing, looks for the kind again every 30 s, and syncs as
	// usual (regionsync_region_status_published is 0).
	DisableRegionStatus bool
	// TracerProvider traces every sync; nil runs no tracing code at all. The host owns it (and
	// its shutdown); the syncer never builds an exporter.
	TracerProvider trace.TracerProvider
	// Logger is the syncer's logger (default: the manager's logger, named "regionsync").
	Logger logr.Logger
	// Version is reported on the Region (default "dev").
	Version string
}

// Management locates the management cluster.
type Management struct {
	// Config is the management cluster's client config (required). It is connected lazily: the
	// host starts, serves health and keeps local copies while management is unreachable. Without
	// a UserAgent of its own, requests carry "regionsync/<Version> (region <Region>)", so that
	// management's audit log and API Priority and Fairness debugging name the region (and field
	// managers without an explicit name read "regionsync").
	Config *rest.Config
	// Namespace holds the shard Leases on management (default "regionsync-system").
	Namespace string
	// ClusterID confirms the management cluster's identity (the UID of its kube-system
	// namespace). Empty: the identity recorded at the first claim (in the ConfigMap
	// "regionsync-management-identity-<region>" of Claim.FleetNamespace) is expected;
	// management with another identity is refused: nothing is written or deleted, and Readyz
	// says why, until an operator sets ClusterID or deletes the record.
	ClusterID string
	// CredentialRenewal renews Config's credential, a ServiceAccount token, before it expires.
	// nil (the default) uses Config as it is: a host with a static kubeconfig (or a client
	// certificate, or an exec plugin) leaves it off. The token's expiry is published either way
	// when Config holds a ServiceAccount token (ManagementCredentialExpiry, the metric
	// regionsync_management_credential_expiry_timestamp_seconds, the Region status).
	CredentialRenewal *CredentialRenewal
	// StartJitter spreads a fleet's start on management: the syncer waits a random time between
	// 0 and this before its first request to management, so that regions restarted together do
	// not all connect, verify management and claim in the same second. 0 (the library's
	// default): no wait. The agent binary waits up to 5 s (management.startJitter).
	StartJitter time.Duration
}

// CredentialRenewal renews the management credential, a ServiceAccount token (as
// scripts/region-kubeconfig.sh makes), on every replica: well before the token expires, the
// syncer asks management for a new token of the same ServiceAccount (the TokenRequest API,
// authenticated by the current token; the ServiceAccount needs create on its own
// serviceaccounts/token), every management client uses it from its next request on, and it is
// written into the local Secret the kubeconfig comes from (the host's identity needs get and
// update on that Secret), so that a restart after the first token expired starts with it: at
// start the syncer uses the Secret's token when it outlives Config's (a mounted Secret's file
// lags the Secret). Renewed tokens are bound to the ServiceAccount: deleting it revokes them all.
type CredentialRenewal struct {
	// Secret is the local Secret holding the management kubeconfig (default: the Secret
	// "regionsync-management-kubeconfig" in Claim.FleetNamespace).
	Secret types.NamespacedName
	// SecretKey is the Secret's key holding the kubeconfig (default "kubeconfig").
	SecretKey string
	// Lifetime is requested for every new token (0: the lifetime of the token in use; at least
	// 10m; the API server may cap it).
	Lifetime time.Duration
	// RenewBefore: a token is renewed when less than this is left of it (0: a third of its
	// lifetime, that is at two thirds of it).
	RenewBefore time.Duration
}

// Shard selects the management objects of this region (the shard rules of
// docs/design/sync-rules.md#shard-and-name-mapping): NamespacePrefix, RemoteResourceSuffix,
// RemoteNamespaceSuffix, LocalNamespaceSuffix, LabelSelector (server-side; convention
// regionsync.dev/region=<region>) and ExcludedNamespaces (local namespaces nothing is ever created,
// written or deleted in, beside the system namespaces and the fleet's own). Empty fields are no
// constraint. It is the engine's own type: Options pass it on as it is.
type Shard = fleetspec.Shard

// Strategy says how spec is written to the local copy.
type Strategy = fleetspec.Strategy

// The strategies.
const (
	// StrategyReplace makes the local copy exactly the remote's; local drift is reverted.
	StrategyReplace = fleetspec.StrategyReplace
	// StrategyApply writes with server-side apply (field manager "regionsync"); fields owned by
	// local controllers survive.
	StrategyApply = fleetspec.StrategyApply
)

// Adoption says what happens to a pre-existing, unmarked local object at a mapped name.
type Adoption = fleetspec.AdoptionPolicy

// The adoption policies.
const (
	// AdoptionRefuse leaves an unmarked object alone and reports it (unless it lives in a
	// namespace created for it by regionsync or sync-controller: that is taken over in place).
	AdoptionRefuse = fleetspec.AdoptionRefuse
	// AdoptionAdopt marks the object as managed and syncs it.
	AdoptionAdopt = fleetspec.AdoptionAdopt
)

// Resource is one kind to sync.
type Resource struct {
	// Object names the kind: a typed object registered in the manager's scheme
	// (&tenantv1.Tenant{}: the syncer then reads it through the host's own informer, so one
	// watch serves the host's controllers and the syncer), or an *unstructured.Unstructured with
	// its GroupVersionKind set. A typed kind's Go type must hold every field the CRD has: the copy
	// is what the type can represent.
	Object client.Object
	// Secrets names local Secrets, controlled by the local object, that are uploaded to
	// "<name><Shard.RemoteResourceSuffix>" in the remote namespace.
	Secrets []string
	// Strategy is StrategyReplace (default) or StrategyApply.
	Strategy Strategy
	// Adoption is the policy for unmarked local objects at a mapped name (default
	// AdoptionRefuse).
	Adoption Adoption
	// DeletePropagation is used when deleting a local copy (default Foreground).
	DeletePropagation metav1.DeletionPropagation
	// Concurrency is the number of parallel syncs of this kind (default 4).
	Concurrency int
	// AllowPrivileged must be true to sync a kind that grants privileges in the region (RBAC
	// objects, ServiceAccounts, admission webhooks and policies, CRDs, APIServices,
	// PriorityClasses, cluster-scoped kinds); New refuses such a kind otherwise.
	AllowPrivileged bool
	// FanOut lets management objects of this kind ask for namespace fan-out with the
	// annotation <domain>/fan-out-namespaces (nil: refused as invalid). Enabling it makes the
	// agent watch the region's namespaces.
	FanOut *FanOut
}

// FanOut configures namespace fan-out for one kind: Enabled, and the management namespaces
// whose objects may fan out beyond the shard's namespace scope (WideSourceNamespaces).
type FanOut = fleetspec.FanOut

// DeletionBudget bounds the local deletions caused by objects vanishing from management.
type DeletionBudget struct {
	// MaxFraction of a kind's copies that may be orphaned at once before deletions are held
	// (nil: 0.5; otherwise 0 < f <= 1).
	MaxFraction *float64
	// MinObjects is the number of orphans always allowed (nil: 10). Zero is meaningful: no
	// orphan deletion without the fraction allowing it.
	MinObjects *int
	// Window is the sliding window over which budgeted deletions are counted (0: 10 minutes).
	Window time.Duration
}

// ClaimScope says who shares a shard claim on management.
type ClaimScope string

const (
	// ClaimPerReplica (the default): every replica claims with its own identity, so exactly one
	// replica writes even when the host runs several replicas with leader election off. A new
	// leader takes the claim over once the previous holder's lease expires (or at once when it
	// released it on a graceful shutdown).
	ClaimPerReplica ClaimScope = "PerReplica"
	// ClaimPerFleet means every replica of one fleet (one local cluster and leader-election
	// namespace) shares one identity, so a new local leader takes the claim over at once. Use it
	// only with the host's leader election on (the agent binary does).
	ClaimPerFleet ClaimScope = "PerFleet"
)

// Claim configures the shard claim, a Lease "region-<region>" on management.
type Claim struct {
	// Scope is ClaimPerReplica (default) or ClaimPerFleet.
	Scope ClaimScope
	// FleetNamespace distinguishes fleets under ClaimPerFleet (the agent uses its local
	// leader-election namespace; default "regionsync-system").
	FleetNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod time the claim as in client-go's leader
	// election (defaults 60s, 40s, 10s: one management write per 10 s per region). Under
	// ClaimPerReplica a replica that crashed holds the claim for up to LeaseDuration.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// withUserAgent returns cfg, or a copy of it with the syncer's User-Agent when it sets none.
func withUserAgent(cfg *rest.Config, region, version string) *rest.Config {
	if cfg == nil || cfg.UserAgent != "" {
		return cfg
	}
	c := rest.CopyConfig(cfg)
	c.UserAgent = fmt.Sprintf("regionsync/%s (region %s)", version, region)
	return c
}

// WithDefaults returns o with every unset field at its default, as New runs them: the one place
// the library's defaults are applied (their values are internal/fleetspec's, documented in
// docs/configuration.md; the configuration file leaves every field it shares with Options to
// them). A host reads the effective values here (the annotation domain, the fleet namespace);
// o itself is not changed.
func (o Options) WithDefaults() Options {
	o.AnnotationDomain = cmp.Or(o.AnnotationDomain, fleetspec.DefaultAnnotationDomain)
	o.Management.Namespace = cmp.Or(o.Management.Namespace, fleetspec.DefaultManagementNamespace)
	o.Claim.Scope = cmp.Or(o.Claim.Scope, ClaimPerReplica)
	o.Claim.FleetNamespace = cmp.Or(o.Claim.FleetNamespace, fleetspec.DefaultLeaderNamespace)
	o.Claim.LeaseDuration = cmp.Or(o.Claim.LeaseDuration, fleetspec.DefaultClaimLeaseDuration)
	o.Claim.RenewDeadline = cmp.Or(o.Claim.RenewDeadline, fleetspec.DefaultClaimRenewDeadline)
	o.Claim.RetryPeriod = cmp.Or(o.Claim.RetryPeriod, fleetspec.DefaultClaimRetryPeriod)
	if o.DeletionBudget.MaxFraction == nil {
		o.DeletionBudget.MaxFraction = ptr.To(fleetspec.DefaultDeletionMaxFraction)
	}
	if o.DeletionBudget.MinObjects == nil {
		o.DeletionBudget.MinObjects = ptr.To(fleetspec.DefaultDeletionMinObjects)
	}
	o.DeletionBudget.Window = cmp.Or(o.DeletionBudget.Window, fleetspec.DefaultDeletionWindow)
	o.ResyncPeriod = cmp.Or(o.ResyncPeriod, fleetspec.DefaultResyncPeriod)
	o.Version = cmp.Or(o.Version, "dev")
	o.Management.Config = withUserAgent(o.Management.Config, o.Region, o.Version)
	if r := o.Management.CredentialRenewal; r != nil {
		c := *r // the host's value stays as it is
		c.Secret.Name = cmp.Or(c.Secret.Name, fleetspec.DefaultCredentialSecret)
		c.Secret.Namespace = cmp.Or(c.Secret.Namespace, o.Claim.FleetNamespace)
		c.SecretKey = cmp.Or(c.SecretKey, fleetspec.DefaultCredentialSecretKey)
		o.Management.CredentialRenewal = &c
	}
	o.Resources = slices.Clone(o.Resources)
	for i := range o.Resources {
		r := &o.Resources[i]
		r.Strategy = cmp.Or(r.Strategy, StrategyReplace)
		r.Adoption = cmp.Or(r.Adoption, AdoptionRefuse) // a management user must not take over what the region made
		r.DeletePropagation = cmp.Or(r.DeletePropagation, metav1.DeletePropagationForeground)
		r.Concurrency = cmp.Or(r.Concurrency, fleetspec.DefaultConcurrency)
	}
	return o
}

// Validate applies the defaults and checks o as New will, returning every invalid field (the
// error wraps ErrInvalidOptions and is a *fleetspec.ValidationError's list). It needs no
// manager: Management.Config may still be nil, and a typed kind's Go type is checked against
// the manager's scheme by New only. pkg/config runs it on the Options a configuration file gives,
// so that a file is checked by the same rules, once, as any host's Options.
func (o Options) Validate() error {
	_, _, err := o.WithDefaults().settings(nil, false)
	return err
}

// complete applies the defaults and validates, once, and returns the defaulted Options, the
// engine's settings and the kinds that are typed in scheme. Errors wrap ErrInvalidOptions.
func (o Options) complete(scheme *runtime.Scheme) (Options, *syncer.Settings, map[schema.GroupVersionKind]bool, error) {
	o = o.WithDefaults()
	s, typed, err := o.settings(scheme, true)
	return o, s, typed, err
}

// settings validates defaulted Options and builds the engine's settings from them. Errors wrap
// ErrInvalidOptions and name every invalid field by its Options path ("shard.remoteResourceSuffix",
// "resources[1].strategy", "claim.leaseDuration", "heartbeatInterval"). With host false (Validate)
// neither Management.Config nor a typed kind's registration in scheme is required.
func (o Options) settings(scheme *runtime.Scheme, host bool) (*syncer.Settings, map[schema.GroupVersionKind]bool, error) {
	var errs field.ErrorList
	if host && o.Management.Config == nil {
		errs = append(errs, field.Required(field.NewPath("management", "config"), "the management cluster's client config"))
	}
	errs = append(errs, fleetspec.ValidateDNSLabel(field.NewPath("region"), o.Region)...)
	errs = append(errs, fleetspec.ValidateAnnotationDomain(field.NewPath("annotationDomain"), o.AnnotationDomain)...)
	errs = append(errs, fleetspec.ValidateDNSLabel(field.NewPath("management", "namespace"), o.Management.Namespace)...)
	errs = append(errs, fleetspec.ValidateClusterID(field.NewPath("management", "clusterID"), o.Management.ClusterID)...)
	errs = append(errs, fleetspec.ValidateStartJitter(field.NewPath("management", "startJitter"), o.Management.StartJitter)...)
	if r := o.Management.CredentialRenewal; r != nil {
		errs = append(errs, fleetspec.ValidateCredentialRenewal(field.NewPath("management", "credentialRenewal"),
			r.Secret.Name, r.Secret.Namespace, r.SecretKey, r.Lifetime, r.RenewBefore)...)
	}
	s := &syncer.Settings{
		Region: o.Region, AnnotationDomain: o.AnnotationDomain,
		ManagementNamespace: o.Management.Namespace, ClusterID: o.Management.ClusterID,
		FleetNamespace:    o.Claim.FleetNamespace,
		Shard:             o.Shard,
		DeletionBudget:    budget.Budget{MaxFraction: *o.DeletionBudget.MaxFraction, MinObjects: *o.DeletionBudget.MinObjects, Window: o.DeletionBudget.Window},
		ResyncPeriod:      o.ResyncPeriod,
		HeartbeatInterval: o.HeartbeatInterval,
		StartJitter:       o.Management.StartJitter,
		Claim:             syncer.LeaseTimings{LeaseDuration: o.Claim.LeaseDuration, RenewDeadline: o.Claim.RenewDeadline, RetryPeriod: o.Claim.RetryPeriod},
	}
	errs = append(errs, fleetspec.ValidateShard(field.NewPath("shard"), &s.Shard)...)
	typed := map[schema.GroupVersionKind]bool{}
	rp := field.NewPath("resources")
	for i, r := range o.Resources {
		var gvk schema.GroupVersionKind
		switch u, ok := r.Object.(*unstructured.Unstructured); {
		case r.Object == nil:
			errs = append(errs, field.Required(rp.Index(i).Child("object"), "the kind to sync"))
			continue
		case ok:
			gvk = u.GroupVersionKind()
		case scheme == nil:
			continue // Validate: the host's scheme decides
		default:
			var err error
			if gvk, err = apiutil.GVKForObject(r.Object, scheme); err != nil {
				errs = append(errs, field.Invalid(rp.Index(i).Child("object"), fmt.Sprintf("%T", r.Object), "not registered in the manager's scheme: "+err.Error()))
				continue
			}
			typed[gvk] = true
		}
		s.Resources = append(s.Resources, fleetspec.Resource{
			Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind,
			Secrets: r.Secrets, Strategy: r.Strategy, Adoption: r.Adoption,
			DeletePropagation: r.DeletePropagation, Concurrency: r.Concurrency, AllowPrivileged: r.AllowPrivileged,
			FanOut: r.FanOut,
		})
	}
	if len(s.Resources) == len(o.Resources) { // indexes match: every kind was named
		errs = append(errs, fleetspec.ValidateResources(rp, s.Resources)...)
	}
	errs = append(errs, fleetspec.ValidateDeletionBudget(field.NewPath("deletionBudget"), *o.DeletionBudget.MaxFraction, *o.DeletionBudget.MinObjects, o.DeletionBudget.Window)...)
	errs = append(errs, fleetspec.ValidateResyncPeriod(field.NewPath("resyncPeriod"), o.ResyncPeriod)...)
	errs = append(errs, fleetspec.ValidateHeartbeatInterval(field.NewPath("heartbeatInterval"), o.HeartbeatInterval)...)
	cp := field.NewPath("claim")
	switch o.Claim.Scope {
	case ClaimPerReplica, ClaimPerFleet:
	default:
		errs = append(errs, field.NotSupported(cp.Child("scope"), o.Claim.Scope, []ClaimScope{ClaimPerReplica, ClaimPerFleet}))
	}
	errs = append(errs, fleetspec.ValidateDNSLabel(cp.Child("fleetNamespace"), o.Claim.FleetNamespace)...)
	errs = append(errs, fleetspec.ValidateLeaseTimings(cp, o.Claim.LeaseDuration, o.Claim.RenewDeadline, o.Claim.RetryPeriod)...)
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidOptions, &fleetspec.ValidationError{Errors: errs})
	}
	return s, typed, nil
}
