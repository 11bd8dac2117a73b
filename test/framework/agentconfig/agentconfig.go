// Package agentconfig describes the agents the tests, the benchmarks and the demo run: as the agent
// binary's configuration file (TenantConfig, WriteConfig, for bin/agent processes) and in the
// library's own vocabulary, regionsync.Options (TenantOptions, Kind, for agents run in-process as a
// host of pkg/regionsync runs them). It is apart from testenv because pkg/config and pkg/regionsync
// reach the engine, whose own in-package tests import testenv.
package agentconfig

import (
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
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
		Resources:  []config.ResourceConfig{{Group: testenv.TenantGVK.Group, Version: testenv.TenantGVK.Version, Kind: testenv.TenantGVK.Kind}},
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

// TenantOptions are the Options of region's agent that syncs the demo Tenants
// (testenv.TenantGVK) whose names end with suffix from the management cluster at management, as
// the agent binary runs it (config.AgentConfig.Options): the kind given unstructured, the claim
// per fleet in the default leader-election namespace. Everything else is left to New's defaults,
// among them no start jitter (tests restart agents and wait for them; it has its own test); tests
// set what they need on top.
func TenantOptions(region, suffix string, management *rest.Config) regionsync.Options {
	return regionsync.Options{
		Region:     region,
		Management: regionsync.Management{Config: management},
		Shard:      regionsync.Shard{RemoteResourceSuffix: suffix},
		Resources:  []regionsync.Resource{{Object: Kind(testenv.TenantGVK)}},
		Claim:      regionsync.Claim{Scope: regionsync.ClaimPerFleet, FleetNamespace: fleetspec.DefaultLeaderNamespace},
	}
}

// Kind is an unstructured object of gvk with nothing else set: a kind to sync
// (regionsync.Resource.Object) named without its Go type, as the agent binary names its kinds.
func Kind(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
