package fleet

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/otlpsink"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// KindPrefix starts the name of every kind cluster StartKind creates.
const KindPrefix = "regionsync-"

// ManagementKubeconfigSecret is the Secret (key "kubeconfig") the agent overlay mounts.
const ManagementKubeconfigSecret = "regionsync-management-kubeconfig"

// KindCluster is one cluster the kind launcher creates.
type KindCluster struct {
	Name   string
	Region string // "" for management
	Config *v1alpha4.Cluster
}

// KubeconfigSecret is the management kubeconfig Secret written into a region: a token of the
// region's ServiceAccount on management, for the management API server's address inside the
// kind network.
type KubeconfigSecret struct {
	Region, Namespace, Name, Key string
	ServiceAccount               string // namespace/name on management
	Server                       string
}

// Step is one action of the deployment, in order.
type Step struct {
	Cluster string // kind cluster name
	Action  string // one of the Action* constants
	Path    string // for apply: the kustomization under deploy/
}

// demoCRDs are the demo's CRDs (the Tenant) under deploy/, which the kind clusters get first.
const demoCRDs = "crds/demo"

// The actions of a Step.
const (
	ActionCreateCluster    = "create-cluster"    // create the kind cluster
	ActionLoadImage        = "load-image"        // import the image into its nodes
	ActionApply            = "apply"             // apply the kustomization at Path
	ActionApplyNamespace   = "apply-namespace"   // create AgentNamespace
	ActionKubeconfigSecret = "kubeconfig-secret" // write the region's management kubeconfig Secret
	ActionTenantOperator   = "tenant-operator"   // run the demo tenant operator beside the agents
)

// KindPlan is everything the kind launcher (StartKind) creates, computed without Docker.
type KindPlan struct {
	Image    string
	Options  KindOptions
	Clusters []KindCluster
	Secrets  []KubeconfigSecret
	Steps    []Step
}

// KindOptions adapt the clusters to the node image and the host. The zero value is kind's
// defaults (the stock kindest/node image, which needs registries).
type KindOptions struct {
	// NodeImage is the kind node image ("" = kind's default for its version).
	NodeImage string
	// Offline: the node image is hack/kind's (make kind-node-image): it ships a bridge CNI config
	// and no kindnetd image, so kind's default CNI is disabled; it has no CoreDNS either, so the
	// agents reach management by IP address instead of the node container's name.
	Offline bool
	// CgroupV1: the host runs cgroup v1, which kubelet >= 1.35 refuses unless failCgroupV1 is
	// false.
	CgroupV1 bool
	// NoSysResource: the host's capability bounding set lacks CAP_SYS_RESOURCE (so the nodes'
	// too, see hack/kind/runc-wrapper.sh). Lowering oom_score_adj needs it, and runc fails every
	// pod sandbox ("can't get final child's PID from pipe: EOF") unless containerd restricts
	// oom_score_adj to its own (restrict_oom_score_adj, as for rootless nodes).
	NoSysResource bool
}

// KindOptionsFromEnv reads KIND_NODE_IMAGE (an image under regionsync.local/ is hack/kind's
// offline image) and the host's cgroup version.
func KindOptionsFromEnv() KindOptions {
	img := os.Getenv("KIND_NODE_IMAGE")
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return KindOptions{NodeImage: img, Offline: strings.HasPrefix(img, "regionsync.local/"), CgroupV1: err != nil,
		NoSysResource: !hostHasCapability(24)} // CAP_SYS_RESOURCE
}

// hostHasCapability reports whether capability bit is in this process's bounding set (true when
// it cannot be read).
func hostHasCapability(bit uint) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err != nil || n&(1<<bit) != 0
		}
	}
	return true
}

func kindName(region string) string {
	if region == "" {
		return KindPrefix + "management"
	}
	return KindPrefix + region
}

