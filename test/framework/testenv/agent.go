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

// Replica is one replica of the agent or the hub to run as a process, as a cluster runs it
// (both binaries take the same flags).
type Replica struct {
	// Binary is the agent or hub binary (BuildAgent, BuildHub, or bin/).
	Binary string
	// Name is the replica's name (POD_NAME: the leader named on the Leases and the Region).
	Name string
	// Config is the configuration file's path (WriteAgentConfig for an agent).
	Config string
	// Kubeconfig is the cluster the replica runs in (the agent's region, the hub's management).
	Kubeconfig string
	// PprofAddr serves net/http/pprof there ("": off).
	PprofAddr string
	// Env adds to the environment (OTEL_* for the traces).
	Env []string
	// Out receives the output; OnExit runs once the process has exited (to close Out).
	Out    io.Writer
	OnExit func()
}

// StartReplica runs one replica: the one way the tests, the e2e, the benchmarks and the demo
// start an agent or hub process.
func StartReplica(a Replica) (*Process, error) {
	args := []string{"--config", a.Config, "--kubeconfig", a.Kubeconfig}
	if a.PprofAddr != "" {
		args = append(args, "--pprof-bind-address", a.PprofAddr)
	}
	return StartProcess(a.Binary, args, append([]string{"POD_NAME=" + a.Name}, a.Env...), a.Out, a.OnExit)
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
