//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/internal/telemetry/tracer"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/otlpsink"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// Identities the overlays create: the agent's ServiceAccount in the region and the region's
// ServiceAccount on management.
const (
	agentNamespace      = "regionsync-system"
	agentServiceAccount = "regionsync-agent"
)

func regionServiceAccount(region string) string { return "region-" + region }

// LocalFleet is the local provider: every cluster is a real control plane from testenv, every
// agent replica a separate bin/agent process that authenticates as the overlay's identities.
type LocalFleet struct {
	AgentBinary string
	// HubBinary is the hub (cmd/hub), run as HubReplicas processes on management.
	HubBinary string
	Dir       string
	Log       func(string, ...any)
	// Traces receives what the agents (through OTEL_EXPORTER_OTLP_ENDPOINT, as a Deployment would
	// set it) and the tenant operators export.
	Traces *otlpsink.Receiver

	mgmt     *testenv.Cluster
	fleets   []*testenv.Fleet
	mu       sync.Mutex
	regions  map[string]*localRegion
	order    []string
	hubs     []*testenv.Process
	stopOnce sync.Once
	cancel   context.CancelFunc
	ctx      context.Context
}

type localRegion struct {
	cluster  *testenv.Cluster
	replicas []*localAgent
}

// HubReplicas is how many hub processes the local provider runs: the overlay's 2, one leading,
// one a warm standby.
const HubReplicas = 2

type localAgent struct {
	name               string
	config, kubeconfig string
	proc               *testenv.Process
}

