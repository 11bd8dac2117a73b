//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// env is the suite's fleet (fleet.StartLocal): management and one regional cluster, the shipped
// overlays deployed from deploy/.
type env struct {
	f         *fleet.LocalFleet
	mgmt, reg *testenv.Cluster
	// mainRegion is the region whose shipped overlay the agent runs with; baseRegion's identity is
	// the plain client's (same RBAC and admission policy, other objects).
	mainRegion, baseRegion string
	mainConfig             *config.AgentConfig
	replicas               int
	baseMgmtObjects        []*unstructured.Unstructured // baseRegion's management registration
}

// setupEnv builds the agent and launches the suite's fleet: management and mainRegion's cluster
// (no kube-controller-manager), the management base, mainRegion's and baseRegion's registrations
// and mainRegion's agent overlay (RBAC, namespace; the Deployment stays unscheduled: its replicas
// run here as processes, started per figure, each with pprof on a local port).
func setupEnv(ctx context.Context, dir string, log func(string, ...any)) (*env, error) {
	e := &env{mainRegion: "us-east-1", baseRegion: "eu-west-1"}
	start := time.Now()
	bin, err := testenv.BuildAgent(dir)
	if err != nil {
		return nil, err
	}
	log("agent built in %s", time.Since(start).Round(time.Second))
	deployDir, err := fleet.RepoDeployDir()
	if err != nil {
		return nil, err
	}
	e.f, err = fleet.StartLocal(ctx, fleet.LocalOptions{Dir: dir, Regions: []string{e.mainRegion}, Registered: []string{e.baseRegion},
		NoControllerManager: true, Log: log, DeployDir: deployDir, AgentBinary: bin, NoAgents: true, Pprof: true, StopGrace: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	main, _ := e.f.Deployed(e.mainRegion)
	base, _ := e.f.Deployed(e.baseRegion)
	e.mgmt, e.reg = e.f.Cluster(fleet.Management), main.Cluster
	e.mainConfig, e.replicas, e.baseMgmtObjects = main.AgentConfig, main.Replicas, base.Overlays.Management
	return e, nil
}

// stopAll stops every agent and hub, then the clusters.
func (e *env) stopAll() { _ = e.f.Stop() }

// regionConfig is a rest.Config acting as region's identity on management, without client-side
// limit (the plain client's).
func (e *env) regionConfig(region string) *rest.Config {
	c := e.mgmt.ServiceAccountConfig(fleet.AgentNamespace, fleet.RegionServiceAccount(region))
	c.QPS, c.Burst = -1, 0
	return c
}

// agentLocalConfig acts as the agent's ServiceAccount in the region, without client-side limit.
func (e *env) agentLocalConfig() *rest.Config {
	c := e.reg.ServiceAccountConfig(fleet.AgentNamespace, fleet.AgentServiceAccount)
	c.QPS, c.Burst = -1, 0
	return c
}

// unlimited is an admin client without client-side limit.
func unlimited(c *testenv.Cluster) (client.WithWatch, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
}

// deriveRegion registers a region named name on management from baseRegion's shipped registration
// (every occurrence of the base region's name replaced) and returns its agent configuration: the
// main region's shipped configuration with the region's name, suffix and selector.
func (e *env) deriveRegion(ctx context.Context, name string) (*config.AgentConfig, error) {
	return e.deriveRegionWith(ctx, name, "")
}

// deriveRegionWith is deriveRegion with shard.localNamespaceSuffix set, in the Region's
// registered shard and in the agent configuration alike (regions sharing one regional API server
// keep the copies of one management object apart with it).
func (e *env) deriveRegionWith(ctx context.Context, name, localNamespaceSuffix string) (*config.AgentConfig, error) {
	var objs []*unstructured.Unstructured
	for _, o := range e.baseMgmtObjects {
		data, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(strings.ReplaceAll(string(data), e.baseRegion, name))); err != nil {
			return nil, err
		}
		if u.GetKind() == "Region" && localNamespaceSuffix != "" {
			if err := unstructured.SetNestedField(u.Object, localNamespaceSuffix, "spec", "shard", "localNamespaceSuffix"); err != nil {
				return nil, err
			}
		}
		objs = append(objs, u)
	}
	if err := deploy.Apply(ctx, e.mgmt.Client, objs); err != nil {
		return nil, fmt.Errorf("registering %s: %w", name, err)
	}
	data, err := yaml.Marshal(e.mainConfig)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse([]byte(strings.ReplaceAll(string(data), e.mainRegion, name)))
	if err != nil {
		return nil, err
	}
	cfg.Shard.LocalNamespaceSuffix = localNamespaceSuffix
	return cfg, config.Validate(cfg)
}

// writeAgentConfig writes the file a Deployment would mount: cfg with the management kubeconfig
// acting as the region's identity, local ports (fleet.LocalFleet.WriteAgentConfig).
func (e *env) writeAgentConfig(cfg *config.AgentConfig) (string, error) {
	return e.f.WriteAgentConfig(cfg, "")
}

// startAgent starts one replica (POD_NAME name) in the region as the agent's ServiceAccount, with
// pprof on a free local port.
func (e *env) startAgent(name, cfgPath string) (*fleet.Replica, error) {
	return e.f.StartAgent(e.reg, name, cfgPath)
}

// holder is the replica named on region's shard Lease ("" when none).
func (e *env) holder(ctx context.Context, region string) string {
	h, _ := fleet.LeaseHolder(ctx, e.mgmt.Client, region)
	return h
}

// waitPprof waits until the agent's pprof endpoint answers.
func waitPprof(ctx context.Context, a *fleet.Replica, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := liveHeap(ctx, a.Pprof); err == nil {
			return nil
		} else if time.Now().After(deadline) || !a.Alive() {
			return fmt.Errorf("agent %s: pprof on %s not answering: %w (log %s)", a.Name, a.Pprof, err, a.Log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cloneConfig copies a configuration (through its YAML form).
func cloneConfig(cfg *config.AgentConfig) (*config.AgentConfig, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return config.Parse(data)
}

// saveLease writes region's shard Lease on management as YAML into the run's directory (to
// compare what agent processes and simulated regions write); a failure is only noted.
func (b *suite) saveLease(region, file string) {
	lease := &coordinationv1.Lease{}
	err := b.e.mgmt.Client.Get(b.ctx, client.ObjectKey{Namespace: fleet.AgentNamespace, Name: claim.LeaseName(region)}, lease)
	var data []byte
	if err == nil {
		data, err = yaml.Marshal(lease)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(b.dir, file), data, 0o644)
	}
	if err != nil {
		b.r.note("the shard Lease of %s not saved: %v", region, err)
	}
}