// PlanKind plans a management cluster and the regions.
func PlanKind(regions []string, image string, opts KindOptions) KindPlan {
	p := KindPlan{Image: image, Options: opts}
	mgmt := kindName("")
	p.Clusters = append(p.Clusters, kindCluster(mgmt, "", opts))
	for _, r := range regions {
		p.Clusters = append(p.Clusters, kindCluster(kindName(r), r, opts))
	}
	for _, c := range p.Clusters {
		p.Steps = append(p.Steps, Step{Cluster: c.Name, Action: ActionCreateCluster})
	}
	p.Steps = append(p.Steps,
		Step{Cluster: mgmt, Action: ActionApply, Path: demoCRDs},
		Step{Cluster: mgmt, Action: ActionApply, Path: "kustomize/management"},
		// The hub runs from the same image (its binary is /hub) with the e2e's liveness grace.
		Step{Cluster: mgmt, Action: ActionLoadImage},
		Step{Cluster: mgmt, Action: ActionApply, Path: ClusterProfilesHub.Path},
	)
	for _, r := range regions {
		p.Steps = append(p.Steps, p.regionSteps(r)...)
	}
	return p
}

// kubeletCgroupV1Patch lets kubelet >= 1.35 start on a cgroup v1 host.
const kubeletCgroupV1Patch = `kind: KubeletConfiguration
failCgroupV1: false
`

// containerdRestrictOOMPatch: pods' oom_score_adj no lower than containerd's (NoSysResource).
const containerdRestrictOOMPatch = `[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
`

func kindCluster(name, region string, opts KindOptions) KindCluster {
	cfg := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     name,
		Nodes:    []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole, Image: opts.NodeImage}},
	}
	if opts.Offline {
		cfg.Networking.DisableDefaultCNI = true
	}
	if opts.CgroupV1 {
		cfg.KubeadmConfigPatches = append(cfg.KubeadmConfigPatches, kubeletCgroupV1Patch)
	}
	if opts.NoSysResource {
		cfg.ContainerdConfigPatches = append(cfg.ContainerdConfigPatches, containerdRestrictOOMPatch)
	}
	v1alpha4.SetDefaultsCluster(cfg)
	return KindCluster{Name: name, Region: region, Config: cfg}
}

// regionSteps registers a region on management, gives it the management kubeconfig, loads the
// image and applies its agent overlay.
func (p *KindPlan) regionSteps(region string) []Step {
	c := kindName(region)
	p.Secrets = append(p.Secrets, KubeconfigSecret{
		Region: region, Namespace: AgentNamespace, Name: ManagementKubeconfigSecret, Key: "kubeconfig",
		ServiceAccount: AgentNamespace + "/" + RegionServiceAccount(region),
		// kind nodes share the "kind" Docker network; the control plane is reachable by its
		// container name (offline: by its IP address, resolved when the Secret is written).
		Server: "https://" + kindName("") + "-control-plane:6443",
	})
	return []Step{
		{Cluster: kindName(""), Action: ActionApply, Path: "regions/" + region + "/management"},
		{Cluster: c, Action: ActionLoadImage},
		{Cluster: c, Action: ActionApply, Path: demoCRDs},
		{Cluster: c, Action: ActionApplyNamespace},
		{Cluster: c, Action: ActionKubeconfigSecret},
		{Cluster: c, Action: ActionApply, Path: "regions/" + region + "/agent"},
		{Cluster: c, Action: ActionTenantOperator},
	}
}

// KindFleet is a fleet started by StartKind: it runs a KindPlan with Docker.
type KindFleet struct {
	// Plan is what StartKind creates (AddRegion adds to it).
	Plan KindPlan
	// DeployDir is the deploy/ tree the overlays are rendered from.
	DeployDir string
	// Log receives progress lines.
	Log func(string, ...any)

	// Traces receives what the agents and tenant operators export (their Deployments get
	// OTEL_EXPORTER_OTLP_ENDPOINT pointing at it through the kind network's gateway).
	Traces *otlpsink.Receiver

	provider *cluster.Provider
	clients  map[string]client.Client
	configs  map[string]*rest.Config
	regions  []string
}

