//go:build integration

package hub_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestHubEventsAsServiceAccount runs the hub binary as deployed: its ServiceAccount's own token,
// the RBAC and the configuration deploy/kustomize/hub ships, leader election on. Every Event it
// writes is accepted: leader election's core Event on its Lease in regionsync-system, and its own
// Events on a Distribution (events.k8s.io); its log holds no refused Event.
func TestHubEventsAsServiceAccount(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	installHubRBAC(t, mgmt)
	dir := t.TempDir()
	bin, err := testenv.BuildHub(dir)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := mgmt.ServiceAccountTokenConfig(bg, "regionsync-system", "regionsync-hub")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, "management", rc); err != nil {
		t.Fatal(err)
	}
	shipped, err := hub.LoadConfig("../../deploy/kustomize/hub/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shipped.Telemetry.MetricsAddr, shipped.Telemetry.HealthAddr = "127.0.0.1:0", "127.0.0.1:0"
	data, err := yaml.Marshal(shipped)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "hub.yaml")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	p, err := testenv.StartReplica(testenv.Replica{Binary: bin, Name: "hub-0", Config: cfgPath, Kubeconfig: kubeconfig, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(syscall.SIGTERM, 20*time.Second)
		if t.Failed() {
			t.Logf("hub log:\n%s", testenv.Tail(out.String(), 60))
		}
	})

	// A Distribution whose template is a Secret (refused without allowSecrets): the hub posts an
	// InvalidSpec Event on it.
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	tenantWriter(t, c, ns, "placer", writeTenants)
	create(t, c, &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			ServiceAccountName: "placer",
			Template:           runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Secret","stringData":{"k":"v"}}`)},
			Placement:          regionsyncv1alpha1.Placement{Regions: []string{"r-a"}},
		},
	})
	testenv.Eventually(t, "leader election's core Event in regionsync-system", 60*time.Second, func() error {
		var evs corev1.EventList
		if err := c.List(bg, &evs, client.InNamespace("regionsync-system")); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "LeaderElection" && e.InvolvedObject.Name == "regionsync-hub" {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(evs.Items))
	})
	testenv.Eventually(t, "the hub's InvalidSpec Event on the Distribution", 30*time.Second, func() error {
		var evs eventsv1.EventList
		if err := c.List(bg, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "secret" && e.Reason == hub.EventInvalidSpec {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(evs.Items))
	})
	// The event broadcasters log what the API server refused ("... is forbidden ...").
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "forbidden") && strings.Contains(strings.ToLower(line), "event") {
			t.Errorf("a refused Event: %s", line)
		}
	}
}

// lockedBuffer is a process's output, read while it is written.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
