package syncer

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/regionsync/regionsync/internal/shard"
)

// EventSource is the reporting controller of the agent's Kubernetes Events.
const EventSource = "regionsync-agent"

// Engine owns the agent's connection to management and runs one controller per configured kind.
//
// The engine itself runs on every replica (NeedLeaderElection is false): it waits for
// management, starts the management cache and warms the local informers, so a standby that
// becomes leader does not re-list anything; each kind's event handlers are registered once, when
// its informers have synced. The controllers (workers and queues) run only through
// RunControllers, which the leader calls while it holds the region's shard claim; without a
// controller the handlers enqueue nothing, and nothing is written to either cluster.
type Engine struct {
	cfg *Settings
	mgr manager.Manager
	// remoteConfig reaches management through guard: its connections are counted and its writes
	// refused until management's identity is verified after the last new one (connVerifier).
	remoteConfig *rest.Config
	// remoteHTTP is remoteConfig's HTTP client, shared by the management clients.
	remoteHTTP   *http.Client
	guard        *connVerifier
	keys         shard.Keys
	mapper       *shard.Mapper
	gvks         []schema.GroupVersionKind
	secretCaches map[string]cache.Cache
	// namespaces caches the region's namespaces (metadata only) when a kind fans out; nil
	// otherwise.
	namespaces cache.Cache
	log        logr.Logger
	// typed are the kinds the host caches as Go types; local is the engine's client of the
	// local cluster (cached reads of the managed kinds, typed ones converted).
	typed map[schema.GroupVersionKind]bool
	local client.Client

	connected atomic.Bool
	// disconnectedAt is when management last stopped answering.
	disconnectedAt atomic.Pointer[time.Time]
	// session is the management cluster, set once management has answered.
	session      atomic.Pointer[cluster.Cluster]
	sessionReady chan struct{}
	// reconcilers, one per kind, built with the session (read-only once sessionReady is
	// closed) and kept so that object states survive a lost and regained claim.
	reconcilers []*Reconciler
	// kinds are the reconcilers' event plumbing (handlers registered once, the running
	// controller's queue), in the same order.
	kinds []*kind
	// writes gates every write to management and to the local cluster: open only while the
	// shard claim is held (RunControllers).
	writes ClaimGate
	tracer trace.Tracer
	// identity pins the management cluster's identity (identityPin).
	identity *identityPin
	// localEvents and remoteEvents write the engine's Events to each cluster (EventRecorder);
	// remoteEvents is set with the session.
	localEvents, remoteEvents *EventRecorder
}

// Params are what NewEngine needs.
type Params struct {
	// Settings are the complete, valid configuration.
	Settings *Settings
	// Manager is the local (host) manager; its cache may be filtered (LocalCacheOptions) or not.
	Manager manager.Manager
	// Management is the management cluster's client config.
	Management *rest.Config
	// Typed are the configured kinds the host caches as Go types (registered in its scheme).
	Typed map[schema.GroupVersionKind]bool
	Log   logr.Logger
	// Tracer traces every reconcile and write; nil runs no tracing code at all.
	Tracer trace.Tracer
}

// NewEngine builds the engine and adds it, and the caches of the configured local secrets, to
// the local manager.
func NewEngine(p Params) (*Engine, error) {
	cfg, mgr := p.Settings, p.Manager
	mapper, err := shard.NewMapper(cfg.Shard)
	if err != nil {
		return nil, err
	}
	local, err := newLocalClient(mgr, p.Typed)
	if err != nil {
		return nil, fmt.Errorf("local client: %w", err)
	}
	guard := newConnVerifier()
	e := &Engine{
		writes: ClaimGate{verify: guard.ensure},
		cfg:    cfg, mgr: mgr, log: p.Log, guard: guard, remoteConfig: guard.wrap(p.Management),
		keys: shard.NewKeys(cfg.AnnotationDomain), mapper: mapper, gvks: cfg.GVKs(),
		sessionReady: make(chan struct{}), tracer: p.Tracer,
		typed: p.Typed, local: local,
	}
	if e.localEvents, err = newEventRecorder(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetScheme(), nil, p.Log.WithName("local-events")); err != nil {
		return nil, fmt.Errorf("local events: %w", err)
	}
	localEvents := e.localEvents
	record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.FleetNamespace, Name: IdentityRecordName(cfg.Region)}}
	e.identity = &identityPin{
		base: p.Management, guard: e.guard, local: mgr.GetClient(), reader: mgr.GetAPIReader(), record: client.ObjectKeyFromObject(record),
		confirmed: cfg.ClusterID,
		events: func(eventType, reason, note string) {
			localEvents.Eventf(record, nil, eventType, reason, "VerifyManagement", "%s", note)
		},
	}
	guard.verify = func(ctx context.Context) { e.identity.check(ctx) }
	// One HTTP client (one connection, HTTP/2 multiplexed) for the engine's management cache and
	// client and for the host's claim and Region clients: the guard's own Dial keeps client-go
	// from sharing a transport between them by itself, and each connection of its own would cost
	// management a TLS handshake and an identity check at every start.
	if e.remoteHTTP, err = rest.HTTPClientFor(e.remoteConfig); err != nil {
		return nil, fmt.Errorf("management client: %w", err)
	}
	if e.secretCaches, err = addSecretCaches(mgr, cfg); err != nil {
		return nil, err
	}
	if e.namespaces, err = addNamespaceCache(mgr, cfg); err != nil {
		return nil, err
	}
	if err := mgr.Add(e); err != nil {
		return nil, err
	}
	return e, nil
}

// NeedLeaderElection is false: every replica connects and keeps warm caches.
func (e *Engine) NeedLeaderElection() bool { return false }

// ManagementConnected reports whether the last probe of management succeeded.
func (e *Engine) ManagementConnected() bool { return e.connected.Load() }

// SessionReady is closed once the management cache has been started.
func (e *Engine) SessionReady() <-chan struct{} { return e.sessionReady }

// ManagementConfig is the rest.Config the engine uses for management.
func (e *Engine) ManagementConfig() *rest.Config { return e.remoteConfig }

// ManagementHTTPClient is the HTTP client of ManagementConfig that the engine's management cache
// and client use: clients built on it share their connection to management.
func (e *Engine) ManagementHTTPClient() *http.Client { return e.remoteHTTP }

// FirstPassDone reports whether every kind's informers exist on both clusters and every object
// of the shard in the management cache has been reconciled at least once (latched per kind, and
// checked at most every firstPassRecheck until then, so a large shard costs one cache walk per
// interval, not per call).
func (e *Engine) FirstPassDone(ctx context.Context) bool {
	select {
	case <-e.sessionReady:
	default:
		return false
	}
	s := e.session.Load()
	done := true
	for _, r := range e.reconcilers {
		if !r.firstPassDone(ctx, (*s).GetCache()) {
			done = false
		}
	}
	return done
}

// Stats returns each kind's object counts (empty until management has been reached).
func (e *Engine) Stats() []Stats {
	select {
	case <-e.sessionReady:
	default:
		return nil
	}
	out := make([]Stats, 0, len(e.reconcilers))
	for _, r := range e.reconcilers {
		out = append(out, r.Stats())
	}
	return out
}