// StartKind creates the clusters, builds and loads the image, and deploys every region.
func StartKind(ctx context.Context, plan KindPlan, deployDir string, log func(string, ...any)) (*KindFleet, error) {
	f := &KindFleet{Plan: plan, DeployDir: deployDir, Log: log,
		provider: cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(kindcmd.NewLogger())),
		clients:  map[string]client.Client{}, configs: map[string]*rest.Config{}}
	start := time.Now()
	if err := buildImage(plan.Image); err != nil {
		return nil, err
	}
	log("kind: agent image %s built in %s", plan.Image, time.Since(start).Round(100*time.Millisecond))
	var err error
	if f.Traces, err = otlpsink.Start(otlpsink.Options{GRPCAddr: "0.0.0.0:0"}); err != nil {
		return nil, err
	}
	// Steps run in order; f is returned even on failure so that Stop can delete the clusters.
	if err := f.run(ctx, plan.Steps); err != nil {
		return f, err // the caller deletes what was created
	}
	for _, c := range plan.Clusters {
		if c.Region != "" {
			f.regions = append(f.regions, c.Region)
		}
	}
	return f, nil
}

// buildImage builds the agent image. By default it is hack/kind/agent-image.sh's (static
// binaries on scratch, no registry needed); KIND_AGENT_DOCKERFILE=1 builds the root Dockerfile
// (golang + distroless, which must be pullable), as make docker-build does.
func buildImage(image string) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(root, "hack", "kind", "agent-image.sh"), image)
	if os.Getenv("KIND_AGENT_DOCKERFILE") != "" {
		cmd = exec.Command("docker", "build", "-t", image, root)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func (f *KindFleet) run(ctx context.Context, steps []Step) error {
	for _, s := range steps {
		f.Log("kind: %s %s %s", s.Cluster, s.Action, s.Path)
		if err := f.step(ctx, s); err != nil {
			return fmt.Errorf("%s on %s: %w", s.Action, s.Cluster, err)
		}
	}
	return nil
}

func (f *KindFleet) step(ctx context.Context, s Step) error {
	switch s.Action {
	case ActionCreateCluster:
		idx := slices.IndexFunc(f.Plan.Clusters, func(c KindCluster) bool { return c.Name == s.Cluster })
		start := time.Now()
		if err := f.provider.Create(s.Cluster, cluster.CreateWithV1Alpha4Config(f.Plan.Clusters[idx].Config),
			cluster.CreateWithWaitForReady(3*time.Minute), cluster.CreateWithDisplayUsage(false)); err != nil {
			return err
		}
		f.Log("kind: cluster %s created in %s", s.Cluster, time.Since(start).Round(100*time.Millisecond))
		return f.connect(s.Cluster)
	case ActionLoadImage:
		return f.loadImage(s.Cluster)
	case ActionApply:
		objs, err := deploy.Render(filepath.Join(f.DeployDir, s.Path))
		if s.Path == ClusterProfilesHub.Path {
			objs, _, err = RenderHub(f.DeployDir, ClusterProfilesHub)
		}
		if err != nil {
			return err
		}
		if s.Path != demoCRDs {
			objs = withImage(objs, f.Plan.Image)
			if objs, err = f.withTracing(objs); err != nil {
				return err
			}
		}
		return deploy.Apply(ctx, f.clients[s.Cluster], objs)
	case ActionApplyNamespace:
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: AgentNamespace}}
		return client.IgnoreAlreadyExists(f.clients[s.Cluster].Create(ctx, ns))
	case ActionKubeconfigSecret:
		return f.kubeconfigSecret(ctx, s.Cluster)
	case ActionTenantOperator:
		objs, err := f.withTracing(tenantOperatorObjects(f.Plan.Image, regionOf(f.Plan, s.Cluster)))
		if err != nil {
			return err
		}
		return deploy.Apply(ctx, f.clients[s.Cluster], objs)
	}
	return fmt.Errorf("unknown step %q", s.Action)
}

