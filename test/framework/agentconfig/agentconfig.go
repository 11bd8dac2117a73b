// Package agentconfig describes the agents the tests and the benchmarks run: their configuration
// files. It is apart from testenv because pkg/config imports the library (and through it the
// engine), which the engine's own in-package tests, users of testenv, must not import.
package agentconfig

import (
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/pkg/regionsync"
)

// TenantConfig is a region's agent configuration that syncs the demo Tenants with the suffix,
// before defaults; tests set what they need on top.
func TenantConfig(region, suffix, managementKubeconfig string) *config.AgentConfig {
	return &config.AgentConfig{
		TypeMeta: config.TypeMeta(),
		Region:   region,
		// No start jitter: tests restart agents and wait for them (it has its own test).
		Management: config.ManagementConfig{Kubeconfig: managementKubeconfig, StartJitter: &metav1.Duration{}},
		Shard:      config.ShardConfig{RemoteResourceSuffix: suffix},
		Resources:  []config.ResourceConfig{{Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant"}},
	}
}

// WriteConfig writes cfg as the agent's configuration file path (the YAML a Deployment mounts)
// and returns path.
func WriteConfig(path string, cfg *config.AgentConfig) (string, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("agent configuration %s: %w", path, err)
	}
	return path, os.WriteFile(path, data, 0o644)
}

// Effective is cfg's Options with the library's defaults, as the agent runs them: the values to
// read where the file leaves a field to the library (the annotation domain, the credential's key).
func Effective(cfg *config.AgentConfig) regionsync.Options {
	return cfg.Options(nil).WithDefaults()
}
