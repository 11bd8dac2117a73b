package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/telemetry/tracer"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/otlpsink"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// LocalOptions configure StartLocal. The zero value of each field is what the e2e needs unless
// said otherwise; the benchmarks and the demo set the rest.
type LocalOptions struct {
	// Dir receives what the fleet writes: the agents' and hubs' configuration files and
	// kubeconfigs, and their logs (<replica name>.log).
	Dir string
	// ClusterDir receives the clusters' kubeconfigs and control-plane logs, a directory per
	// cluster (default Dir/clusters).
	ClusterDir string
	// Regions get a control plane each, started with management's (Management).
	Regions []string
	// NoControllerManager starts the control planes without kube-controller-manager (faster;
	// namespace deletions and garbage collection then never complete).
	NoControllerManager bool
	// Log receives progress lines (nil: silent).
	Log func(format string, args ...any)

	// DeployDir, when set, is the deploy/ tree StartLocal deploys as an operator would: the
	// management base, then every region of Regions (its registration on management, its agent
	// overlay in its cluster, its agents) and of Registered, then Hub. Unset, StartLocal starts
	// the clusters only and the caller runs its own processes with Run (the demo).
	DeployDir string
	// Registered regions get their registration on management only: no cluster, no agents (the
	// benchmarks derive regions of their own from one).
	Registered []string
	// AgentBinary is the agent executable (cmd/agent) StartAgent runs.
	AgentBinary string
	// NoAgents deploys the regions' overlays without starting their agents (the benchmarks
	// start them per figure with StartAgent).
	NoAgents bool
	// TenantOperators runs the demo tenant operator in every region deployed with its own
	// cluster, in this process, continuing the agents' traces when Traces is set.
	TenantOperators bool
	// Hub, when set, is deployed on management after the regions (StartHub).
	Hub *HubOptions

	// Traces, when set, is the OTLP receiver the agents and tenant operators export to (its
	// owner stops it); unset, they export nothing.
	Traces *otlpsink.Receiver
	// Pprof makes every agent and hub replica serve net/http/pprof on a free local port
	// (Replica.Pprof).
	Pprof bool
	// StopGrace is how long a replica has to exit after SIGTERM before it is killed (default
	// 20s).
	StopGrace time.Duration
}

// HubOptions are the hub StartHub deploys on management.
type HubOptions struct {
	// Binary is the hub executable (cmd/hub).
	Binary string
	// Overlay is the hub's overlay (ClusterProfilesHub, ShippedHub); as many replicas run as its
	// Deployment has.
	Overlay HubOverlay
	// Name starts the replicas' names, <Name>-<i> (default "hub-replica").
	Name string
}

// LocalFleet is a fleet started by StartLocal: every cluster a real control plane from testenv,
// every agent and hub replica a separate process of its binary that authenticates as the
// overlay's identities (the agents by impersonation, the hub with a token of its ServiceAccount).
type LocalFleet struct {
	opts     LocalOptions
	mgmt     *testenv.Cluster
	ctx      context.Context // the in-process tenant operators' lifetime
	cancel   context.CancelFunc
	stopOnce sync.Once
	stopErr  error

	mu       sync.Mutex
	fleets   []*testenv.Fleet
	clusters []*testenv.Cluster
	regions  map[string]*DeployedRegion
	order    []string // the regions with a cluster, as deployed
	procs    []*Replica
	hubs     []*Replica
	agentKCs map[*testenv.Cluster]string
}

// DeployedRegion is a region a local fleet deployed from its overlays.
type DeployedRegion struct {
	// Cluster is the region's cluster: nil for a region only Registered, management itself for
	// AddSameClusterRegion.
	Cluster *testenv.Cluster
	// Overlays are the region's rendered overlays.
	Overlays Overlays
	// AgentConfig is the configuration its agent overlay ships.
	AgentConfig *config.AgentConfig
	// ConfigPath is the configuration file its replicas run with (WriteAgentConfig).
	ConfigPath string
	// Replicas is how many replicas the agent overlay's Deployment runs.
	Replicas int

	agents []*Replica
}

