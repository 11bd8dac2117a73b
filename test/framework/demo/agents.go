package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// agentProcess is one regionsync agent or tenant operator started as a separate process, as in
// production.
type agentProcess struct {
	region string
	proc   *testenv.Process
	log    string
}

// agentConfig is the configuration the demo gives a region's agent.
func agentConfig(region string, index int, managementKubeconfig string) *config.AgentConfig {
	return &config.AgentConfig{
		TypeMeta:   config.TypeMeta(),
		Region:     region,
		Management: config.ManagementConfig{Kubeconfig: managementKubeconfig},
		Shard: fleetspec.Shard{
			NamespacePrefix:      "tenant-",
			RemoteResourceSuffix: "-" + region,
			LabelSelector:        regionsyncv1alpha1.RegionLabel + "=" + region,
		},
		Resources: []config.ResourceConfig{{
			Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant",
			Secrets: []string{tenantoperator.TokenSecretName},
		}},
		Telemetry: config.TelemetryConfig{
			MetricsAddr:       fmt.Sprintf("127.0.0.1:%d", 19080+10*index),
			HealthAddr:        fmt.Sprintf("127.0.0.1:%d", 19081+10*index),
			HeartbeatInterval: metav1.Duration{Duration: 10 * time.Second},
		},
	}
}

// startAgent writes the region's configuration file and starts bin/agent with it; env adds to
// the demo's environment (the OTLP endpoint).
func startAgent(bin, dir string, c *testenv.Cluster, cfg *config.AgentConfig, env []string) (*agentProcess, error) {
	cfgPath, err := agentconfig.WriteConfig(filepath.Join(dir, "agent.yaml"), cfg)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w (run make build)", err)
	}
	logPath := filepath.Join(dir, "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// The replica name is shown as the Region's leader.
	proc, err := testenv.StartReplica(testenv.Replica{Binary: bin, Name: "agent-" + cfg.Region, Config: cfgPath, Kubeconfig: c.Kubeconfig,
		Env: env, Out: logFile, OnExit: func() { logFile.Close() }})
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	return &agentProcess{region: cfg.Region, proc: proc, log: logPath}, nil
}

// startOperator starts bin/tenant-operator in a region, as a regional team would run it.
func startOperator(bin, dir string, c *testenv.Cluster, region string, env []string) (*agentProcess, error) {
	return startProcess(region, bin, filepath.Join(dir, "tenant-operator.log"),
		[]string{kubeconfigFlag, c.Kubeconfig, "--region", region}, env)
}

func startProcess(region, bin, logPath string, args, env []string) (*agentProcess, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w (run make build)", err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	proc, err := testenv.StartProcess(bin, args, env, logFile, func() { logFile.Close() })
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	return &agentProcess{region: region, proc: proc, log: logPath}, nil
}

// tracingEnv points a child process's OTLP exporter at the demo's receiver, flushes its spans
// every 200 ms (so that the trace is printed seconds after the round trip) and names the process
// in its resource.
func tracingEnv(endpoint, instance string) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + endpoint,
		"OTEL_BSP_SCHEDULE_DELAY=200",
		"OTEL_RESOURCE_ATTRIBUTES=service.instance.id=" + instance,
	}
}

// stop sends SIGTERM (the agent releases its leases and exits) and waits, killing after 20s.
func (p *agentProcess) stop() { p.proc.Stop(syscall.SIGTERM, 20*time.Second) }

// exited reports whether the process has ended.
func (p *agentProcess) exited() bool { return !p.proc.Alive() }

// kubeconfigFlag is the flag by which the demo's processes get their cluster's kubeconfig.
const kubeconfigFlag = "--kubeconfig"
