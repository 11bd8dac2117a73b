//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The shipped identities: the agent's ServiceAccount in its region, the region's on management.
const (
	agentNamespace      = "regionsync-system"
	agentServiceAccount = "regionsync-agent"
)

// env is the suite's clusters and the shipped overlays rendered from deploy/.
type env struct {
	dir, bin  string
	mgmt, reg *testenv.Cluster
	// mainRegion is the region whose shipped overlay the agent runs with; baseRegion's identity is
	// the plain client's (same RBAC and admission policy, other objects).
	mainRegion, baseRegion string
	mainConfig             *config.AgentConfig
	replicas               int
	baseMgmtObjects        []*unstructured.Unstructured // baseRegion's management registration
	log                    func(string, ...any)

	mu      sync.Mutex
	agents  []*agentProc
	localKC string
}

// agentProc is one agent replica, a process of the agent binary.
type agentProc struct {
	name, cfgPath, kubeconfig, logPath, pprof string
	proc                                      *testenv.Process
}

func (a *agentProc) stop(sig syscall.Signal) { a.proc.Stop(sig, 30*time.Second) }

// setupEnv builds the agent, starts management and one regional cluster, and deploys the shipped
// overlays: the management base, mainRegion's and baseRegion's registrations, mainRegion's agent
// overlay (RBAC, namespace; the Deployment stays unscheduled: its replicas run here as processes).
func setupEnv(ctx context.Context, dir string, log func(string, ...any)) (*env, error) {
	e := &env{dir: dir, log: log, mainRegion: "us-east-1", baseRegion: "eu-west-1"}
	var err error
	start := time.Now()
	if e.bin, err = testenv.BuildAgent(dir); err != nil {
		return nil, err
	}
	log("agent built in %s", time.Since(start).Round(time.Second))
	fl, err := testenv.Start([]string{"management", e.mainRegion}, testenv.Options{Dir: filepath.Join(dir, "clusters"), NoControllerManager: true, Log: log})
	if err != nil {
		return nil, err
	}
	e.mgmt, e.reg = fl.Cluster("management"), fl.Cluster(e.mainRegion)
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	deployDir := filepath.Join(root, "deploy")
	base, err := deploy.Render(filepath.Join(deployDir, "kustomize", "management"))
	if err != nil {
		return nil, err
	}
	if err := deploy.Apply(ctx, e.mgmt.Client, base); err != nil {
		return nil, fmt.Errorf("management base: %w", err)
	}
	for _, r := range []string{e.mainRegion, e.baseRegion} {
		objs, err := deploy.Render(filepath.Join(deployDir, "regions", r, "management"))
		if err != nil {
			return nil, err
		}
		if err := deploy.Apply(ctx, e.mgmt.Client, objs); err != nil {
			return nil, fmt.Errorf("%s registration: %w", r, err)
		}
		if r == e.baseRegion {
			e.baseMgmtObjects = objs
		}
	}
	agentObjs, err := deploy.Render(filepath.Join(deployDir, "regions", e.mainRegion, "agent"))
	if err != nil {
		return nil, err
	}
	if err := deploy.Apply(ctx, e.reg.Client, agentObjs); err != nil {
		return nil, fmt.Errorf("%s agent overlay: %w", e.mainRegion, err)
	}
	if e.mainConfig, err = deploy.AgentConfig(agentObjs); err != nil {
		return nil, err
	}
	e.replicas = 1
	if d := deploy.Find(agentObjs, "Deployment", ""); d != nil {
		if n, ok, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); ok {
			e.replicas = int(n)
		}
	}
	stopFleet = func() { _ = fl.Stop() }
	return e, nil
}

// stopFleet stops the clusters (set by setupEnv).
var stopFleet = func() {}

// stopAll stops every agent, then the clusters.
func (e *env) stopAll() {
	e.mu.Lock()
	agents := append([]*agentProc(nil), e.agents...)
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() { defer wg.Done(); a.stop(syscall.SIGTERM) }()
	}
	wg.Wait()
	stopFleet()
}