// StartLocal starts management and the given regions, deploys every region from deployDir, and
// the hub (deploy/kustomize/hub-clusterprofiles) on management.
func StartLocal(ctx context.Context, agentBinary, hubBinary, dir, deployDir string, regions []string, log func(string, ...any)) (*LocalFleet, error) {
	f := &LocalFleet{AgentBinary: agentBinary, HubBinary: hubBinary, Dir: dir, Log: log, regions: map[string]*localRegion{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	var err error
	if f.Traces, err = otlpsink.Start(otlpsink.Options{}); err != nil {
		return nil, err
	}
	fl, err := testenv.Start(append([]string{"management"}, regions...), testenv.Options{Dir: filepath.Join(dir, "clusters"), Log: log})
	if err != nil {
		f.Traces.Stop()
		return nil, err
	}
	f.fleets = append(f.fleets, fl)
	f.mgmt = fl.Cluster("management")
	base, err := deploy.Render(filepath.Join(deployDir, "kustomize", "management"))
	if err != nil {
		f.Stop()
		return nil, err
	}
	if err := deploy.Apply(ctx, f.mgmt.Client, base); err != nil {
		f.Stop()
		return nil, fmt.Errorf("management base: %w", err)
	}
	for _, r := range regions {
		if err := f.deploy(ctx, r, fl.Cluster(r), deployDir); err != nil {
			f.Stop()
			return nil, err
		}
	}
	if err := f.deployHub(ctx, deployDir); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

// deployHub applies the hub (RenderHub: the ClusterProfile CRD and
// deploy/kustomize/hub-clusterprofiles) on management and runs HubReplicas hub processes with
// the overlay's configuration (local ports, HubLivenessGrace). They authenticate as the hub's
// ServiceAccount with a token of it (TokenRequest, what the kubelet projects into the pod), not
// as the admin impersonating it: the hub itself impersonates each Distribution's
// ServiceAccount, which impersonation cannot nest, and its right to do so is part of what the
// e2e proves.
func (f *LocalFleet) deployHub(ctx context.Context, deployDir string) error {
	objs, cfg, err := RenderHub(deployDir)
	if err != nil {
		return err
	}
	if err := deploy.Apply(ctx, f.mgmt.Client, objs); err != nil {
		return fmt.Errorf("hub overlay: %w", err)
	}
	if err := waitEstablished(ctx, f.mgmt.Client, objs); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(f.mgmt.Config)
	if err != nil {
		return err
	}
	tok, err := cs.CoreV1().ServiceAccounts(agentNamespace).CreateToken(ctx, hubServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(6 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token of the hub's ServiceAccount: %w", err)
	}
	rc := rest.AnonymousClientConfig(f.mgmt.Config)
	rc.BearerToken = tok.Status.Token
	kubeconfig := filepath.Join(f.Dir, "hub-kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, "management", rc); err != nil {
		return err
	}
	cfg.Telemetry.MetricsAddr, cfg.Telemetry.HealthAddr = "127.0.0.1:0", "127.0.0.1:0"
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(f.Dir, "hub.yaml")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		return err
	}
	for i := range HubReplicas {
		name := fmt.Sprintf("hub-replica-%d", i)
		logFile, err := os.Create(filepath.Join(f.Dir, name+".log"))
		if err != nil {
			return err
		}
		p, err := testenv.StartReplica(testenv.Replica{Binary: f.HubBinary, Name: name, Config: cfgPath, Kubeconfig: kubeconfig,
			Out: logFile, OnExit: func() { logFile.Close() }})
		if err != nil {
			logFile.Close()
			return fmt.Errorf("starting %s: %w", name, err)
		}
		f.hubs = append(f.hubs, p)
	}
	f.Log("hub deployed on management: %d replicas as %s (liveness grace %s)", HubReplicas,
		testenv.ServiceAccountUser(agentNamespace, hubServiceAccount), cfg.Liveness.Grace.Duration)
	return nil
}

// Stop stops every agent, tenant operator and cluster.
func (f *LocalFleet) Stop() {
	f.stopOnce.Do(func() {
		f.mu.Lock()
		for _, r := range f.regions {
			for _, a := range r.replicas {
				a.kill(syscall.SIGTERM)
			}
		}
		for _, h := range f.hubs {
			h.Stop(syscall.SIGTERM, 20*time.Second)
		}
		f.mu.Unlock()
		f.cancel()
		for _, fl := range f.fleets {
			_ = fl.Stop()
		}
		f.Traces.Stop()
	})
}

func (a *localAgent) kill(sig syscall.Signal) { a.proc.Stop(sig, 20*time.Second) }

// deploy applies a region's management registration and agent overlay, runs the tenant operator
// in the region, and starts two agent replicas with the overlay's configuration.
func (f *LocalFleet) deploy(ctx context.Context, region string, c *testenv.Cluster, deployDir string) error {
	return f.deployOn(ctx, region, c, deployDir, true)
}

// AddSameClusterRegion deploys region name (its overlays under deployDir) on the management
// cluster itself: management is also the region, as when regionsync copies objects inside one
// cluster. No tenant operator runs there (the Tenants on management are the regions' objects).
// Call it after the scenarios that go over every region (Regions lists it).
func (f *LocalFleet) AddSameClusterRegion(ctx context.Context, name, deployDir string) error {
	return f.deployOn(ctx, name, f.mgmt, deployDir, false)
}

// deployOn is deploy, with or without the tenant operator in the region.
func (f *LocalFleet) deployOn(ctx context.Context, region string, c *testenv.Cluster, deployDir string, operator bool) error {
	ov, err := RenderRegion(deployDir, region)
	if err != nil {
		return err
	}
	if err := deploy.Apply(ctx, f.mgmt.Client, ov.Management); err != nil {
		return fmt.Errorf("%s management registration: %w", region, err)
	}
	agentObjs := ov.Agent
	if c == f.mgmt { // management's base owns the namespace the agent shares with it
		agentObjs = slices.DeleteFunc(slices.Clone(agentObjs), func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "Namespace" && o.GetName() == agentNamespace
		})
	}
	if err := deploy.Apply(ctx, c.Client, agentObjs); err != nil {
		return fmt.Errorf("%s agent overlay: %w", region, err)
	}
	cfg, err := deploy.AgentConfig(ov.Agent)
	if err != nil {
		return err
	}
	// The agent authenticates as the overlay's identities: its ServiceAccount in the region, the
	// region's ServiceAccount on management. Only the shipped RBAC lets it do anything.
	localKC, err := c.WriteImpersonatingKubeconfig(region+"-agent-kubeconfig", testenv.ServiceAccountUser(agentNamespace, agentServiceAccount),
		"system:serviceaccounts", "system:serviceaccounts:"+agentNamespace)
	if err != nil {
		return err
	}
	mgmtKC, err := f.mgmt.WriteImpersonatingKubeconfig("region-"+region+"-kubeconfig", testenv.ServiceAccountUser(agentNamespace, regionServiceAccount(region)),
		"system:serviceaccounts", "system:serviceaccounts:"+agentNamespace)
	if err != nil {
		return err
	}
	// The file the Deployment mounts: same configuration, local paths and ports. The
	// impersonating kubeconfig holds no token to renew (cmd/agent's TestCredential* run the
	// renewal with real tokens and the shipped RBAC).
	cfg.Management.Kubeconfig = mgmtKC
	cfg.Management.CredentialRenewal = config.CredentialRenewalConfig{}
	cfg.Telemetry.MetricsAddr, cfg.Telemetry.HealthAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfgPath, err := agentconfig.WriteConfig(filepath.Join(f.Dir, region+"-agent.yaml"), cfg)
	if err != nil {
		return err
	}
	if operator {
		if err := f.startOperator(c, region); err != nil {
			return err
		}
	}
	r := &localRegion{cluster: c}
	for i := range 2 {
		a, err := f.startAgent(fmt.Sprintf("%s-replica-%d", region, i), cfgPath, localKC)
		if err != nil {
			return err
		}
		r.replicas = append(r.replicas, a)
	}
	f.mu.Lock()
	f.regions[region] = r
	f.order = append(f.order, region)
	f.mu.Unlock()
	f.Log("%s deployed: 2 agent replicas as %s, on management as %s", region,
		testenv.ServiceAccountUser(agentNamespace, agentServiceAccount), testenv.ServiceAccountUser(agentNamespace, regionServiceAccount(region)))
	return nil
}

func (f *LocalFleet) startOperator(c *testenv.Cluster, region string) error {
	// The regional controller continues the trace the agent writes on the copies.
	one := 1.0
	tp, shutdown, err := tracer.NewTracerProvider(f.ctx, fleetspec.Tracing{Endpoint: f.Traces.Endpoint(), SamplingRatio: &one},
		tracer.Identity{ServiceName: "tenant-operator", Region: region, ClusterName: region})
	if err != nil {
		return err
	}
	context.AfterFunc(f.ctx, func() { _ = shutdown(context.Background()) })
	return testenv.StartTenantOperator(f.ctx, c.Config, region, tp.Tracer("tenant-operator"))
}

func (f *LocalFleet) startAgent(name, cfgPath, kubeconfig string) (*localAgent, error) {
	logFile, err := os.Create(filepath.Join(f.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	proc, err := testenv.StartReplica(testenv.Replica{Binary: f.AgentBinary, Name: name, Config: cfgPath, Kubeconfig: kubeconfig,
		Out: logFile, OnExit: func() { logFile.Close() }, Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + f.Traces.Endpoint(), "OTEL_BSP_SCHEDULE_DELAY=200"}})
	if err != nil {
		logFile.Close()
		return nil, err
	}
	return &localAgent{name: name, config: cfgPath, kubeconfig: kubeconfig, proc: proc}, nil
}

// Management implements Fleet.
func (f *LocalFleet) Management() client.Client { return f.mgmt.Client }

// Region implements Fleet.
func (f *LocalFleet) Region(name string) client.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.regions[name].cluster.Client
}

// Regions implements Fleet.
func (f *LocalFleet) Regions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.order...)
}

