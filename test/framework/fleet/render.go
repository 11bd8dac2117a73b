package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// RepoDeployDir is the repository's deploy/ directory.
func RepoDeployDir() (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy"), nil
}

// CopyDeployTree copies deploy/ and scripts/new-region.sh into dir, so that a scenario can add a
// region with the script without touching the checkout. It returns the copied deploy/ path.
func CopyDeployTree(dir string) (string, error) {
	src, err := RepoDeployDir()
	if err != nil {
		return "", err
	}
	if out, err := exec.Command("cp", "-R", src, filepath.Join(dir, "deploy")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copying deploy/: %v: %s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		return "", err
	}
	if out, err := exec.Command("cp", filepath.Join(src, "..", "scripts", "new-region.sh"), filepath.Join(dir, "scripts")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copying new-region.sh: %v: %s", err, out)
	}
	return filepath.Join(dir, "deploy"), nil
}

// Overlays are a region's rendered overlays.
type Overlays struct {
	Agent, Management []*unstructured.Unstructured
}

// RenderRegion renders deploy/regions/<region>/{agent,management} with krusty.
func RenderRegion(deployDir, region string) (Overlays, error) {
	agent, err := deploy.Render(filepath.Join(deployDir, "regions", region, "agent"))
	if err != nil {
		return Overlays{}, err
	}
	mgmt, err := deploy.Render(filepath.Join(deployDir, "regions", region, "management"))
	if err != nil {
		return Overlays{}, err
	}
	return Overlays{Agent: agent, Management: mgmt}, nil
}

// hubConfigMap is the ConfigMap the hub overlay generates its configuration into.
const hubConfigMap = "regionsync-hub-config"

// HubLivenessGrace is the liveness grace of the hub the e2e runs (the overlay ships 20s): a
// region whose agents stop (and release their shard Lease, which then lasts 1s) is judged
// silent within seconds, so the scenario waits on the hub, not on a sleep.
const HubLivenessGrace = 2 * time.Second

// HubOverlay is a hub overlay under deploy/ as a launcher deploys it.
type HubOverlay struct {
	// Path is the hub's kustomization under deploy/.
	Path string
	// CRDs are kustomizations under deploy/ whose CustomResourceDefinitions the hub needs, put
	// before the overlay's objects.
	CRDs []string
	// LivenessGrace, when set, replaces the liveness grace in the hub's configuration (in the
	// ConfigMap the overlay generates); unset, the configuration is the overlay's.
	LivenessGrace time.Duration
}

// ClusterProfilesHub is the hub the e2e deploys, publishing ClusterProfiles: the ClusterProfile
// CRD (deploy/crds/clusterinventory) and deploy/kustomize/hub-clusterprofiles (deploy/kustomize/hub
// with the clusterprofiles component), with HubLivenessGrace.
var ClusterProfilesHub = HubOverlay{Path: "kustomize/hub-clusterprofiles", CRDs: []string{"crds/clusterinventory"}, LivenessGrace: HubLivenessGrace}

// ShippedHub is deploy/kustomize/hub as it ships (the benchmarks' hub).
var ShippedHub = HubOverlay{Path: "kustomize/hub"}

// RenderHub renders a hub overlay: its CRDs' objects, then the overlay's, with the configuration
// in the hub's ConfigMap changed as o says; it returns them and that configuration.
func RenderHub(deployDir string, o HubOverlay) ([]*unstructured.Unstructured, *hub.Config, error) {
	var objs []*unstructured.Unstructured
	for _, p := range append(append([]string(nil), o.CRDs...), o.Path) {
		rendered, err := deploy.Render(filepath.Join(deployDir, p))
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, rendered...)
	}
	obj, data := deploy.GeneratedConfigMap(objs, hubConfigMap, "config.yaml")
	if obj == nil {
		return nil, nil, fmt.Errorf("no ConfigMap %s in deploy/%s", hubConfigMap, o.Path)
	}
	cfg, err := hub.ParseConfig([]byte(data))
	if err != nil {
		return nil, nil, fmt.Errorf("ConfigMap %s: %w", obj.GetName(), err)
	}
	if o.LivenessGrace == 0 {
		return objs, cfg, nil
	}
	cfg.Liveness.Grace = metav1.Duration{Duration: o.LivenessGrace}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := unstructured.SetNestedField(obj.Object, string(out), "data", "config.yaml"); err != nil {
		return nil, nil, err
	}
	return objs, cfg, nil
}

// waitEstablished waits until every CustomResourceDefinition among objs is Established, so that
// what is started next finds its kinds served.
func waitEstablished(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CustomResourceDefinition %s Established: %w", o.GetName(), err)
		}
	}
	return nil
}
