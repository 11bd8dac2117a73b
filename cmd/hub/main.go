// Command hub is regionsync's management-side controller manager: it places Distributions (one
// object in many regions), judges every region's heartbeat and, when configured, publishes one
// ClusterProfile per Region (docs/design/hub.md#hub-and-distribution).
//
//	hub --config F [--check-config] [--pprof-bind-address ADDR]
//
// It parses its flags and its configuration file (a HubConfig, strictly decoded), builds a
// controller manager for the management cluster (in-cluster config, --kubeconfig or KUBECONFIG)
// with leader election among its replicas, and adds the hub's controllers (internal/hub).
// Everything but process concerns is in the configuration file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/telemetry/tracer"
)

// Version is the hub's version, set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

// LeaderElectionID names the Lease the hub's replicas elect their leader with.
const LeaderElectionID = "regionsync-hub"

func main() {
	configPath := flag.String("config", "", "path of the HubConfig file (required)")
	checkOnly := flag.Bool("check-config", false, "validate the configuration file and exit")
	pprofAddr := flag.String("pprof-bind-address", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060; empty = off): profiles and the live heap for make bench")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	klog.SetLogger(ctrl.Log.WithName("client-go"))
	if *configPath == "" {
		fmt.Fprintln(os.Stderr, "hub: --config is required")
		os.Exit(2)
	}
	cfg, err := hub.LoadConfig(*configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hub:", err)
		os.Exit(1)
	}
	if *checkOnly {
		fmt.Printf("config %s is valid: annotation domain %s\n", *configPath, hub.OptionsFromConfig(cfg).WithDefaults().AnnotationDomain)
		return
	}
	if err := run(ctrl.SetupSignalHandler(), cfg, *pprofAddr); err != nil {
		fmt.Fprintln(os.Stderr, "hub:", err)
		os.Exit(1)
	}
}

// run builds the management manager from the configuration, adds the hub to it and runs it
// until ctx ends. pprofAddr, when set, serves net/http/pprof.
func run(ctx context.Context, cfg *hub.Config, pprofAddr string) error {
	rc, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("management cluster: %w", err)
	}
	log := ctrl.Log.WithName("hub")
	tp, shutdown, err := tracer.NewTracerProvider(ctx, cfg.Telemetry.Tracing, tracer.Identity{ServiceName: "regionsync-hub", Version: Version, ClusterName: "management"})
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(flush)
	}()
	opts := hub.OptionsFromConfig(cfg)
	opts.TracerProvider = tp
	metrics := hub.MetricsServerOptions(cfg.Telemetry)
	le := cfg.LeaderElection
	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		Scheme:                        scheme.New(),
		Logger:                        log,
		Cache:                         hub.CacheOptions(opts),
		Metrics:                       metrics,
		HealthProbeBindAddress:        cfg.Telemetry.HealthAddr,
		PprofBindAddress:              pprofAddr,
		LeaderElection:                *le.Enabled,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       le.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration.Duration,
		RenewDeadline:                 &le.RenewDeadline.Duration,
		RetryPeriod:                   &le.RetryPeriod.Duration,
		GracefulShutdownTimeout:       ptr.To(15 * time.Second),
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := hub.Setup(mgr, opts); err != nil {
		return err
	}
	if err := hub.SetupClusterProfiles(mgr, cfg.ClusterProfiles); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("the caches have not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	log.Info("starting regionsync hub", "version", Version, "annotationDomain", opts.WithDefaults().AnnotationDomain)
	return mgr.Start(ctx)
}
