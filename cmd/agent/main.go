// Command agent is regionsync's regional agent.
//
//	agent --config F [--check-config]      run the agent (or only validate F)
//	agent decommission --config F [...]    release the region's claim on management (see
//	                                       decommission.go and docs/operations/regions.md)
//
// The agent parses its flags and configuration file,
// builds a controller manager for the local cluster (in-cluster config, --kubeconfig or
// KUBECONFIG) and adds regionsync to it through the public package pkg/regionsync, exactly as a
// host controller manager embeds it. Everything but process concerns lives in the configuration
// file (docs/configuration.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	if len(os.Args) > 1 && os.Args[1] == "decommission" {
		os.Exit(decommission(ctrl.SetupSignalHandler(), os.Args[2:], os.Stdout, os.Stderr))
	}
	configPath := flag.String("config", "", "path of the AgentConfig file (required)")
	checkOnly := flag.Bool("check-config", false, "validate the configuration file and exit")
	pprofAddr := flag.String("pprof-bind-address", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060; empty = off): profiles and the live heap for make bench")
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
	if err := run(ctrl.SetupSignalHandler(), cfg, *pprofAddr); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// run builds the local manager from the configuration's process concerns, adds regionsync to it
// and runs it until ctx ends. pprofAddr, when set, serves net/http/pprof.
func run(ctx context.Context, cfg *config.AgentConfig, pprofAddr string) error {
	local, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("local cluster: %w", err)
	}
	management, err := cfg.ManagementConfig()
	if err != nil {
		return err
	}
	opts := cfg.Options(management)
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
		NewCache:                      regionsync.LocalNewCache(opts),     // decoded straight into the compact form
		Metrics:                       metrics,
		HealthProbeBindAddress:        cfg.Telemetry.HealthAddr,
		PprofBindAddress:              pprofAddr,
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

// decommission runs "agent decommission": it parses the subcommand's flags, loads the
// configuration as the agent does (the management kubeconfig is the region's identity) and
// runs regionsync.Decommission, printing what it did. It returns the exit code: 2 for usage
// errors, 1 for failures.
func decommission(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent decommission", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "path of the region's AgentConfig file (required)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the regional cluster (default: in-cluster config or KUBECONFIG)")
	managementKubeconfig := fs.String("management-kubeconfig", "", "kubeconfig of the management cluster, instead of the configuration's management.kubeconfig (the region's identity)")
	deleteCopies := fs.Bool("delete-copies", false, "delete the region's local copies first; release an object's finalizer once its copy is gone")
	dryRun := fs.Bool("dry-run", false, "report what would be done; write nothing")
	force := fs.Bool("force", false, "proceed although a live replica holds the region's shard Lease")
	outOfShard := fs.Bool("out-of-shard-only", false, "release only objects that left the shard; keep the shard Lease (the agent may keep running)")
	withoutRegion := fs.Bool("without-region", false, "the regional cluster is gone: release finalizers on management only")
	timeout := fs.Duration("timeout", regionsync.DefaultDecommissionTimeout, "how long to wait for deleted copies to be gone")
	zapOpts := zap.Options{DestWriter: stderr}
	zapOpts.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agent decommission --config F [--delete-copies] [--dry-run] [--force] [--out-of-shard-only] [--without-region] [--kubeconfig K] [--management-kubeconfig M] [--timeout D]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	klog.SetLogger(ctrl.Log.WithName("client-go"))
	usage := func(msg string) int {
		fmt.Fprintln(stderr, "agent decommission:", msg)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case *configPath == "":
		return usage("--config is required")
	case *withoutRegion && (*deleteCopies || *outOfShard || *kubeconfig != ""):
		return usage("--without-region excludes --delete-copies, --out-of-shard-only and --kubeconfig (they need the regional cluster)")
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "agent decommission:", err)
		return 1
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return fail(err)
	}
	if *managementKubeconfig != "" {
		cfg.Management.Kubeconfig = *managementKubeconfig
	}
	management, err := cfg.ManagementConfig()
	if err != nil {
		return fail(err)
	}
	opts := cfg.Options(management)
	var local client.Client
	if !*withoutRegion {
		rc, err := ctrl.GetConfig()
		if *kubeconfig != "" {
			rc, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
		}
		if err != nil {
			return fail(fmt.Errorf("regional cluster (or pass --without-region): %w", err))
		}
		if local, err = client.New(rc, client.Options{Scheme: scheme.New()}); err != nil {
			return fail(fmt.Errorf("regional cluster: %w", err))
		}
	}
	report, err := regionsync.Decommission(ctx, opts, local, regionsync.DecommissionOptions{
		DeleteCopies: *deleteCopies, DryRun: *dryRun, Force: *force, OutOfShardOnly: *outOfShard, Timeout: *timeout,
		Logger: ctrl.Log.WithName("decommission"),
	})
	report.Write(stdout, cfg.Region, report.LeaseNamespace)
	if err != nil {
		return fail(err)
	}
	return 0
}