// StartLocal starts management and opts.Regions as local control planes and, with
// opts.DeployDir, deploys them. On error everything started is stopped.
func StartLocal(ctx context.Context, opts LocalOptions) (*LocalFleet, error) {
	if opts.StopGrace == 0 {
		opts.StopGrace = 20 * time.Second
	}
	if opts.ClusterDir == "" {
		opts.ClusterDir = filepath.Join(opts.Dir, "clusters")
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	f := &LocalFleet{opts: opts, regions: map[string]*DeployedRegion{}, agentKCs: map[*testenv.Cluster]string{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	fl, err := testenv.Start(append([]string{Management}, opts.Regions...),
		testenv.Options{Dir: opts.ClusterDir, NoControllerManager: opts.NoControllerManager, Log: opts.Log})
	if err != nil {
		f.cancel()
		return nil, err
	}
	f.fleets, f.clusters, f.mgmt = []*testenv.Fleet{fl}, slices.Clone(fl.Clusters), fl.Cluster(Management)
	if err := f.deployAll(ctx, fl); err != nil {
		_ = f.Stop()
		return nil, err
	}
	return f, nil
}

// deployAll deploys the management base, the regions and the hub from opts.DeployDir.
func (f *LocalFleet) deployAll(ctx context.Context, fl *testenv.Fleet) error {
	dir := f.opts.DeployDir
	if dir == "" {
		if f.opts.Hub != nil {
			return errors.New("fleet: a hub needs LocalOptions.DeployDir")
		}
		return nil
	}
	base, err := deploy.Render(filepath.Join(dir, "kustomize", "management"))
	if err != nil {
		return err
	}
	if err := deploy.Apply(ctx, f.mgmt.Client, base); err != nil {
		return fmt.Errorf("management base: %w", err)
	}
	for _, r := range f.opts.Regions {
		if err := f.deployOn(ctx, r, fl.Cluster(r), dir, f.opts.TenantOperators); err != nil {
			return err
		}
	}
	for _, r := range f.opts.Registered {
		if err := f.deployOn(ctx, r, nil, dir, false); err != nil {
			return err
		}
	}
	if f.opts.Hub != nil {
		if _, err := f.StartHub(ctx, *f.opts.Hub); err != nil {
			return err
		}
	}
	return nil
}

// deployOn applies a region's management registration and, for a region with a cluster c, its
// agent overlay there; it writes the agents' configuration file, runs the tenant operator in c
// when operator is set, and starts as many agent replicas as the overlay's Deployment has
// (unless NoAgents).
func (f *LocalFleet) deployOn(ctx context.Context, region string, c *testenv.Cluster, deployDir string, operator bool) error {
	ov, err := RenderRegion(deployDir, region)
	if err != nil {
		return err
	}
	if err := deploy.Apply(ctx, f.mgmt.Client, ov.Management); err != nil {
		return fmt.Errorf("%s management registration: %w", region, err)
	}
	r := &DeployedRegion{Cluster: c, Overlays: ov}
	if c == nil {
		f.mu.Lock()
		f.regions[region] = r
		f.mu.Unlock()
		f.opts.Log("%s registered on management (no cluster)", region)
		return nil
	}
	agentObjs := ov.Agent
	if c == f.mgmt { // management's base owns the namespace the agent shares with it
		agentObjs = slices.DeleteFunc(slices.Clone(agentObjs), func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "Namespace" && o.GetName() == AgentNamespace
		})
	}
	if err := deploy.Apply(ctx, c.Client, agentObjs); err != nil {
		return fmt.Errorf("%s agent overlay: %w", region, err)
	}
	if r.AgentConfig, err = deploy.AgentConfig(ov.Agent); err != nil {
		return err
	}
	if r.ConfigPath, err = f.WriteAgentConfig(r.AgentConfig, ""); err != nil {
		return err
	}
	r.Replicas = 1
	if d := deploy.Find(ov.Agent, deploymentKind, ""); d != nil {
		if n, ok, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); ok {
			r.Replicas = int(n)
		}
	}
	if operator {
		if err := f.startOperator(c, region); err != nil {
			return err
		}
	}
	if !f.opts.NoAgents {
		for i := range r.Replicas {
			a, err := f.StartAgent(c, fmt.Sprintf("%s-replica-%d", region, i), r.ConfigPath)
			if err != nil {
				return err
			}
			r.agents = append(r.agents, a)
		}
	}
	f.mu.Lock()
	f.regions[region] = r
	f.order = append(f.order, region)
	f.mu.Unlock()
	f.opts.Log("%s deployed: %d agent replicas as %s, on management as %s", region, len(r.agents),
		testenv.ServiceAccountUser(AgentNamespace, AgentServiceAccount), testenv.ServiceAccountUser(AgentNamespace, RegionServiceAccount(region)))
	return nil
}

// freeLocalAddr listens on a port of 127.0.0.1 the kernel picks.
const freeLocalAddr = "127.0.0.1:0"

// saGroups are the groups the API server gives a token of a ServiceAccount in AgentNamespace.
var saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + AgentNamespace}