// regionUser is the user name of region's identity on management.
func regionUser(region string) string {
	return testenv.ServiceAccountUser(agentNamespace, "region-"+region)
}

var saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + agentNamespace}

// regionConfig is a rest.Config acting as region's identity on management, without client-side
// limit (the plain client's).
func (e *env) regionConfig(region string) *rest.Config {
	c := e.mgmt.ImpersonatingConfig(regionUser(region), saGroups...)
	c.QPS, c.Burst = -1, 0
	return c
}

// agentLocalConfig acts as the agent's ServiceAccount in the region, without client-side limit.
func (e *env) agentLocalConfig() *rest.Config {
	c := e.reg.ImpersonatingConfig(testenv.ServiceAccountUser(agentNamespace, agentServiceAccount), saGroups...)
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
// acting as the region's identity, local ports.
func (e *env) writeAgentConfig(cfg *config.AgentConfig) (string, error) {
	cfg, err := cloneConfig(cfg)
	if err != nil {
		return "", err
	}
	kc, err := e.mgmt.WriteImpersonatingKubeconfig("region-"+cfg.Region+"-kubeconfig", regionUser(cfg.Region), saGroups...)
	if err != nil {
		return "", err
	}
	cfg.Management.Kubeconfig = kc
	cfg.Management.CredentialRenewal = config.CredentialRenewalConfig{} // no token to renew: it impersonates
	cfg.Telemetry.MetricsAddr, cfg.Telemetry.HealthAddr = "127.0.0.1:0", "127.0.0.1:0"
	return agentconfig.WriteConfig(filepath.Join(e.dir, cfg.Region+"-agent.yaml"), cfg)
}

// localKubeconfig is the agent's kubeconfig in the region (its ServiceAccount), written once:
// agents starting read it.
func (e *env) localKubeconfig() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.localKC != "" {
		return e.localKC, nil
	}
	kc, err := e.reg.WriteImpersonatingKubeconfig("agent-kubeconfig", testenv.ServiceAccountUser(agentNamespace, agentServiceAccount), saGroups...)
	if err == nil {
		e.localKC = kc
	}
	return kc, err
}

// startAgent starts one replica (POD_NAME name) with pprof on a free local port.
func (e *env) startAgent(name, cfgPath string) (*agentProc, error) {
	kc, err := e.localKubeconfig()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	a := &agentProc{name: name, cfgPath: cfgPath, kubeconfig: kc, logPath: filepath.Join(e.dir, name+".log"), pprof: fmt.Sprintf("127.0.0.1:%d", port)}
	logFile, err := os.Create(a.logPath)
	if err != nil {
		return nil, err
	}
	a.proc, err = testenv.StartReplica(testenv.Replica{Binary: e.bin, Name: name, Config: cfgPath, Kubeconfig: kc, PprofAddr: a.pprof,
		Out: logFile, OnExit: func() { logFile.Close() }})
	if err != nil {
		logFile.Close()
		return nil, err
	}
	e.mu.Lock()
	e.agents = append(e.agents, a)
	e.mu.Unlock()
	return a, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// holder is the replica named on region's shard Lease ("" when none).
func (e *env) holder(ctx context.Context, region string) string {
	lease := &coordinationv1.Lease{}
	if err := e.mgmt.Client.Get(ctx, client.ObjectKey{Namespace: agentNamespace, Name: claim.LeaseName(region)}, lease); err != nil {
		return ""
	}
	return lease.Annotations[claim.HolderAnnotation]
}

// waitHeapReady waits until the agent's pprof endpoint answers.
func waitPprof(ctx context.Context, a *agentProc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := liveHeap(ctx, a.pprof); err == nil {
			return nil
		} else if time.Now().After(deadline) || !a.proc.Alive() {
			return fmt.Errorf("agent %s: pprof on %s not answering: %w (log %s)", a.name, a.pprof, err, a.logPath)
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
	err := b.e.mgmt.Client.Get(b.ctx, client.ObjectKey{Namespace: agentNamespace, Name: claim.LeaseName(region)}, lease)
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
