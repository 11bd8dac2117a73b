//go:build integration

package regionsync_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// A host whose management cluster does not serve the Region kind (a sync-controller user who
// installed only its own CRDs): one warning that says how to install or turn off the Region
// status, then silence; syncing is not affected; the gauge says the status is not published (the
// gauge's transitions are TestReporterOutcome's). With DisableRegionStatus nothing is said at all.
func TestRegionKindMissing(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := testenv.Start([]string{"bare-management"}, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(root, "deploy", "crds", "demo")}, // Tenants, no Region
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Stop() })
	bare := fleet.Cluster("bare-management")
	bg := context.Background()
	if err := bare.Client.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultManagementNamespace}}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, suffix string
		disable      bool
		warnings     int
	}{
		{name: "nokind-a", suffix: "-nka", warnings: 1},
		{name: "nokind-b", suffix: "-nkb", disable: true, warnings: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := testenv.NewTestLog(t)
			mgr, err := ctrl.NewManager(region.Config, ctrl.Options{Scheme: hostScheme, Metrics: metricsserver.Options{BindAddress: "0"}, Logger: log.Logger("host")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := regionsync.New(mgr, regionsync.Options{
				Region:              tc.name,
				Management:          regionsync.Management{Config: bare.Config},
				Shard:               regionsync.Shard{RemoteResourceSuffix: tc.suffix},
				Resources:           []regionsync.Resource{{Object: &demov1alpha1.Tenant{}}},
				HeartbeatInterval:   2 * time.Second, // many chances to repeat itself
				DisableRegionStatus: tc.disable,
			}); err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(bg)
			t.Cleanup(stop)
			go func() { _ = mgr.Start(ctx) }()

			ns := "nokind-" + tc.name
			createNamespace(t, bare.Client, ns, nil)
			if err := bare.Client.Create(bg, tenant(ns, "acme"+tc.suffix, "Acme")); err != nil {
				t.Fatal(err)
			}
			eventually(t, 60*time.Second, "the tenant synced although the Region kind is missing", func() (bool, error) {
				local := &demov1alpha1.Tenant{}
				err := region.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: "acme"}, local)
				return err == nil && local.Spec.DisplayName == "Acme", client.IgnoreNotFound(err)
			})
			time.Sleep(8 * time.Second) // four heartbeat intervals, sixteen reporter ticks
			if n := log.Count("the Region kind (regions.regionsync.dev) is not installed"); n != tc.warnings {
				t.Errorf("%d warnings about the missing Region kind, want %d", n, tc.warnings)
			}
			if tc.warnings > 0 && log.Count("DisableRegionStatus", "deploy/crds") != tc.warnings {
				t.Errorf("the warning does not say how to install the kind or turn the status off")
			}
			if lines := log.ErrorLines(); len(lines) > 0 {
				t.Errorf("%d error lines, want none; the first: %s", len(lines), lines[0])
			}
		})
	}
}