// WriteAgentConfig writes the file an agent of cfg.Region runs with, as its Deployment would
// mount it, to Dir/<region>-agent.yaml and returns its path: cfg with metrics and health on free
// local ports and the management kubeconfig managementKubeconfig, by default ("") one acting as
// the region's identity there (RegionServiceAccount, by impersonation, so there is no token to
// renew and no credential renewal). cfg itself is not changed.
func (f *LocalFleet) WriteAgentConfig(cfg *config.AgentConfig, managementKubeconfig string) (string, error) {
	if managementKubeconfig == "" {
		var err error
		if managementKubeconfig, err = f.mgmt.WriteImpersonatingKubeconfig(RegionServiceAccount(cfg.Region)+"-kubeconfig",
			testenv.ServiceAccountUser(AgentNamespace, RegionServiceAccount(cfg.Region)), saGroups...); err != nil {
			return "", err
		}
	}
	file := *cfg // what changes is in value fields: cfg keeps its own
	file.Management.Kubeconfig = managementKubeconfig
	file.Management.CredentialRenewal = config.CredentialRenewalConfig{}
	file.Telemetry.MetricsAddr, file.Telemetry.HealthAddr = freeLocalAddr, freeLocalAddr
	return agentconfig.WriteConfig(filepath.Join(f.opts.Dir, cfg.Region+"-agent.yaml"), &file)
}

// agentKubeconfig is the agent's kubeconfig in cluster c, acting as the agent's ServiceAccount
// there (impersonated); it is written once per cluster.
func (f *LocalFleet) agentKubeconfig(c *testenv.Cluster) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if kc, ok := f.agentKCs[c]; ok {
		return kc, nil
	}
	kc, err := c.WriteImpersonatingKubeconfig("agent-kubeconfig", testenv.ServiceAccountUser(AgentNamespace, AgentServiceAccount), saGroups...)
	if err == nil {
		f.agentKCs[c] = kc
	}
	return kc, err
}

// StartAgent starts an agent replica named name (its POD_NAME) in cluster c with the
// configuration file cfgPath (WriteAgentConfig), as the agent's ServiceAccount in c; it exports
// its spans to Traces and serves pprof when the options say so. Its log is Dir/<name>.log.
func (f *LocalFleet) StartAgent(c *testenv.Cluster, name, cfgPath string) (*Replica, error) {
	kc, err := f.agentKubeconfig(c)
	if err != nil {
		return nil, err
	}
	var env []string
	if f.opts.Traces != nil {
		env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + f.opts.Traces.Endpoint(), "OTEL_BSP_SCHEDULE_DELAY=200"}
	}
	return f.Run(ProcessSpec{Name: name, Binary: f.opts.AgentBinary, Config: cfgPath, Kubeconfig: kc, Env: env, Pprof: f.opts.Pprof})
}

