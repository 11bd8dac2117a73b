package regionsync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/regionsync/regionsync/internal/credential"
	"github.com/regionsync/regionsync/internal/health"
	"github.com/regionsync/regionsync/internal/syncer"
)

// Syncer is regionsync running inside a host's controller manager. New adds it to the
// manager; the manager's Start runs it.
type Syncer struct {
	mgr        manager.Manager
	engine     *syncer.Engine
	leader     *fleetLeader
	credential *credential.Credential
}

// Stats are one kind's object counts.
type Stats struct {
	// Resource is the kind's dotted name ("Tenant.demo.regionsync.dev", "ConfigMap").
	Resource string
	// Counts are the shard's objects by state after their last sync: Synced, Pending, Failed,
	// Paused, Invalid.
	Counts map[string]int
	// DeletionsHeld is the number of local deletions the deletion budget holds back.
	DeletionsHeld int
	// LastSync is when the kind last wrote anything.
	LastSync time.Time
	// FanOutMatching, FanOutCurrent and FanOutFailed sum the kind's namespace fan-out objects'
	// counts: namespaces matching, copies current, namespaces whose copy failed.
	FanOutMatching, FanOutCurrent, FanOutFailed int
}

// ClaimState is the shard claim as this replica sees it.
type ClaimState struct {
	// Held: this replica holds the region's shard Lease on management.
	Held bool
	// Syncing: held, and no other live shard overlaps; this replica syncs.
	Syncing bool
	// Reason is a CamelCase word: Claimed, Waiting, HeldByOtherFleet, ShardOverlap.
	Reason string
	// Message says it for a person.
	Message string
}

// New adds the syncer to mgr: the management session (connected lazily, retried in the
// background), the local and management caches and their warm-up on every replica, and, on the
// elected leader only (or on every replica when the host runs without leader election, each
// with its own claim identity by default), the shard claim on management, one controller per
// kind and the Region status reporter.
//
// The manager's cache need not be filtered: only objects carrying this region's mark are ever
// treated as copies, written or deleted. A host that wants the cache to hold only copies builds
// its manager with LocalCacheOptions.
//
// Errors wrap ErrInvalidOptions when opts are invalid.
func New(mgr manager.Manager, opts Options) (*Syncer, error) {
	opts, settings, typed, err := opts.complete(mgr.GetScheme())
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = mgr.GetLogger().WithName("regionsync")
	}
	// Every management client is built from the credential's config: with renewal on, each
	// request carries the token in use, renewed or not.
	credParams := credential.Params{Config: opts.Management.Config, Log: log.WithName("credential")}
	if r := opts.Management.CredentialRenewal; r != nil {
		credParams.Renew = &credential.Renewal{
			Local: mgr.GetClient(), LocalReader: mgr.GetAPIReader(),
			Secret: r.Secret, Key: r.SecretKey, Lifetime: r.Lifetime, RenewBefore: r.RenewBefore,
		}
	}
	cred, management, err := credential.New(credParams)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if err := mgr.Add(cred); err != nil {
		return nil, err
	}
	opts.Management.Config = management
	engineParams := syncer.Params{
		Settings: settings, Manager: mgr, Management: opts.Management.Config, Typed: typed, Log: log.WithName("sync"),
	}
	if opts.TracerProvider != nil {
		engineParams.Tracer = opts.TracerProvider.Tracer("regionsync.dev/agent")
	}
	engine, err := syncer.NewEngine(engineParams)
	if err != nil {
		return nil, err
	}
	leader, err := newFleetLeader(settings, opts, mgr, engine, cred, log.WithName("claim"))
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(leader); err != nil {
		return nil, err
	}
	return &Syncer{mgr: mgr, engine: engine, leader: leader, credential: cred}, nil
}

// ManagementCredentialExpiry is when the management credential in use expires: the
// ServiceAccount token's expiry, renewed or not; zero when unknown (not a ServiceAccount token).
func (s *Syncer) ManagementCredentialExpiry() time.Time { return s.credential.Expiry() }

// Healthz is the syncer's liveness check for the host's /healthz. It never depends on
// management: an unreachable management cluster is no reason to restart a region's agent.
func (s *Syncer) Healthz() healthz.Checker { return health.Liveness() }

