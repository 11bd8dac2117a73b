//go:build integration

package hub_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/clusterinventory"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestHubClusterProfiles runs the hub with ClusterProfiles on, as its ServiceAccount with the RBAC
// deploy/kustomize/hub-clusterprofiles ships, against a management API server with the
// repository's ClusterProfile CRD: one ClusterProfile per Region, following the Region's liveness
// (the agent's report, the hub's own HeartbeatMissed), with the regional Kubernetes version; a
// heartbeat alone does not rewrite it; one of another cluster manager is left alone; a Region's
// deletion deletes its ClusterProfile.
func TestHubClusterProfiles(t *testing.T) {
	bg := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := testenv.Start([]string{"management"}, testenv.Options{Dir: t.TempDir(), Log: t.Logf, NoControllerManager: true,
		CRDDirectoryPaths: []string{filepath.Join(root, "deploy", "crds"), filepath.Join(root, "deploy", "crds", "demo"), filepath.Join(root, "deploy", "crds", "clusterinventory")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("stopping clusters: %v", err)
		}
	})
	mgmt := f.Cluster("management")
	c := mgmt.Client
	const profileNS = "regionsync-system"
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: profileNS}})
	if err := clusterinventory.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	// Another cluster manager's ClusterProfile holds the name of a region.
	foreign := &clusterinventory.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: profileNS, Name: "r-foreign"},
		Spec:       clusterinventory.ClusterProfileSpec{DisplayName: "theirs", ClusterManager: clusterinventory.ClusterManager{Name: "ocm"}},
	}
	create(t, c, foreign, region("r-live", nil, tenantShard("-live", "r-live")), region("r-foreign", nil, nil))

	objs, err := deploy.Render("../../deploy/kustomize/hub-clusterprofiles")
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := c.Create(bg, obj); err != nil {
				t.Fatalf("applying the hub's %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	cfg, err := mgmt.ServiceAccountTokenConfig(bg, "regionsync-system", "regionsync-hub")
	if err != nil {
		t.Fatal(err)
	}
	o := hub.Options{LivenessGrace: time.Second}
	log := testenv.NewTestLog(t)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testenv.Scheme(), Logger: log.Logger("hub"), Cache: hub.CacheOptions(o),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	if err := hub.SetupClusterProfiles(mgr, hub.ClusterProfilesConfig{Namespace: profileNS}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hub manager: %v", err)
		}
	})

	profile := func(name string) (*clusterinventory.ClusterProfile, error) {
		p := &clusterinventory.ClusterProfile{}
		return p, c.Get(bg, types.NamespacedName{Namespace: profileNS, Name: name}, p)
	}
	healthy := func(name string, status metav1.ConditionStatus, reason string) *clusterinventory.ClusterProfile {
		t.Helper()
		var p *clusterinventory.ClusterProfile
		testenv.Eventually(t, fmt.Sprintf("ClusterProfile %s ControlPlaneHealthy=%s (%s)", name, status, reason), 20*time.Second, func() error {
			var err error
			if p, err = profile(name); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(p.Status.Conditions, clusterinventory.ConditionControlPlaneHealthy)
			if cond == nil || cond.Status != status || cond.Reason != reason {
				return fmt.Errorf("ControlPlaneHealthy %+v", cond)
			}
			return nil
		})
		return p
	}

	p := healthy("r-live", metav1.ConditionUnknown, clusterinventory.ReasonNoReport)
	if p.Spec.ClusterManager.Name != "regionsync" || p.Labels[clusterinventory.LabelClusterManagerKey] != "regionsync" || p.Spec.DisplayName != "r-live" {
		t.Errorf("ClusterProfile r-live: %+v %+v", p.ObjectMeta, p.Spec)
	}

	// The agent claims and reports: the ClusterProfile follows, with the Kubernetes version.
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "regionsync-system", Name: "region-r-live", Labels: map[string]string{"regionsync.dev/shard-lease": "true"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("r-live/agent"), LeaseDurationSeconds: ptr.To[int32](2), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	create(t, c, lease)
	report := func(mutate func(*regionsyncv1alpha1.Region)) {
		t.Helper()
		r := &regionsyncv1alpha1.Region{}
		if err := c.Get(bg, types.NamespacedName{Name: "r-live"}, r); err != nil {
			t.Fatal(err)
		}
		mutate(r)
		if err := c.Status().Update(bg, r); err != nil {
			t.Fatal(err)
		}
	}
	report(func(r *regionsyncv1alpha1.Region) {
		meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: regionsyncv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonReady, Message: "in sync"})
		r.Status.AgentVersion, r.Status.KubernetesVersion, r.Status.ClusterID = "v0.5.0", "v1.36.3", "kube-system-uid"
		r.Status.HeartbeatTime = ptr.To(metav1.Now())
	})
	p = healthy("r-live", metav1.ConditionTrue, clusterinventory.ReasonAgentReporting)
	props := map[string]string{}
	for _, prop := range p.Status.Properties {
		props[prop.Name] = prop.Value
	}
	if p.Status.Version.Kubernetes != "v1.36.3" || props[clusterinventory.PropertyAgentVersion] != "v0.5.0" || props[clusterinventory.PropertyClusterID] != "kube-system-uid" {
		t.Errorf("ClusterProfile r-live: version %+v, properties %v", p.Status.Version, props)
	}

	// A heartbeat alone does not rewrite it.
	rv := p.ResourceVersion
	report(func(r *regionsyncv1alpha1.Region) {
		r.Status.HeartbeatTime = ptr.To(metav1.NewTime(time.Now().Add(time.Second)))
	})
	testenv.Consistently(t, "a heartbeat alone does not rewrite the ClusterProfile", 2*time.Second, func() error {
		p, err := profile("r-live")
		if err == nil && p.ResourceVersion != rv {
			err = fmt.Errorf("rewritten: resourceVersion %s, was %s", p.ResourceVersion, rv)
		}
		return err
	})

	// Someone removes its cluster-manager label: the hub puts it back.
	p, err = profile("r-live")
	if err != nil {
		t.Fatal(err)
	}
	delete(p.Labels, clusterinventory.LabelClusterManagerKey)
	if err := c.Update(bg, p); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the cluster-manager label restored", 20*time.Second, func() error {
		p, err := profile("r-live")
		if err == nil && p.Labels[clusterinventory.LabelClusterManagerKey] != clusterinventory.ClusterManagerName {
			err = fmt.Errorf("labels %v", p.Labels)
		}
		return err
	})

	// The Lease is no longer renewed: the hub marks the Region HeartbeatMissed, the
	// ClusterProfile follows.
	healthy("r-live", metav1.ConditionUnknown, regionsyncv1alpha1.ReasonHeartbeatMissed)

	// Another cluster manager's ClusterProfile is left as it is.
	got, err := profile("r-foreign")
	if err != nil || got.Spec.ClusterManager.Name != "ocm" || got.Spec.DisplayName != "theirs" || len(got.Status.Conditions) != 0 {
		t.Errorf("another cluster manager's ClusterProfile touched: %v %+v %+v", err, got.Spec, got.Status)
	}

	// The Region is deleted: so is its ClusterProfile; the foreign one stays.
	if err := c.Delete(bg, region("r-live", nil, nil)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "ClusterProfile r-live deleted with its Region", 20*time.Second, func() error {
		_, err := profile("r-live")
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(err, errors.New("still there"))
	})
	if _, err := profile("r-foreign"); err != nil {
		t.Errorf("another cluster manager's ClusterProfile: %v", err)
	}
}
