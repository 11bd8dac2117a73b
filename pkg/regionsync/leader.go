package regionsync

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/credential"
	"github.com/regionsync/regionsync/internal/health"
	"github.com/regionsync/regionsync/internal/retry"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/internal/syncer"
)

// fleetLeader is the leader-only part of the agent: it claims the region's shard on management,
// publishes the Region status while it holds the claim, and runs the controllers while the claim
// is held and no other live shard overlaps.
type fleetLeader struct {
	cfg     *syncer.Settings
	mgr     manager.Manager
	engine  *syncer.Engine
	mgmt    kubernetes.Interface
	regions client.WithWatch
	log     logr.Logger
	holder  string
	scope   ClaimScope
	version string
	// noRegion: the Region status is turned off (Options.DisableRegionStatus).
	noRegion bool
	// credential is the management credential in use (its expiry is on the Region).
	credential *credential.Credential
	// instance makes the per-replica identity unique also for two syncers in one process.
	instance string
	claimer  atomic.Pointer[claim.Claimer]
	// unregistered is the refusal while the agent's shard differs from its Region's spec.shard.
	unregistered atomic.Pointer[claim.State]
}

// newFleetLeader builds the leader part from the settings and the defaulted opts.
func newFleetLeader(cfg *syncer.Settings, opts Options, mgr manager.Manager, engine *syncer.Engine, cred *credential.Credential, log logr.Logger) (*fleetLeader, error) {
	// The engine's management config (the credential's, through the identity guard): the
	// claim's Lease writes and the Region status pass the same guard as every sync write
	// (written only after management's identity was verified since the last new connection).
	remote := engine.ManagementConfig()
	// The claim's client speaks protobuf (Leases are a built-in kind): each claim lists every
	// region's shard Lease to check for overlaps, and when a whole fleet restarts at once that is
	// as many lists as regions, each as long as the fleet.
	leases := rest.CopyConfig(remote)
	leases.ContentType = runtime.ContentTypeProtobuf
	leases.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	mgmt, err := kubernetes.NewForConfigAndClient(leases, engine.ManagementHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("management client: %w", err)
	}
	regions, err := client.NewWithWatch(remote, client.Options{Scheme: scheme.New(), HTTPClient: engine.ManagementHTTPClient()})
	if err != nil {
		return nil, fmt.Errorf("management client: %w", err)
	}
	return &fleetLeader{cfg: cfg, mgr: mgr, engine: engine, mgmt: mgmt, regions: regions, log: log, holder: replicaName(), scope: opts.Claim.Scope, version: opts.Version, noRegion: opts.DisableRegionStatus, credential: cred, instance: string(uuid.NewUUID())[:8]}, nil
}