// StartHub applies a hub overlay (RenderHub) on management from DeployDir and runs as many hub
// replicas as its Deployment has, with the overlay's configuration (metrics and health on free
// local ports) at Dir/hub.yaml. They authenticate as the hub's ServiceAccount with a token of it
// (TokenRequest, what the kubelet projects into the pod), not as the admin impersonating it: the
// hub itself impersonates each Distribution's ServiceAccount, which impersonation cannot nest,
// and its right to do so is part of what the e2e proves. The fleet stops them with itself; the
// replicas started so far are returned with an error.
func (f *LocalFleet) StartHub(ctx context.Context, o HubOptions) ([]*Replica, error) {
	objs, cfg, err := RenderHub(f.opts.DeployDir, o.Overlay)
	if err != nil {
		return nil, err
	}
	if err := deploy.Apply(ctx, f.mgmt.Client, objs); err != nil {
		return nil, fmt.Errorf("hub overlay: %w", err)
	}
	if err := waitEstablished(ctx, f.mgmt.Client, objs); err != nil {
		return nil, err
	}
	token, err := f.mgmt.ServiceAccountTokenConfig(ctx, AgentNamespace, HubServiceAccount)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(f.opts.Dir, "hub-kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, Management, token); err != nil {
		return nil, err
	}
	cfg.Telemetry.MetricsAddr, cfg.Telemetry.HealthAddr = freeLocalAddr, freeLocalAddr
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(f.opts.Dir, "hub.yaml")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		return nil, err
	}
	replicas := int64(1)
	if d := deploy.Find(objs, deploymentKind, ""); d != nil {
		if n, ok, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); ok {
			replicas = n
		}
	}
	prefix := o.Name
	if prefix == "" {
		prefix = "hub-replica"
	}
	var hubs []*Replica
	for i := range replicas {
		h, err := f.Run(ProcessSpec{Name: fmt.Sprintf("%s-%d", prefix, i), Binary: o.Binary, Config: cfgPath, Kubeconfig: kubeconfig, Pprof: f.opts.Pprof})
		if err != nil {
			return hubs, err
		}
		hubs = append(hubs, h)
	}
	f.mu.Lock()
	f.hubs = append(f.hubs, hubs...)
	f.mu.Unlock()
	f.opts.Log("hub deployed on management from deploy/%s: %d replicas as %s (liveness grace %s)", o.Overlay.Path, replicas,
		testenv.ServiceAccountUser(AgentNamespace, HubServiceAccount), cfg.Liveness.Grace.Duration)
	return hubs, nil
}

// startOperator runs the demo tenant operator in region's cluster c until the fleet stops; with
// Traces it continues the trace the agent writes on the copies.
func (f *LocalFleet) startOperator(c *testenv.Cluster, region string) error {
	if f.opts.Traces == nil {
		return testenv.StartTenantOperator(f.ctx, c.Config, region, nil)
	}
	one := 1.0
	tp, shutdown, err := tracer.NewTracerProvider(f.ctx, fleetspec.Tracing{Endpoint: f.opts.Traces.Endpoint(), SamplingRatio: &one},
		tracer.Identity{ServiceName: tenantOperator, Region: region, ClusterName: region})
	if err != nil {
		return err
	}
	context.AfterFunc(f.ctx, func() { _ = shutdown(context.Background()) })
	return testenv.StartTenantOperator(f.ctx, c.Config, region, tp.Tracer(tenantOperator))
}

