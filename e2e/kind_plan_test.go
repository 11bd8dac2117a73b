//go:build e2e

package e2e

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/deploy"
)

// The kind provider's plan, checked without Docker: cluster configs, kubeconfig Secrets and the
// apply order.
func TestKindPlan(t *testing.T) {
	p := PlanKind(Regions, "ghcr.io/regionsync/agent:e2e", KindOptions{})
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
	if len(p.Secrets) != len(Regions) {
		t.Fatalf("%d kubeconfig Secrets for %d regions", len(p.Secrets), len(Regions))
	}
	for i, s := range p.Secrets {
		if s.Region != Regions[i] || s.Namespace != "regionsync-system" || s.Name != "regionsync-management-kubeconfig" || s.Key != "kubeconfig" {
			t.Errorf("secret %+v", s)
		}
		if s.ServiceAccount != "regionsync-system/region-"+Regions[i] {
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
	hubLoad, hubApply := index("regionsync-management", "load-image", ""), index("regionsync-management", "apply", hubOverlay)
	if hubLoad < 0 || hubApply < 0 || hubLoad > hubApply || hubApply < mgmtBase {
		t.Errorf("management: base %d, image load %d, hub overlay %d", mgmtBase, hubLoad, hubApply)
	}
	for _, r := range Regions {
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
	p := PlanKind(Regions[:2], "img", opts)
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
	if !slices.EqualFunc(p.Steps, PlanKind(Regions[:2], "img", KindOptions{}).Steps, func(a, b Step) bool { return a == b }) {
		t.Error("options changed the steps")
	}
	if got := KindOptionsFromEnv(); got.Offline != strings.HasPrefix(got.NodeImage, "regionsync.local/") {
		t.Errorf("KindOptionsFromEnv %+v", got)
	}
}

// The hub overlay both providers deploy: the ClusterProfile CRD and the shipped
// hub-clusterprofiles overlay, its configuration with the e2e's liveness grace and nothing else
// changed.
func TestRenderHub(t *testing.T) {
	deployDir, err := RepoDeployDir()
	if err != nil {
		t.Fatal(err)
	}
	objs, cfg, err := RenderHub(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Liveness.Grace.Duration != HubLivenessGrace {
		t.Errorf("liveness grace %s, want %s", cfg.Liveness.Grace.Duration, HubLivenessGrace)
	}
	crds, err := deploy.Render(filepath.Join(deployDir, "crds", "clusterinventory"))
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := deploy.Render(filepath.Join(deployDir, "kustomize", "hub-clusterprofiles"))
	if err != nil {
		t.Fatal(err)
	}
	shipped = append(crds, shipped...)
	if cfg.ClusterProfiles.Namespace == "" {
		t.Error("the e2e's hub publishes no ClusterProfiles (clusterProfiles.namespace unset)")
	}
	if len(objs) != len(shipped) {
		t.Fatalf("%d objects rendered, the overlay has %d", len(objs), len(shipped))
	}
	for i, o := range objs {
		if o.GetKind() == "ConfigMap" {
			data, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
			got, err := hub.ParseConfig([]byte(data))
			if err != nil {
				t.Fatalf("the e2e's hub configuration: %v", err)
			}
			want, _, _ := unstructured.NestedString(shipped[i].Object, "data", "config.yaml")
			base, err := hub.ParseConfig([]byte(want))
			if err != nil {
				t.Fatal(err)
			}
			base.Liveness = got.Liveness
			if !reflect.DeepEqual(got, base) {
				t.Errorf("the e2e changed more than the liveness grace:\n%+v\n%+v", got, base)
			}
			continue
		}
		a, _ := o.MarshalJSON()
		b, _ := shipped[i].MarshalJSON()
		if string(a) != string(b) {
			t.Errorf("%s %s changed", o.GetKind(), o.GetName())
		}
	}
}
