package deploy

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/regionsync/regionsync/internal/hub"
)

// hubConfigs returns the data of every hub ConfigMap of a rendering, and which the Deployment
// mounts.
func hubConfigs(t *testing.T, dir string) (map[string]string, string) {
	t.Helper()
	objs, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]string{}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "regionsync-hub-config") {
			configs[o.GetName()] = nested(o, "data", "config.yaml").(string)
		}
	}
	mounted := ""
	for _, v := range nested(Find(objs, "Deployment", "regionsync-hub"), "spec", "template", "spec", "volumes").([]any) {
		if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
			mounted, _ = cm["name"].(string)
		}
	}
	return configs, mounted
}

// The ClusterProfiles overlay is the hub base with ClusterProfiles on: its configuration is the
// base's plus clusterProfiles (the component's copy kept in step), mounted by the Deployment, and
// its only added rights are the ClusterProfiles of that one namespace. The base publishes none.
func TestHubClusterProfilesOverlay(t *testing.T) {
	base, _ := hubConfigs(t, "../../../deploy/kustomize/hub")
	configs, mounted := hubConfigs(t, "../../../deploy/kustomize/hub-clusterprofiles")
	if len(configs) != 1 || configs[mounted] == "" {
		t.Fatalf("hub ConfigMaps %v, the Deployment mounts %q", slices.Collect(maps.Keys(configs)), mounted)
	}
	cfg, err := hub.ParseConfig([]byte(configs[mounted]))
	if err != nil {
		t.Fatalf("the overlay's hub configuration: %v", err)
	}
	if cfg.ClusterProfiles.Namespace != "regionsync-system" {
		t.Errorf("clusterProfiles.namespace %q, want regionsync-system", cfg.ClusterProfiles.Namespace)
	}
	for _, data := range base {
		baseCfg, err := hub.ParseConfig([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		if baseCfg.ClusterProfiles.Namespace != "" {
			t.Errorf("the hub base publishes ClusterProfiles (clusterProfiles.namespace %q): it must be opt-in", baseCfg.ClusterProfiles.Namespace)
		}
		// The component's copy is the base's configuration (its comment header aside) plus the
		// clusterProfiles section at its end.
		body := func(s string) string {
			lines := strings.Split(s, "\n")
			for len(lines) > 0 && strings.HasPrefix(lines[0], "#") {
				lines = lines[1:]
			}
			return strings.Join(lines, "\n")
		}
		overlay := body(configs[mounted])
		cut := strings.Index(overlay, "# One ClusterProfile per Region")
		if cut < 0 || overlay[:cut] != body(data) {
			t.Errorf("deploy/kustomize/components/clusterprofiles/config.yaml is not deploy/kustomize/hub/config.yaml plus clusterProfiles: update it\n--- base\n%s\n--- component\n%s", body(data), overlay)
		}
	}
	objs, err := Render("../../../deploy/kustomize/hub-clusterprofiles")
	if err != nil {
		t.Fatal(err)
	}
	role := Find(objs, "Role", "regionsync-hub-clusterprofiles")
	if role == nil || role.GetNamespace() != "regionsync-system" || Find(objs, "RoleBinding", "regionsync-hub-clusterprofiles") == nil {
		t.Fatal("no Role and RoleBinding regionsync-hub-clusterprofiles in regionsync-system")
	}
	for _, r := range nested(role, "rules").([]any) {
		rule := r.(map[string]any)
		if !slices.Equal(rule["apiGroups"].([]any), []any{"multicluster.x-k8s.io"}) {
			t.Errorf("the ClusterProfiles Role grants %v", rule)
		}
		for _, res := range rule["resources"].([]any) {
			if res != "clusterprofiles" && res != "clusterprofiles/status" {
				t.Errorf("the ClusterProfiles Role grants %v", rule)
			}
		}
	}
	// The CRD the overlay expects is the repository's.
	if _, err := os.Stat("../../../deploy/crds/clusterinventory/multicluster.x-k8s.io_clusterprofiles.yaml"); err != nil {
		t.Error(err)
	}
}
