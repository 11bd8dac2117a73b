package demo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/config"
	"github.com/regionsync/regionsync/internal/tenantoperator"
	"github.com/regionsync/regionsync/internal/testenv"
)

// agentProcess is one regionsync agent started as a separate process, as in production.
type agentProcess struct {
	region string
	cmd    *exec.Cmd
	done   chan struct{}
	log    string
}

// agentConfig is the configuration the demo gives a region's agent.
func agentConfig(region string, index int, managementKubeconfig string) *config.AgentConfig {
	return &config.AgentConfig{
		TypeMeta:   config.TypeMeta(),
		Region:     region,
		Management: config.ManagementConfig{Kubeconfig: managementKubeconfig},
		Shard:      config.ShardConfig{RemoteResourceSuffix: "-" + region},
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
	cmd := exec.Command(bin, "--config", cfgPath, "--kubeconfig", c.Kubeconfig)
	cmd.Env = append(os.Environ(), "POD_NAME=agent-"+cfg.Region) // the replica name shown as the Region leader
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &agentProcess{region: cfg.Region, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM (the agent releases its leases and exits) and waits, killing after 20s.
func (p *agentProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process has ended.
func (p *agentProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
