package fleet

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// testRegions are the regions the e2e starts with.
var testRegions = []string{"us-east-1", "eu-west-1", "ap-southeast-1"}

// The kind launcher's plan, checked without Docker: cluster configs, kubeconfig Secrets and the
// apply order.
func TestKindPlan(t *testing.T) {
	p := PlanKind(testRegions, "ghcr.io/regionsync/agent:e2e", KindOptions{})
	names := make([]string, 0, len(p.Clusters))
	for _, c := range p.Clusters {
		names = append(names, c.Name)
		if c.Config.Kind != "Cluster" || c.Config.APIVersion != "kind.x-k8s.io/v1alpha4" || c.Config.Name != c.Name {
			t.Errorf("cluster %s config %+v", c.Name, c.Config.TypeMeta)
		}
		if len(c.Config.Nodes) != 1 || c.Config.Nodes[0].Role != v1alpha4.ControlPlaneRole {
			t.Errorf("cluster %s nodes %+v", c.Name, c.Config.Nodes)
		}
		if c.Config.Networking.DisableDefaultCNI || len(c.Config.KubeadmConfigPatches) != 0 || len(c.Config.ContainerdConfigPatches) != 0 {
			t.Errorf("cluster %s: kind's defaults changed without options: %+v", c.Name, c.Config)
		}
	}
	want := []string{"regionsync-management", "regionsync-us-east-1", "regionsync-eu-west-1", "regionsync-ap-southeast-1"}
	if !slices.Equal(names, want) {
		t.Fatalf("clusters %v, want %v", names, want)
	}
	if len(p.Secrets) != len(testRegions) {
		t.Fatalf("%d kubeconfig Secrets for %d regions", len(p.Secrets), len(testRegions))
	}
	for i, s := range p.Secrets {
		if s.Region != testRegions[i] || s.Namespace != "regionsync-system" || s.Name != "regionsync-management-kubeconfig" || s.Key != "kubeconfig" {
			t.Errorf("secret %+v", s)
		}
		if s.ServiceAccount != "regionsync-system/region-"+testRegions[i] {
			t.Errorf("secret of %s authenticates as %s", s.Region, s.ServiceAccount)
		}
		if s.Server != "https://regionsync-management-control-plane:6443" {
			t.Errorf("secret of %s points at %s, not management's address inside the kind network", s.Region, s.Server)
		}
	}
	// Apply order: every cluster exists first; management is set up before any region; each
	// region is registered on management, has the image and its kubeconfig Secret before its
	// agent overlay is applied.
	index := func(cluster, action, path string) int {
		return slices.IndexFunc(p.Steps, func(s Step) bool { return s.Cluster == cluster && s.Action == action && s.Path == path })
	}
	lastCreate := -1
	for _, c := range p.Clusters {
		lastCreate = max(lastCreate, index(c.Name, "create-cluster", ""))
	}
	mgmtBase := index("regionsync-management", "apply", "kustomize/management")
	if mgmtBase < lastCreate {
		t.Errorf("management base applied (step %d) before every cluster exists (step %d)", mgmtBase, lastCreate)
	}
	// The hub runs on management from the image under test, after the base (its CRDs and
	// namespace) is there.
	hubLoad, hubApply := index("regionsync-management", "load-image", ""), index("regionsync-management", "apply", ClusterProfilesHub.Path)
	if hubLoad < 0 || hubApply < 0 || hubLoad > hubApply || hubApply < mgmtBase {
		t.Errorf("management: base %d, image load %d, hub overlay %d", mgmtBase, hubLoad, hubApply)
	}
	for _, r := range testRegions {
		c := "regionsync-" + r
		reg := index("regionsync-management", "apply", "regions/"+r+"/management")
		load := index(c, "load-image", "")
		ns := index(c, "apply-namespace", "")
		secret := index(c, "kubeconfig-secret", "")
		agent := index(c, "apply", "regions/"+r+"/agent")
		op := index(c, "tenant-operator", "")
		for name, i := range map[string]int{"registration": reg, "load": load, "namespace": ns, "secret": secret, "agent": agent, "operator": op} {
			if i < 0 {
				t.Fatalf("%s: no %s step", r, name)
			}
		}
		if mgmtBase >= reg || reg >= agent || load >= agent || ns >= secret || secret >= agent || agent >= op {
			t.Errorf("%s: order registration %d, load %d, namespace %d, secret %d, agent %d, operator %d", r, reg, load, ns, secret, agent, op)
		}
	}
	// The image under test replaces the overlay's image in the agent Deployment, and nothing else
	// of the overlay changes.
	deployDir, err := RepoDeployDir()
	if err != nil {
		t.Fatal(err)
	}
	ov, err := RenderRegion(deployDir, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	before := make([]string, len(ov.Agent))
	for i, o := range ov.Agent {
		data, _ := o.MarshalJSON()
		before[i] = string(data)
	}
	objs := withImage(ov.Agent, p.Image)
	for i, o := range objs {
		data, _ := o.MarshalJSON()
		if o.GetKind() != "Deployment" {
			if string(data) != before[i] {
				t.Errorf("%s %s changed by the image override", o.GetKind(), o.GetName())
			}
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if img := containers[0].(map[string]any)["image"]; img != p.Image {
			t.Errorf("agent Deployment image %v, want %s", img, p.Image)
		}
	}
}

// The offline node image (make kind-node-image) and a cgroup v1 host change the cluster configs,
// never the plan's steps.
func TestKindPlanOptions(t *testing.T) {
	opts := KindOptions{NodeImage: "regionsync.local/kind-node:v1.36.3", Offline: true, CgroupV1: true, NoSysResource: true}
	p := PlanKind(testRegions[:2], "img", opts)
	if len(p.Clusters) != 3 {
		t.Fatalf("%d clusters for management and 2 regions", len(p.Clusters))
	}
	for _, c := range p.Clusters {
		if c.Config.Nodes[0].Image != opts.NodeImage {
			t.Errorf("%s node image %q", c.Name, c.Config.Nodes[0].Image)
		}
		if !c.Config.Networking.DisableDefaultCNI {
			t.Errorf("%s: the offline image has no kindnetd, the default CNI must be off", c.Name)
		}
		if !slices.Contains(c.Config.KubeadmConfigPatches, kubeletCgroupV1Patch) {
			t.Errorf("%s: no failCgroupV1 patch on a cgroup v1 host: %v", c.Name, c.Config.KubeadmConfigPatches)
		}
		if !slices.Contains(c.Config.ContainerdConfigPatches, containerdRestrictOOMPatch) {
			t.Errorf("%s: oom_score_adj not restricted without CAP_SYS_RESOURCE: %v", c.Name, c.Config.ContainerdConfigPatches)
		}
	}
	if !slices.EqualFunc(p.Steps, PlanKind(testRegions[:2], "img", KindOptions{}).Steps, func(a, b Step) bool { return a == b }) {
		t.Error("options changed the steps")
	}
	if got := KindOptionsFromEnv(); got.Offline != strings.HasPrefix(got.NodeImage, "regionsync.local/") {
		t.Errorf("KindOptionsFromEnv %+v", got)
	}
}

// The kind launcher's Deployments get the receiver's endpoint; an existing value is replaced, other
// variables and other kinds are kept.
func TestWithOTLPEndpoint(t *testing.T) {
	deployment := &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "agent", "env": []any{
			map[string]any{"name": "POD_NAME", "value": "x"},
			map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://old:4317"},
		}}},
	}}}}}
	service := &unstructured.Unstructured{Object: map[string]any{"kind": "Service", "spec": map[string]any{}}}
	withOTLPEndpoint([]*unstructured.Unstructured{deployment, service}, "http://172.18.0.1:4317")
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	want := []any{
		map[string]any{"name": "POD_NAME", "value": "x"},
		map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://172.18.0.1:4317"},
		map[string]any{"name": "OTEL_BSP_SCHEDULE_DELAY", "value": "200"},
	}
	if diff := cmp.Diff(want, containers[0].(map[string]any)["env"]); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"kind": "Service", "spec": map[string]any{}}, service.Object); diff != "" {
		t.Errorf("service changed (-want +got):\n%s", diff)
	}
}