func regionOf(p KindPlan, clusterName string) string {
	for _, c := range p.Clusters {
		if c.Name == clusterName {
			return c.Region
		}
	}
	return ""
}

// connect builds admin clients from kind's (external) kubeconfig.
func (f *KindFleet) connect(name string) error {
	raw, err := f.provider.KubeConfig(name, false)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(raw))
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	f.clients[name], f.configs[name] = c, cfg
	return nil
}

// loadImage streams `docker save` of the image into every node of the cluster.
func (f *KindFleet) loadImage(name string) error {
	nodes, err := f.provider.ListInternalNodes(name)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		save := exec.Command("docker", "save", f.Plan.Image)
		out, err := save.StdoutPipe()
		if err != nil {
			return err
		}
		if err := save.Start(); err != nil {
			return err
		}
		loadErr := nodeutils.LoadImageArchive(n, out)
		_, _ = io.Copy(io.Discard, out)
		if err := save.Wait(); err != nil {
			return err
		}
		if loadErr != nil {
			return loadErr
		}
	}
	return nil
}

// kubeconfigSecret writes the region's management kubeconfig Secret: a token of the region's
// ServiceAccount on management for the management API server's in-network address.
func (f *KindFleet) kubeconfigSecret(ctx context.Context, clusterName string) error {
	region := regionOf(f.Plan, clusterName)
	idx := slices.IndexFunc(f.Plan.Secrets, func(s KubeconfigSecret) bool { return s.Region == region })
	spec := f.Plan.Secrets[idx]
	mgmtCfg := f.configs[kindName("")]
	cs, err := kubernetes.NewForConfig(mgmtCfg)
	if err != nil {
		return err
	}
	tok, err := cs.CoreV1().ServiceAccounts(AgentNamespace).CreateToken(ctx, RegionServiceAccount(region),
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	server := spec.Server
	if f.Plan.Options.Offline {
		if server, err = f.managementIPServer(); err != nil {
			return err
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["management"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: mgmtCfg.CAData}
	kc.AuthInfos["region"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["management"] = &clientcmdapi.Context{Cluster: "management", AuthInfo: "region"}
	kc.CurrentContext = "management"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: spec.Namespace, Name: spec.Name}, Data: map[string][]byte{spec.Key: data}}
	return client.IgnoreAlreadyExists(f.clients[clusterName].Create(ctx, secret))
}

// managementIPServer is management's API server at its node's IPv4 address in the kind network
// (in the API server certificate: kubeadm's advertise address).
func (f *KindFleet) managementIPServer() (string, error) {
	nodes, err := f.provider.ListInternalNodes(kindName(""))
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		if role, err := n.Role(); err != nil || role != "control-plane" {
			continue
		}
		ip, _, err := n.IP()
		if err != nil {
			return "", err
		}
		return "https://" + net.JoinHostPort(ip, "6443"), nil
	}
	return "", fmt.Errorf("no control-plane node in %s", kindName(""))
}

// withImage points the agent Deployment at the image under test.
func withImage(objs []*unstructured.Unstructured, image string) []*unstructured.Unstructured {
	return eachDeploymentContainer(objs, func(c map[string]any) {
		c["image"] = image
		c["imagePullPolicy"] = "IfNotPresent"
	})
}

// eachDeploymentContainer changes every container of every Deployment among objs with change,
// in place, and returns objs.
func eachDeploymentContainer(objs []*unstructured.Unstructured, change func(container map[string]any)) []*unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() != deploymentKind {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for i := range containers {
			change(containers[i].(map[string]any))
		}
		_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
	}
	return objs
}