// AddRegion implements Fleet: a new control plane for the region, then the same deployment.
func (f *LocalFleet) AddRegion(ctx context.Context, name, deployDir string) error {
	fl, err := testenv.Start([]string{name}, testenv.Options{Dir: filepath.Join(f.Dir, "clusters-"+name), Log: f.Log})
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.fleets = append(f.fleets, fl)
	f.mu.Unlock()
	return f.deploy(ctx, name, fl.Cluster(name), deployDir)
}

// KillLeader implements Fleet: the replica named on the region's shard Lease gets SIGKILL, and a
// new replica replaces it (as a Deployment would).
func (f *LocalFleet) KillLeader(ctx context.Context, region string) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := f.mgmt.Client.Get(ctx, client.ObjectKey{Namespace: agentNamespace, Name: claim.LeaseName(region)}, lease); err != nil {
		return "", err
	}
	holder := lease.Annotations[claim.HolderAnnotation]
	f.mu.Lock()
	r := f.regions[region]
	f.mu.Unlock()
	for i, a := range r.replicas {
		if a.name == holder {
			a.kill(syscall.SIGKILL)
			repl, err := f.startAgent(holder+"-next", a.config, a.kubeconfig)
			if err != nil {
				return "", err
			}
			f.mu.Lock()
			r.replicas[i] = repl
			f.mu.Unlock()
			return holder, nil
		}
	}
	return "", fmt.Errorf("no running replica named %q (the Lease's holder) in %s", holder, region)
}