// Readyz is the syncer's readiness check for the host's /readyz: the local caches have synced,
// and management's identity is not refused (the error says what differs and how to confirm).
func (s *Syncer) Readyz() healthz.Checker {
	caches := health.Readiness(s.mgr.GetCache())
	return func(req *http.Request) error {
		if id := s.engine.ManagementIdentity(); id.Checked && !id.Accepted {
			return fmt.Errorf("%w: %s", ErrManagementIdentity, id.Message)
		}
		return caches(req)
	}
}

// Claim returns the shard claim as this replica sees it.
func (s *Syncer) Claim() ClaimState {
	c := s.leader.claimState()
	return ClaimState{Held: c.Held, Syncing: c.Syncing, Reason: c.Reason, Message: c.Message}
}

// ManagementConnected reports whether the last probe of the management cluster succeeded.
func (s *Syncer) ManagementConnected() bool { return s.engine.ManagementConnected() }

// Stats returns each kind's object counts (empty until management has been reached).
func (s *Syncer) Stats() []Stats {
	in := s.engine.Stats()
	out := make([]Stats, len(in))
	for i, st := range in {
		counts := make(map[string]int, len(st.Counts))
		for state, n := range st.Counts {
			counts[string(state)] = n
		}
		out[i] = Stats{Resource: st.Resource, Counts: counts, DeletionsHeld: st.DeletionsHeld, LastSync: st.LastSync,
			FanOutMatching: st.FanOutMatching, FanOutCurrent: st.FanOutCurrent, FanOutFailed: st.FanOutFailed}
	}
	return out
}

// RemoteKeys lists the keys of one kind's objects in the shard as this replica's management cache
// holds them (objects outside the label selector are never there). It returns an error wrapping
// ErrNoManagementSession until management has been reached.
func (s *Syncer) RemoteKeys(ctx context.Context, gvk schema.GroupVersionKind) ([]types.NamespacedName, error) {
	keys, err := s.engine.RemoteKeys(ctx, gvk)
	if errors.Is(err, syncer.ErrNoSession) {
		return nil, fmt.Errorf("%w: %w", ErrNoManagementSession, err)
	}
	return keys, err
}

// LocalCacheOptions are cache options for a host manager that should cache the synced kinds
// only where they carry this region's mark (the agent binary uses them): memory then does not
// grow with unrelated objects of the same kinds. Every kind in the manager's cache is filtered,
// so a host with its own controllers for other objects of these kinds should not use them.
// The cache holds the copies of kinds given as unstructured objects (Resource.Object) in a
// compact form (typed metadata, the rest as JSON) that every Get and List expands again; the
// host's informers of those kinds then hand such objects to event handlers (read them through
// metav1.Object), and reads of them must deep-copy (do not set UnsafeDisableDeepCopy for them). Only Region, AnnotationDomain, ResyncPeriod and the Resources' objects of opts
// are read.
func LocalCacheOptions(opts Options) cache.Options {
	opts = opts.WithDefaults()
	return syncer.LocalCacheOptions(opts.Region, opts.AnnotationDomain, opts.ResyncPeriod, compactedKinds(opts))
}

// LocalNewCache is the NewCache of a host manager whose cache options are LocalCacheOptions (the
// agent binary sets both): the informers of the kinds given as unstructured objects decode watch
// events straight into the compact form the cache holds them in, rather than into unstructured
// objects the cache then converts, which is most of a warm standby's CPU during an initial sync.
// A manager without it caches the same objects, at that cost. Only the Resources' objects of opts
// are read.
func LocalNewCache(opts Options) cache.NewCacheFunc {
	return syncer.LocalNewCache(compactedKinds(opts))
}

// compactedKinds are the kinds of opts' Resources given as unstructured objects: the kinds the
// engine's caches hold compacted.
func compactedKinds(opts Options) []schema.GroupVersionKind {
	var compacted []schema.GroupVersionKind
	for _, r := range opts.Resources {
		if u, ok := r.Object.(*unstructured.Unstructured); ok {
			compacted = append(compacted, u.GroupVersionKind())
		}
	}
	return compacted
}