// tenantOperatorObjects runs the demo tenant operator (in the agent image) in a region.
func tenantOperatorObjects(image, region string) []*unstructured.Unstructured {
	obj := func(apiVersion, kind string, metadata, fields map[string]any) *unstructured.Unstructured {
		m := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": metadata}
		maps.Copy(m, fields)
		return &unstructured.Unstructured{Object: m}
	}
	const name = tenantOperator
	labels := map[string]any{"app.kubernetes.io/name": name}
	return []*unstructured.Unstructured{
		obj("v1", "ServiceAccount", map[string]any{"name": name, "namespace": AgentNamespace}, nil),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", map[string]any{"name": name}, map[string]any{
			"rules": []any{
				map[string]any{"apiGroups": []any{"demo.regionsync.dev"}, "resources": []any{"tenants", "tenants/status"}, "verbs": []any{"get", "list", "watch", "update", "patch"}},
				map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get", "list", "watch", "create"}},
			}}),
		obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", map[string]any{"name": name}, map[string]any{
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": AgentNamespace}}}),
		obj("apps/v1", deploymentKind, map[string]any{"name": name, "namespace": AgentNamespace}, map[string]any{
			"spec": map[string]any{"replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
					"serviceAccountName": name,
					// The agent namespace enforces the restricted Pod Security Standard.
					"securityContext": map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
					"containers": []any{map[string]any{"name": "operator", "image": image, "imagePullPolicy": "IfNotPresent",
						"command": []any{"/tenant-operator"}, "args": []any{"--region=" + region},
						"securityContext": map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}}}}},
				}}}}),
	}
}

// Management implements Fleet.
func (f *KindFleet) Management() client.Client { return f.clients[kindName("")] }

// Region implements Fleet.
func (f *KindFleet) Region(name string) client.Client { return f.clients[kindName(name)] }

// Regions implements Fleet.
func (f *KindFleet) Regions() []string { return append([]string(nil), f.regions...) }

// AddRegion implements Fleet.
func (f *KindFleet) AddRegion(ctx context.Context, name, deployDir string) error {
	f.DeployDir = deployDir
	f.Plan.Clusters = append(f.Plan.Clusters, kindCluster(kindName(name), name, f.Plan.Options))
	steps := append([]Step{{Cluster: kindName(name), Action: ActionCreateCluster}}, f.Plan.regionSteps(name)...)
	if err := f.run(ctx, steps); err != nil {
		return err
	}
	f.regions = append(f.regions, name)
	return nil
}

// KillLeader implements Fleet: the pod named on the shard Lease is deleted without grace.
func (f *KindFleet) KillLeader(ctx context.Context, region string) (string, error) {
	holder, err := LeaseHolder(ctx, f.Management(), region)
	if err != nil {
		return "", err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: AgentNamespace, Name: holder}}
	return holder, f.Region(region).Delete(ctx, pod, client.GracePeriodSeconds(0))
}

// AgentIdentities implements Fleet (impersonating the ServiceAccounts with kind's admin).
func (f *KindFleet) AgentIdentities(region string) (client.Client, client.Client, error) {
	as := func(cfg *rest.Config, ns, sa string) (client.Client, error) {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: testenv.ServiceAccountUser(ns, sa),
			Groups: []string{"system:authenticated", "system:serviceaccounts", "system:serviceaccounts:" + ns}}
		return client.New(c, client.Options{Scheme: testenv.Scheme()})
	}
	local, err := as(f.configs[kindName(region)], AgentNamespace, AgentServiceAccount)
	if err != nil {
		return nil, nil, err
	}
	mgmt, err := as(f.configs[kindName("")], AgentNamespace, RegionServiceAccount(region))
	return local, mgmt, err
}

// agentPods selects the agent's pods (deploy/kustomize/agent).
const agentPods = "app.kubernetes.io/name=regionsync-agent"