// ProcessSpec is a process for Run: an agent or hub replica (Config and Kubeconfig: it gets
// --config, --kubeconfig and POD_NAME=Name, testenv.StartReplica), or any binary with Args of its
// own.
type ProcessSpec struct {
	// Name names the replica (and its default log file).
	Name string
	// Binary is the executable.
	Binary string
	// Config and Kubeconfig are an agent's or hub's files.
	Config, Kubeconfig string
	// Args, when set, are the process's arguments instead (no POD_NAME either).
	Args []string
	// Env adds to the environment.
	Env []string
	// Log is the log file's path (default Dir/<Name>.log).
	Log string
	// Pprof serves net/http/pprof on a free local port (a replica only).
	Pprof bool
}

// Run starts a process the fleet stops with itself: the one way a local fleet, and its callers,
// start the agents, the hubs and anything beside them.
func (f *LocalFleet) Run(s ProcessSpec) (*Replica, error) {
	if _, err := os.Stat(s.Binary); err != nil {
		return nil, fmt.Errorf("%w (run make build)", err)
	}
	r := &Replica{Name: s.Name, Config: s.Config, Kubeconfig: s.Kubeconfig, Log: s.Log, grace: f.opts.StopGrace}
	if r.Log == "" {
		r.Log = filepath.Join(f.opts.Dir, s.Name+".log")
	}
	if s.Pprof {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		r.Pprof = fmt.Sprintf("127.0.0.1:%d", port)
	}
	logFile, err := os.Create(r.Log)
	if err != nil {
		return nil, err
	}
	onExit := func() { logFile.Close() }
	if s.Args != nil {
		r.Proc, err = testenv.StartProcess(s.Binary, s.Args, s.Env, logFile, onExit)
	} else {
		r.Proc, err = testenv.StartReplica(testenv.Replica{Binary: s.Binary, Name: s.Name, Config: s.Config, Kubeconfig: s.Kubeconfig,
			PprofAddr: r.Pprof, Env: s.Env, Out: logFile, OnExit: onExit})
	}
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", s.Name, s.Binary, err)
	}
	f.mu.Lock()
	f.procs = append(f.procs, r)
	f.mu.Unlock()
	return r, nil
}

// freePort is a TCP port free on 127.0.0.1 when asked.
func freePort() (int, error) {
	l, err := net.Listen("tcp", freeLocalAddr)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop stops every process the fleet started (SIGTERM to all at once, each killed after
// StopGrace), then the in-process tenant operators and the clusters. It is idempotent.
func (f *LocalFleet) Stop() error {
	f.stopOnce.Do(func() {
		f.mu.Lock()
		procs, fleets := slices.Clone(f.procs), slices.Clone(f.fleets)
		f.mu.Unlock()
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(func() { p.Stop(syscall.SIGTERM) })
		}
		wg.Wait()
		f.cancel()
		errs := make([]error, 0, len(fleets))
		for _, fl := range fleets {
			errs = append(errs, fl.Stop())
		}
		f.stopErr = errors.Join(errs...)
	})
	return f.stopErr
}

// Cluster is the cluster of that name (Management, a region's, an added region's), or nil.
func (f *LocalFleet) Cluster(name string) *testenv.Cluster {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Clusters are every cluster of the fleet, management first, then the regions' in order.
func (f *LocalFleet) Clusters() []*testenv.Cluster {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.clusters)
}

// Deployed is what the fleet deployed for region (its overlays, their agent configuration, its
// cluster), if it did.
func (f *LocalFleet) Deployed(region string) (DeployedRegion, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.regions[region]
	if !ok {
		return DeployedRegion{}, false
	}
	return *r, true
}

// Hubs are the hub replicas StartHub started.
func (f *LocalFleet) Hubs() []*Replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hubs)
}

// Management implements Fleet.
func (f *LocalFleet) Management() client.Client { return f.mgmt.Client }

// Region implements Fleet.
func (f *LocalFleet) Region(name string) client.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.regions[name].Cluster.Client
}

// Regions implements Fleet.
func (f *LocalFleet) Regions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.order...)
}

