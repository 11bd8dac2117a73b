package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/tenantoperator"
	"github.com/regionsync/regionsync/internal/testenv"
	"github.com/regionsync/regionsync/pkg/config"
)

// agentProcess is one regionsync agent started as a separate process, as in production.
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
		Shard: config.ShardConfig{
			NamespacePrefix:      "tenant-",
			RemoteResourceSuffix: "-" + region,
			LabelSelector:        config.RegionLabel + "=" + region,
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

// startAgent writes the region's configuration file and starts bin/agent with it.
func startAgent(bin, dir string, c *testenv.Cluster, cfg *config.AgentConfig) (*agentProcess, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	proc, err := testenv.StartProcess(bin, []string{"--config", cfgPath, "--kubeconfig", c.Kubeconfig},
		[]string{"POD_NAME=agent-" + cfg.Region}, // the replica name shown as the Region leader
		logFile, func() { logFile.Close() })
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	return &agentProcess{region: cfg.Region, proc: proc, log: logPath}, nil
}

// stop sends SIGTERM (the agent releases its leases and exits) and waits, killing after 20s.
func (p *agentProcess) stop() { p.proc.Stop(syscall.SIGTERM, 20*time.Second) }

// exited reports whether the process has ended.
func (p *agentProcess) exited() bool { return !p.proc.Alive() }