// AgentLogs implements Fleet: the logs of every agent pod's containers, read from the API server
// (kubectl logs). A region without a running agent pod is an error, never an empty log.
func (f *KindFleet) AgentLogs() (string, error) {
	var b strings.Builder
	for _, r := range f.regions {
		if err := podLogs(f.configs[kindName(r)], agentPods, r, &b); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// hubPods selects the hub's pods (deploy/kustomize/hub).
const hubPods = "app.kubernetes.io/name=regionsync-hub"

// HubLogs implements Fleet: the logs of every hub pod on management.
func (f *KindFleet) HubLogs() (string, error) {
	var b strings.Builder
	if err := podLogs(f.configs[kindName("")], hubPods, "management", &b); err != nil {
		return "", err
	}
	return b.String(), nil
}

// podLogs writes the logs of every container of the pods selected in the agent namespace of a
// cluster to b; no pod is an error.
func podLogs(cfg *rest.Config, selector, clusterName string, b *strings.Builder) error {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("listing the pods %s of %s: %w", selector, clusterName, err)
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("no pod (%s) in %s/%s", selector, clusterName, AgentNamespace)
	}
	for _, pod := range pods.Items {
		for _, c := range pod.Spec.Containers {
			data, err := cs.CoreV1().Pods(AgentNamespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("logs of %s/%s container %s in %s: %w", AgentNamespace, pod.Name, c.Name, clusterName, err)
			}
			b.Write(data)
		}
	}
	return nil
}

// agentDeployment is the agent overlay's Deployment.
const agentDeployment = "regionsync-agent"

// StopAgents implements Fleet: the region's agent Deployment scaled to zero (its pods get
// SIGTERM and release the shard Lease).
func (f *KindFleet) StopAgents(ctx context.Context, region string) error {
	return f.scaleAgents(ctx, region, 0)
}

// StartAgents implements Fleet: the agent Deployment scaled back to the overlay's 2 replicas.
func (f *KindFleet) StartAgents(ctx context.Context, region string) error {
	return f.scaleAgents(ctx, region, 2)
}

func (f *KindFleet) scaleAgents(ctx context.Context, region string, replicas int) error {
	c, ok := f.clients[kindName(region)]
	if !ok {
		return fmt.Errorf("unknown region %s", region)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: AgentNamespace, Name: agentDeployment}}
	return c.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))))
}

// ManagementAs implements Fleet: kind's admin impersonating user.
func (f *KindFleet) ManagementAs(user string, groups ...string) (client.Client, error) {
	c := rest.CopyConfig(f.configs[kindName("")])
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	return client.New(c, client.Options{Scheme: testenv.Scheme()})
}

// Stop deletes every kind cluster of the plan.
func (f *KindFleet) Stop() {
	for _, c := range f.Plan.Clusters {
		_ = f.provider.Delete(c.Name, "")
	}
	if f.Traces != nil {
		f.Traces.Stop()
	}
}

// WaitAgentsReady waits until every region's Deployments in the agent namespace (the agent
// overlay's and the tenant operator) have all their replicas Ready, and logs each pod with its
// ServiceAccount. On timeout it logs the pods' states and the namespace's events.
func (f *KindFleet) WaitAgentsReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, r := range f.regions {
		cs, err := kubernetes.NewForConfig(f.configs[kindName(r)])
		if err != nil {
			return err
		}
		for {
			deps, err := cs.AppsV1().Deployments(AgentNamespace).List(ctx, metav1.ListOptions{})
			ready := err == nil && len(deps.Items) >= 2
			if err == nil {
				for _, d := range deps.Items {
					want := int32(1)
					if d.Spec.Replicas != nil {
						want = *d.Spec.Replicas
					}
					if d.Status.ReadyReplicas != want || d.Status.UpdatedReplicas != want {
						ready = false
					}
				}
			}
			if ready {
				break
			}
			if time.Now().After(deadline) {
				if err == nil {
					for _, d := range deps.Items {
						for _, c := range d.Status.Conditions {
							f.Log("kind: %s deployment %s %s=%s %s: %s", r, d.Name, c.Type, c.Status, c.Reason, c.Message)
						}
					}
				}
				f.logPods(ctx, cs, r, true)
				return fmt.Errorf("%s: Deployments in %s not Ready after %s", r, AgentNamespace, timeout)
			}
			time.Sleep(2 * time.Second)
		}
		f.logPods(ctx, cs, r, false)
	}
	return nil
}

