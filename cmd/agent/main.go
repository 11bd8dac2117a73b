// Command agent is regionsync's regional agent. It loads the configuration file, connects to the
// local cluster (in-cluster config, --kubeconfig or KUBECONFIG) and the management cluster, and runs
// the sync engine. Everything but process concerns lives in the configuration file (SPEC §5).
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/regionsync/regionsync/internal/agent"
	"github.com/regionsync/regionsync/pkg/config"
)

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
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func run(cfg *config.AgentConfig) error {
	local, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("local cluster: %w", err)
	}
	remote, err := agent.ManagementConfig(cfg)
	if err != nil {
		return err
	}
	a, err := agent.New(cfg, local, remote, agent.Options{Logger: ctrl.Log.WithName("agent").WithValues("region", cfg.Region)})
	if err != nil {
		return err
	}
	ctrl.Log.Info("starting regionsync agent", "version", agent.Version, "region", cfg.Region, "resources", len(cfg.Resources))
	return a.Start(ctrl.SetupSignalHandler())
}
