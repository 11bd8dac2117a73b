//go:build e2e

// Package e2e runs regionsync's end-to-end scenarios on a management cluster and several regions,
// deployed from the kustomize overlays under deploy/ exactly as operators deploy them. Two
// providers implement Fleet: local (real kube-apiserver, etcd and kube-controller-manager
// processes, the agent binary as 2 processes per region, every identity enforced by
// impersonation; runs everywhere, CI included) and kind (clusters from sigs.k8s.io/kind, the image
// built and loaded; needs Docker: make test-e2e-kind). Both run the hub on management from
// deploy/kustomize/hub-clusterprofiles (2 replicas, its own ServiceAccount, one ClusterProfile per
// Region) for the Distribution and ClusterProfile scenarios.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/deploy"
)

// Fleet is what the scenarios need from a provider.
type Fleet interface {
	// Management is an admin client on the management cluster.
	Management() client.Client
	// Region is an admin client on a regional cluster.
	Region(name string) client.Client
	// Regions lists the deployed regions.
	Regions() []string
	// AddRegion creates a cluster for a region whose overlays exist under deployDir and deploys
	// it (management registration, agent overlay, agents running).
	AddRegion(ctx context.Context, name, deployDir string) error
	// KillLeader kills the replica of region that syncs (SIGKILL, or a pod deletion with no
	// grace period) and returns its name.
	KillLeader(ctx context.Context, region string) (string, error)
	// AgentIdentities are clients acting as region's agent: its ServiceAccount in the region and
	// its identity on management.
	AgentIdentities(region string) (local, management client.Client, err error)
	// AgentLogs returns the logs of every running agent replica of every region so far.
	AgentLogs() (string, error)
	// StopAgents stops every agent replica of region (SIGTERM, as scaling its Deployment to
	// zero does): they release the shard Lease and stop renewing it.
	StopAgents(ctx context.Context, region string) error
	// StartAgents starts region's agent replicas again after StopAgents.
	StartAgents(ctx context.Context, region string) error
	// ManagementAs is a client on management acting as user (with groups), for RBAC and the
	// admission policies to judge as they would that user's own requests.
	ManagementAs(user string, groups ...string) (client.Client, error)
	// HubLogs returns the logs of every hub replica (deploy/kustomize/hub-clusterprofiles on management).
	HubLogs() (string, error)
}

// Regions deployed at the start of every e2e run.
var Regions = []string{"us-east-1", "eu-west-1", "ap-southeast-1"}

// RepoDeployDir is the repository's deploy/ directory.
func RepoDeployDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Join(wd, "..", "deploy"), nil
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

// The hub's identity on management (deploy/kustomize/hub) and the ConfigMap its configuration
// is generated into.
const (
	hubServiceAccount = "regionsync-hub"
	hubConfigMap      = "regionsync-hub-config"
)

// HubLivenessGrace is the liveness grace of the hub the e2e runs (the overlay ships 20s): a
// region whose agents stop (and release their shard Lease, which then lasts 1s) is judged
// silent within seconds, so the scenario waits on the hub, not on a sleep.
const HubLivenessGrace = 2 * time.Second

// RenderHub renders the hub as the e2e deploys it, publishing ClusterProfiles: the ClusterProfile
// CRD (deploy/crds/clusterinventory) and deploy/kustomize/hub-clusterprofiles (deploy/kustomize/hub
// with the clusterprofiles component), and returns their objects with the configuration in the
// hub's ConfigMap changed for the e2e (HubLivenessGrace), and that configuration.
func RenderHub(deployDir string) ([]*unstructured.Unstructured, *hub.Config, error) {
	crds, err := deploy.Render(filepath.Join(deployDir, "crds", "clusterinventory"))
	if err != nil {
		return nil, nil, err
	}
	objs, err := deploy.Render(filepath.Join(deployDir, "kustomize", "hub-clusterprofiles"))
	if err != nil {
		return nil, nil, err
	}
	objs = append(crds, objs...)
	for _, o := range objs {
		// The generator appends a content hash to the name.
		if o.GetKind() != "ConfigMap" || !strings.HasPrefix(o.GetName(), hubConfigMap) {
			continue
		}
		data, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
		cfg, err := hub.ParseConfig([]byte(data))
		if err != nil {
			return nil, nil, fmt.Errorf("ConfigMap %s: %w", o.GetName(), err)
		}
		cfg.Liveness.Grace = metav1.Duration{Duration: HubLivenessGrace}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			return nil, nil, err
		}
		if err := unstructured.SetNestedField(o.Object, string(out), "data", "config.yaml"); err != nil {
			return nil, nil, err
		}
		return objs, cfg, nil
	}
	return nil, nil, fmt.Errorf("no ConfigMap %s in deploy/kustomize/hub-clusterprofiles", hubConfigMap)
}
