// Command agent is regionsync's regional agent. It parses its flags and configuration file,
// builds a controller manager for the local cluster (in-cluster config, --kubeconfig or
// KUBECONFIG) and adds regionsync to it through the public package pkg/regionsync, exactly as a
// host controller manager embeds it. Everything but process concerns lives in the configuration
// file (docs/configuration.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/telemetry/tracer"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/pkg/regionsync"
)

// Version is the agent's version, set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

func main() {
	configPath := flag.String("config", "", "path of the AgentConfig file (required)")
	checkOnly := flag.Bool("check-config", false, "validate the configuration file and exit")
	// --kubeconfig (the local cluster) is registered by controller-runtime's config package.
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	klog.SetLogger(ctrl.Log.WithName("client-go")) // leader election and client-go log through the same logger

	if *configPath == "" {
		fmt.Fprintln(os.Stderr, "agent: --config is required")
		os.Exit(2)
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	if *checkOnly {
		fmt.Printf("config %s is valid: region %s, %d resource kind(s)\n", *configPath, cfg.Region, len(cfg.Resources))
		return
	}
	if err := run(ctrl.SetupSignalHandler(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// run builds the local manager from the configuration's process concerns, adds regionsync to it
// and runs it until ctx ends.
func run(ctx context.Context, cfg *config.AgentConfig) error {
	local, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("local cluster: %w", err)
	}
	management, err := regionsync.ManagementConfig(cfg)
	if err != nil {
		return err
	}
	opts, err := regionsync.OptionsFromConfig(cfg, management)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("agent").WithValues("region", cfg.Region)
	opts.Logger, opts.Version = log, Version
	tp, shutdown, err := tracer.NewTracerProvider(ctx, cfg.Telemetry.Tracing, tracer.Identity{
		Version: Version, Region: cfg.Region, ClusterName: cfg.Region,
	})
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(flush)
	}()
	opts.TracerProvider = tp

	le := cfg.LeaderElection
	metrics := metricsserver.Options{BindAddress: cfg.Telemetry.MetricsAddr}
	if cfg.Telemetry.SecureMetrics {
		// HTTPS with a self-signed certificate; every scrape is authenticated (TokenReview) and
		// authorized (SubjectAccessReview for GET /metrics) against the local cluster.
		metrics.SecureServing = true
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(local, ctrl.Options{
		Scheme:                        scheme.New(),
		Logger:                        log,
		Cache:                         regionsync.LocalCacheOptions(opts), // the agent caches its copies only
		Metrics:                       metrics,
		HealthProbeBindAddress:        cfg.Telemetry.HealthAddr,
		LeaderElection:                *le.Enabled,
		LeaderElectionID:              "regionsync-" + cfg.Region,
		LeaderElectionNamespace:       le.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration.Duration,
		RenewDeadline:                 &le.RenewDeadline.Duration,
		RetryPeriod:                   &le.RetryPeriod.Duration,
		GracefulShutdownTimeout:       ptr.To(15 * time.Second),
		Controller:                    ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("local manager: %w", err)
	}
	s, err := regionsync.New(mgr, opts)
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("regionsync", s.Healthz()); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("local-caches", s.Readyz()); err != nil {
		return err
	}
	log.Info("starting regionsync agent", "version", Version, "resources", len(cfg.Resources))
	return mgr.Start(ctx)
}
