package demo

import (
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// agentProcess is one regionsync agent, tenant operator or hub the demo runs in its fleet as a
// separate process, as in production, with what it serves (a region, or "hub").
type agentProcess struct {
	of string
	*fleet.Replica
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
		Resources: []fleetspec.Resource{{
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

// startAgent writes the region's configuration file and starts bin/agent with it as the
// region's admin, exporting to the demo's receiver.
func (d *demoRun) startAgent(dir string, c *testenv.Cluster, cfg *config.AgentConfig) (*fleet.Replica, error) {
	cfgPath, err := agentconfig.WriteConfig(filepath.Join(dir, "agent.yaml"), cfg)
	if err != nil {
		return nil, err
	}
	// The replica name is shown as the Region's leader.
	return d.run(cfg.Region, fleet.ProcessSpec{Name: "agent-" + cfg.Region, Binary: d.opts.AgentBinary, Config: cfgPath, Kubeconfig: c.Kubeconfig,
		Env: tracingEnv(d.recv.Endpoint(), "agent-"+cfg.Region), Log: filepath.Join(dir, "agent.log")})
}

// startOperator starts bin/tenant-operator in a region, as a regional team would run it.
func (d *demoRun) startOperator(dir string, c *testenv.Cluster, region string) (*fleet.Replica, error) {
	return d.run(region, fleet.ProcessSpec{Name: "tenant-operator-" + region, Binary: d.opts.OperatorBinary,
		Args: []string{kubeconfigFlag, c.Kubeconfig, "--region", region}, Env: tracingEnv(d.recv.Endpoint(), "tenant-operator-"+region),
		Log: filepath.Join(dir, "tenant-operator.log")})
}

// run starts a process in the demo's fleet (which stops it) serving of, and watches it exit.
func (d *demoRun) run(of string, s fleet.ProcessSpec) (*fleet.Replica, error) {
	r, err := d.fleet.Run(s)
	if err != nil {
		return nil, err
	}
	d.agents = append(d.agents, agentProcess{of: of, Replica: r})
	return r, nil
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

// kubeconfigFlag is the flag by which the demo's processes get their cluster's kubeconfig.
const kubeconfigFlag = "--kubeconfig"
