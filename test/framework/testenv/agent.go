package testenv

import (
	"fmt"
	"io"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/config"
)

// StartAgent runs the agent binary bin as the replica name (POD_NAME) with the configuration
// file configPath against the local cluster of kubeconfig, its output to out; onExit runs once
// it has exited (to close out).
func StartAgent(bin, name, configPath, kubeconfig string, out io.Writer, onExit func(), env ...string) (*Process, error) {
	return StartProcess(bin, []string{"--config", configPath, "--kubeconfig", kubeconfig},
		append([]string{"POD_NAME=" + name}, env...), out, onExit)
}

// TenantAgentConfig is a region's agent configuration that syncs the demo Tenants with the
// suffix, before defaults; tests set what they need on top.
func TenantAgentConfig(region, suffix, managementKubeconfig string) *config.AgentConfig {
	return &config.AgentConfig{
		TypeMeta: config.TypeMeta(),
		Region:   region,
		// No start jitter: tests restart agents and wait for them (it has its own test).
		Management: config.ManagementConfig{Kubeconfig: managementKubeconfig, StartJitter: &metav1.Duration{}},
		Shard:      fleetspec.Shard{RemoteResourceSuffix: suffix},
		Resources:  []fleetspec.Resource{{Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant"}},
	}
}

// WriteAgentConfig writes cfg as the agent's configuration file path (the YAML a Deployment
// mounts) and returns path.
func WriteAgentConfig(path string, cfg *config.AgentConfig) (string, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("agent configuration %s: %w", path, err)
	}
	return path, os.WriteFile(path, data, 0o644)
}
