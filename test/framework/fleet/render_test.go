package fleet

import (
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/deploy"
)

// The hub overlay both launchers deploy: the ClusterProfile CRD and the shipped
// hub-clusterprofiles overlay, its configuration with the e2e's liveness grace and nothing else
// changed.
func TestRenderHub(t *testing.T) {
	deployDir, err := RepoDeployDir()
	if err != nil {
		t.Fatal(err)
	}
	objs, cfg, err := RenderHub(deployDir, ClusterProfilesHub)
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
