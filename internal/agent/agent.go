// Package agent assembles a regional agent from its configuration: the local manager (caches,
// leader election, probes, metrics) and the sync engine. cmd/agent parses flags and calls it;
// tests run it in-process against real API servers.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// Version is the agent's version, set at build time with -ldflags "-X ...agent.Version=...".
var Version = "dev"

// Default client limits for both clusters (client-go's 5 qps would throttle initial syncs).
const (
	defaultQPS   = 50
	defaultBurst = 100
)

// Agent is one regional agent process.
type Agent struct {
	Manager manager.Manager
	Engine  *syncer.Engine
	leader  *fleetLeader
}

// ManagementConfig loads the management cluster's client config from the configured kubeconfig.
func ManagementConfig(cfg *config.AgentConfig) (*rest.Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Management.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("management.kubeconfig %s: %w", cfg.Management.Kubeconfig, err)
	}
	rc.QPS, rc.Burst = defaultQPS, defaultBurst
	if cfg.Management.QPS > 0 {
		rc.QPS = cfg.Management.QPS
	}
	if cfg.Management.Burst > 0 {
		rc.Burst = cfg.Management.Burst
	}
	return rc, nil
}

// Options are process concerns the configuration file does not hold.
type Options struct {
	// Logger for the agent (default: controller-runtime's global logger).
	Logger logr.Logger
	// TracerProvider overrides the one built from the configuration (tests record spans).
	TracerProvider trace.TracerProvider
}

// New builds an agent for the local cluster localConfig and the management cluster remoteConfig.
func New(cfg *config.AgentConfig, localConfig, remoteConfig *rest.Config, opts Options) (*Agent, error) {
	log := opts.Logger
	if log.GetSink() == nil {
		log = ctrl.Log.WithName("agent")
	}
	localConfig = rest.CopyConfig(localConfig)
	if localConfig.QPS == 0 {
		localConfig.QPS, localConfig.Burst = defaultQPS, defaultBurst
	}
	le := cfg.LeaderElection
	metrics := metricsserver.Options{BindAddress: cfg.Telemetry.MetricsAddr}
	if cfg.Telemetry.SecureMetrics {
		// HTTPS with a self-signed certificate; every scrape is authenticated (TokenReview) and
		// authorized (SubjectAccessReview for GET /metrics) against the local cluster.
		metrics.SecureServing = true
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(localConfig, ctrl.Options{
		Scheme:                        scheme.New(),
		Logger:                        log,
		Cache:                         syncer.LocalCacheOptions(cfg),
		Client:                        syncer.ClientOptions(),
		Metrics:                       metrics,
		HealthProbeBindAddress:        cfg.Telemetry.HealthAddr,
		LeaderElection:                *le.Enabled,
		LeaderElectionID:              "regionsync-" + cfg.Region,
		LeaderElectionNamespace:       le.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration.Duration,
		RenewDeadline:                 &le.RenewDeadline.Duration,
		RetryPeriod:                   &le.RetryPeriod.Duration,
		GracefulShutdownTimeout:       ptr(15 * time.Second),
		Controller:                    ctrlconfig.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("local manager: %w", err)
	}
	tp := opts.TracerProvider
	if tp == nil {
		var shutdown func(context.Context) error
		tp, shutdown, err = telemetry.NewTracerProvider(context.Background(), cfg.Telemetry.Tracing, telemetry.Identity{
			Version: Version, Region: cfg.Region, ClusterName: cfg.Region,
		})
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(shutdownOnStop(shutdown)); err != nil {
			return nil, err
		}
	}
	engine, err := syncer.NewEngine(cfg, mgr, remoteConfig, log.WithName("sync"), tp.Tracer("regionsync.dev/agent"))
	if err != nil {
		return nil, err
	}
	leader, err := newFleetLeader(cfg, mgr, engine, remoteConfig, log.WithName("claim"))
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(leader); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("local-caches", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("local caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return &Agent{Manager: mgr, Engine: engine, leader: leader}, nil
}

// Claim returns the shard claim as this replica sees it.
func (a *Agent) Claim() shard.ClaimState { return a.leader.claimState() }

// Start runs the agent until ctx ends.
func (a *Agent) Start(ctx context.Context) error { return a.Manager.Start(ctx) }

func ptr[T any](v T) *T { return &v }

// shutdownOnStop flushes the tracer provider when the manager stops, on every replica.
type shutdownOnStop func(context.Context) error

// NeedLeaderElection is false: followers flush too.
func (s shutdownOnStop) NeedLeaderElection() bool { return false }

func (s shutdownOnStop) Start(ctx context.Context) error {
	<-ctx.Done()
	flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s(flush)
}