// replicaName identifies this replica: $POD_NAME in a cluster, else host and process ID.
func replicaName() string {
	if n := os.Getenv("POD_NAME"); n != "" {
		return n
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// identity is the claim identity on management. Per fleet, a new local leader of the same fleet
// takes the claim over at once and another fleet (other cluster or namespace) for the same region
// must wait; per replica, every replica must wait for the holder, so replicas without leader
// election never write together.
func (l *fleetLeader) identity(clusterID string) string {
	if l.scope == ClaimPerFleet {
		return fmt.Sprintf("%s/%s@%s", l.cfg.Region, l.cfg.FleetNamespace, clusterID)
	}
	return fmt.Sprintf("%s/%s_%s@%s", l.cfg.Region, l.holder, l.instance, clusterID)
}

// NeedLeaderElection: only the local leader claims the shard.
func (l *fleetLeader) NeedLeaderElection() bool { return true }

func (l *fleetLeader) claimState() claim.State {
	if id := l.engine.ManagementIdentity(); id.Checked && !id.Accepted {
		return claim.State{Reason: syncer.ReasonManagementIdentityMismatch, Message: id.Message}
	}
	if r := l.unregistered.Load(); r != nil {
		return *r
	}
	if c := l.claimer.Load(); c != nil {
		return c.State()
	}
	return claim.State{Reason: regionsyncv1alpha1.ReasonWaiting, Message: "not the local leader, or management not reached yet"}
}

// registrationRecheck is how often a refused agent reads its Region again.
var registrationRecheck = retry.Every(10 * time.Second)

// awaitRegistered returns true once the agent's shard agrees with the one the operator registered
// on its Region (spec.shard: the hub places objects by it), or nothing is registered (no Region,
// no spec.shard, no Region kind on management, or an identity that may not read Regions); false
// when ctx ends first. A differing shard
// is refused, reported once in the log and in the claim state, and read again every 10 s: the
// agent would otherwise sync other objects than the ones placed for it.
func (l *fleetLeader) awaitRegistered(ctx context.Context) bool {
	logged := ""
	_ = retry.Until(ctx, registrationRecheck, func(ctx context.Context, _ time.Duration) (bool, error) {
		region := &regionsyncv1alpha1.Region{}
		err := l.regions.Get(ctx, client.ObjectKey{Name: l.cfg.Region}, region)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			err = nil
		case apierrors.IsForbidden(err):
			// A host whose identity may not read Regions (its own RBAC, not the shipped one)
			// registers nothing the hub could place by: it claims as before, and is told once.
			l.log.Info("cannot read the Region, so its registered shard is not compared (the shipped RBAC grants get on it)", "region", l.cfg.Region, "error", err.Error())
			err = nil
		case err != nil:
			l.log.V(1).Info("reading the Region to compare its registered shard; retrying", "error", err.Error())
			return false, nil
		default:
			err = shard.CheckRegistered(l.cfg.AnnotationDomain, l.cfg.Shard, l.cfg.GVKs(), region.Spec.Shard)
		}
		if err == nil {
			if logged != "" {
				l.log.Info("the shard agrees with the Region's registered shard; claiming", "region", l.cfg.Region)
			}
			l.unregistered.Store(nil)
			return true, nil
		}
		l.unregistered.Store(&claim.State{Reason: regionsyncv1alpha1.ReasonShardNotRegistered, Message: err.Error()})
		if logged != err.Error() {
			l.log.Error(err, "not claiming the shard: fix the agent's configuration or register the shard the operator meant (the Region's spec.shard is immutable: delete and create the Region again)", "region", l.cfg.Region)
			logged = err.Error()
		}
		return false, nil
	})
	return ctx.Err() == nil
}

// kubernetesVersion reads the regional API server's version for the Region status, or ""
// (logged) when it cannot be read: it is information, never a reason to wait.
func (l *fleetLeader) kubernetesVersion() string {
	dc, err := discovery.NewDiscoveryClientForConfig(l.mgr.GetConfig())
	if err == nil {
		var info *version.Info
		if info, err = dc.ServerVersion(); err == nil {
			return health.KubernetesVersion(info)
		}
	}
	l.log.Error(err, "reading the regional API server's version; the Region reports none")
	return ""
}

// clusterIDBackoff paces the reads of the local cluster ID.
var clusterIDBackoff = retry.Every(2 * time.Second)

// Start waits for management and the local cluster ID, then claims the shard until ctx ends.
func (l *fleetLeader) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-l.engine.SessionReady():
	}
	var clusterID string
	_ = retry.Until(ctx, clusterIDBackoff, func(ctx context.Context, _ time.Duration) (bool, error) {
		id, err := health.ClusterID(ctx, l.mgr.GetAPIReader())
		if err != nil {
			l.log.Error(err, "retrying")
			return false, nil
		}
		clusterID = id
		return true, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	kubeVersion := l.kubernetesVersion()
	timings := l.cfg.Claim
	def := l.cfg.Definition()
	c := &claim.Claimer{
		Client:        l.mgmt,
		Namespace:     l.cfg.ManagementNamespace,
		Def:           def,
		Identity:      l.identity(clusterID),
		Holder:        l.holder,
		LeaseDuration: timings.LeaseDuration,
		RenewDeadline: timings.RenewDeadline,
		RetryPeriod:   timings.RetryPeriod,
		Log:           l.log,
		// The engine opens its write gate for as long as ctx lasts and closes it the moment
		// the claim is lost; its controllers run only as long.
		WhileSyncing: l.engine.RunControllers,
	}
	reporter := &health.Reporter{
		Client: l.regions, Region: l.cfg.Region,
		Leader: l.holder, ClusterID: clusterID, AgentVersion: l.version, Shard: def.String(),
		KubernetesVersion: kubeVersion,
		Sources: health.Sources{
			ManagementConnected: l.engine.ManagementConnected,
			Claim: func() health.Claim {
				s := c.State()
				return health.Claim{Syncing: s.Syncing, Reason: s.Reason, Message: s.Message}
			},
			Stats:            func() []health.KindStats { return kindStats(l.engine.Stats()) },
			FirstPassDone:    func() bool { return l.engine.FirstPassDone(ctx) },
			CredentialExpiry: l.credential.Expiry,
			ClusterProperties: (&health.PropertyReader{
				Reader: l.mgr.GetAPIReader(), Every: l.cfg.HeartbeatInterval, Log: l.log.WithName("region"),
			}).Get,
		},
		Refresh: l.cfg.HeartbeatInterval,
		Log:     l.log.WithName("region"),
	}
	if !l.noRegion {
		c.WhileHeld = reporter.Run
	}
	l.claimer.Store(c)
	// The shard is claimed only while management's identity is the recorded (or confirmed)
	// one: a claim period ends the moment a check refuses it (or sees management's history
	// rewound), and the next starts only once the identity is accepted again and management
	// has been listed afresh.
	for {
		if !l.engine.AwaitManagementIdentity(ctx) || !l.awaitRegistered(ctx) {
			return nil
		}
		period, stop := context.WithCancel(ctx)
		go l.engine.WatchManagementIdentity(period, stop)
		go l.stopWhenRefused(period, stop)
		err := c.Start(period)
		stop()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			l.log.Error(err, "claim stopped; starting again")
		}
	}
}

// stopWhenRefused ends the claim period (the engine's write gate closes at once, the
// controllers stop) when management refuses the credential: a revoked region stops applying what
// its still-open watches deliver at once, not when its claim lapses. The next period starts once
// management's identity can be checked again, that is with a credential it accepts.
func (l *fleetLeader) stopWhenRefused(ctx context.Context, stop func()) {
	select {
	case <-ctx.Done():
	case <-l.credential.Refused():
		l.log.Info("management refuses the region's credential: syncing stops until it accepts one")
		stop()
	}
}

// kindStats is the engine's per-kind counts as the Region reports them.
func kindStats(stats []syncer.Stats) []health.KindStats {
	out := make([]health.KindStats, 0, len(stats))
	for _, s := range stats {
		out = append(out, health.KindStats{
			ResourceCounts: regionsyncv1alpha1.ResourceCounts{
				Resource: s.Resource,
				Synced:   int32(s.Counts[syncer.StateSynced]), Pending: int32(s.Counts[syncer.StatePending]),
				Failed: int32(s.Counts[syncer.StateFailed]), Paused: int32(s.Counts[syncer.StatePaused]),
				Invalid: int32(s.Counts[syncer.StateInvalid]), DeletionsHeld: int32(s.DeletionsHeld),
				FanOutCopies: int32(s.FanOutCurrent), FanOutFailed: int32(s.FanOutFailed),
			},
			LastSync: s.LastSync,
		})
	}
	return out
}