// logPods logs each agent-namespace pod's state; with events (or when a pod is not Ready) also
// the namespace's Warning events, which is where a ReplicaSet's refused pods show.
func (f *KindFleet) logPods(ctx context.Context, cs kubernetes.Interface, region string, events bool) {
	pods, err := cs.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		f.Log("kind: %s: listing pods: %v", region, err)
		return
	}
	allReady := true
	for _, p := range pods.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		allReady = allReady && ready
		var states []string
		for _, c := range p.Status.ContainerStatuses {
			st := "running"
			switch {
			case c.State.Waiting != nil:
				st = "waiting " + c.State.Waiting.Reason + ": " + c.State.Waiting.Message
			case c.State.Terminated != nil:
				st = "terminated " + c.State.Terminated.Reason
			}
			states = append(states, fmt.Sprintf("%s %s restarts=%d", c.Name, st, c.RestartCount))
		}
		f.Log("kind: %s pod %s/%s serviceAccount=%s node=%s phase=%s ready=%v %s", region, p.Namespace, p.Name,
			p.Spec.ServiceAccountName, p.Spec.NodeName, p.Status.Phase, ready, strings.Join(states, "; "))
	}
	if allReady && !events {
		return
	}
	evs, err := cs.CoreV1().Events(AgentNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, e := range evs.Items {
		if e.Type != corev1.EventTypeNormal {
			f.Log("kind: %s event %s %s: %s", region, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// withTracing points the Deployments' containers at the e2e's OTLP receiver, which the pods reach
// through the kind network's gateway (the host, on Linux).
func (f *KindFleet) withTracing(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if f.Traces == nil {
		return objs, nil
	}
	gw, err := kindGateway()
	if err != nil {
		return nil, err
	}
	_, port, err := net.SplitHostPort(f.Traces.GRPCAddr())
	if err != nil {
		return nil, err
	}
	return withOTLPEndpoint(objs, "http://"+net.JoinHostPort(gw, port)), nil
}

// kindGateway is the IPv4 gateway of Docker's "kind" network.
func kindGateway() (string, error) {
	out, err := exec.Command("docker", "network", "inspect", "kind", "-f", "{{range .IPAM.Config}}{{.Gateway}} {{end}}").Output()
	if err != nil {
		return "", fmt.Errorf("docker network inspect kind: %w", err)
	}
	for _, gw := range strings.Fields(string(out)) {
		if ip := net.ParseIP(gw); ip != nil && ip.To4() != nil {
			return gw, nil
		}
	}
	return "", fmt.Errorf("docker network kind has no IPv4 gateway (%q)", out)
}

// withOTLPEndpoint sets OTEL_EXPORTER_OTLP_ENDPOINT (and a 200 ms export delay) on every container
// of every Deployment, as an operator would in a region's overlay.
func withOTLPEndpoint(objs []*unstructured.Unstructured, endpoint string) []*unstructured.Unstructured {
	add := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
	return eachDeploymentContainer(objs, func(c map[string]any) {
		env, _ := c["env"].([]any)
		var kept []any
		for _, e := range env {
			if name, _ := e.(map[string]any)["name"].(string); add[name] == "" {
				kept = append(kept, e)
			}
		}
		for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_BSP_SCHEDULE_DELAY"} {
			kept = append(kept, map[string]any{"name": name, "value": add[name]})
		}
		c["env"] = kept
	})
}