// AddRegion implements Fleet: a new control plane for the region, then the same deployment.
func (f *LocalFleet) AddRegion(ctx context.Context, name, deployDir string) error {
	fl, err := testenv.Start([]string{name}, testenv.Options{Dir: filepath.Join(f.opts.Dir, "clusters-"+name),
		NoControllerManager: f.opts.NoControllerManager, Log: f.opts.Log})
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.fleets = append(f.fleets, fl)
	f.clusters = append(f.clusters, fl.Clusters...)
	f.mu.Unlock()
	return f.deployOn(ctx, name, fl.Cluster(name), deployDir, f.opts.TenantOperators)
}

// AddSameClusterRegion deploys region name (its overlays under deployDir) on the management
// cluster itself: management is also the region, as when regionsync copies objects inside one
// cluster. No tenant operator runs there (the Tenants on management are the regions' objects).
// Call it after the scenarios that go over every region (Regions lists it).
func (f *LocalFleet) AddSameClusterRegion(ctx context.Context, name, deployDir string) error {
	return f.deployOn(ctx, name, f.mgmt, deployDir, false)
}

// KillLeader implements Fleet: the replica named on the region's shard Lease gets SIGKILL, and a
// new replica replaces it (as a Deployment would).
func (f *LocalFleet) KillLeader(ctx context.Context, region string) (string, error) {
	holder, err := LeaseHolder(ctx, f.mgmt.Client, region)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	r := f.regions[region]
	f.mu.Unlock()
	for i, a := range r.agents {
		if a.Name == holder {
			a.Stop(syscall.SIGKILL)
			repl, err := f.StartAgent(r.Cluster, holder+"-next", a.Config)
			if err != nil {
				return "", err
			}
			f.mu.Lock()
			r.agents[i] = repl
			f.mu.Unlock()
			return holder, nil
		}
	}
	return "", fmt.Errorf("no running replica named %q (the Lease's holder) in %s", holder, region)
}

// AgentLogs implements Fleet: every agent replica's log file.
func (f *LocalFleet) AgentLogs() (string, error) {
	files, err := filepath.Glob(filepath.Join(f.opts.Dir, "*-replica-*.log"))
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

// deployed is region's deployment, or an error naming the region.
func (f *LocalFleet) deployed(region string) (*DeployedRegion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.regions[region]
	if !ok || r.Cluster == nil {
		return nil, errors.New("unknown region " + region)
	}
	return r, nil
}

// StopAgents implements Fleet: SIGTERM to every replica of region (each releases the shard Lease
// it holds on its way out, as a pod deleted by a scale to zero does).
func (f *LocalFleet) StopAgents(_ context.Context, region string) error {
	r, err := f.deployed(region)
	if err != nil {
		return err
	}
	for _, a := range r.agents {
		a.Stop(syscall.SIGTERM)
	}
	return nil
}

// StartAgents implements Fleet: every stopped replica of region is replaced by a new process
// with the same configuration and identity.
func (f *LocalFleet) StartAgents(_ context.Context, region string) error {
	r, err := f.deployed(region)
	if err != nil {
		return err
	}
	for i, a := range r.agents {
		if a.Alive() {
			continue
		}
		repl, err := f.StartAgent(r.Cluster, a.Name+"-restarted", a.Config)
		if err != nil {
			return err
		}
		f.mu.Lock()
		r.agents[i] = repl
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
	for _, h := range f.Hubs() {
		data, err := os.ReadFile(h.Log)
		if err != nil {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}

// AgentIdentities implements Fleet.
func (f *LocalFleet) AgentIdentities(region string) (client.Client, client.Client, error) {
	r, err := f.deployed(region)
	if err != nil {
		return nil, nil, err
	}
	local, err := r.Cluster.ServiceAccountClient(AgentNamespace, AgentServiceAccount)
	if err != nil {
		return nil, nil, err
	}
	mgmt, err := f.mgmt.ServiceAccountClient(AgentNamespace, RegionServiceAccount(region))
	return local, mgmt, err
}