// AgentLogs implements Fleet: every agent replica's log file.
func (f *LocalFleet) AgentLogs() (string, error) {
	files, err := filepath.Glob(filepath.Join(f.Dir, "*-replica-*.log"))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}

// StopAgents implements Fleet: SIGTERM to every replica of region (each releases the shard Lease
// it holds on its way out, as a pod deleted by a scale to zero does).
func (f *LocalFleet) StopAgents(_ context.Context, region string) error {
	f.mu.Lock()
	r, ok := f.regions[region]
	f.mu.Unlock()
	if !ok {
		return errors.New("unknown region " + region)
	}
	for _, a := range r.replicas {
		a.kill(syscall.SIGTERM)
	}
	return nil
}

// StartAgents implements Fleet: every stopped replica of region is replaced by a new process
// with the same configuration and identity.
func (f *LocalFleet) StartAgents(_ context.Context, region string) error {
	f.mu.Lock()
	r, ok := f.regions[region]
	f.mu.Unlock()
	if !ok {
		return errors.New("unknown region " + region)
	}
	for i, a := range r.replicas {
		if a.proc.Alive() {
			continue
		}
		repl, err := f.startAgent(a.name+"-restarted", a.config, a.kubeconfig)
		if err != nil {
			return err
		}
		f.mu.Lock()
		r.replicas[i] = repl
		f.mu.Unlock()
	}
	return nil
}

// ManagementAs implements Fleet: the admin impersonating user.
func (f *LocalFleet) ManagementAs(user string, groups ...string) (client.Client, error) {
	return client.New(f.mgmt.ImpersonatingConfig(user, groups...), client.Options{Scheme: testenv.Scheme()})
}

// HubLogs implements Fleet: every hub replica's log file.
func (f *LocalFleet) HubLogs() (string, error) {
	var b strings.Builder
	for i := range HubReplicas {
		data, err := os.ReadFile(filepath.Join(f.Dir, fmt.Sprintf("hub-replica-%d.log", i)))
		if err != nil {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}

// AgentIdentities implements Fleet.
func (f *LocalFleet) AgentIdentities(region string) (client.Client, client.Client, error) {
	f.mu.Lock()
	r, ok := f.regions[region]
	f.mu.Unlock()
	if !ok {
		return nil, nil, errors.New("unknown region " + region)
	}
	local, err := r.cluster.ServiceAccountClient(agentNamespace, agentServiceAccount)
	if err != nil {
		return nil, nil, err
	}
	mgmt, err := f.mgmt.ServiceAccountClient(agentNamespace, regionServiceAccount(region))
	return local, mgmt, err
}
