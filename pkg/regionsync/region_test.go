//go:build integration

package regionsync_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestRegionStatusConverges: the syncer watches its Region (Ready within 5 s of the Region's
// creation, no polling), keeps a condition another writer sets, and writes nothing more while
// nothing changes: the shard Lease's renewal is the heartbeat (renewed every second here), the
// Region status is written only on change (no HeartbeatInterval set, the default).
func TestRegionStatusConverges(t *testing.T) {
	bg := context.Background()
	const name = "rg-west"
	var mgmtLog requestLog
	mgr, err := ctrl.NewManager(region.Config, ctrl.Options{Scheme: hostScheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := regionsync.New(mgr, regionsync.Options{
		Region:     name,
		Management: regionsync.Management{Config: mgmtLog.wrap(management.Config)},
		Shard:      regionsync.Shard{RemoteResourceSuffix: "-rgw"},
		Resources:  []regionsync.Resource{{Object: &demov1alpha1.Tenant{}}},
		Claim:      regionsync.Claim{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second},
	}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(bg)
	t.Cleanup(stop)
	go func() { _ = mgr.Start(runCtx) }()
	eventually(t, 30*time.Second, "the claim is held and the Region is found missing", func() (bool, error) {
		return mgmtLog.notFoundCount(http.MethodGet, "/apis/regionsync.dev/v1alpha1/regions/"+name) > 0, nil
	})

	created := time.Now()
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := management.Client.Create(bg, r); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "Region Ready within 5 s of its creation", func() (bool, error) {
		if err := management.Client.Get(bg, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(r.Status.Conditions, regionsyncv1alpha1.ConditionReady), nil
	})
	t.Logf("Ready %.1fs after the Region was created", time.Since(created).Seconds())

	// Another writer adds its own condition.
	meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: "Audited", Status: metav1.ConditionTrue, Reason: "Checked", Message: "by the audit controller"})
	if err := management.Client.Status().Update(bg, r); err != nil {
		t.Fatal(err)
	}
	statusWrites := func(method, path, _ string) bool {
		return method == http.MethodPut && strings.HasSuffix(path, "/regions/"+name+"/status")
	}
	leaseRenewals := func(method, path, _ string) bool {
		return method == http.MethodPut && strings.HasSuffix(path, "/leases/region-"+name)
	}
	before, renewedBefore := mgmtLog.count(statusWrites), mgmtLog.count(leaseRenewals)
	testenv.Consistently(t, "no Region status write for 8 s after a foreign condition was added (nothing of the agent's changed)", 8*time.Second, func() error {
		if n := mgmtLog.count(statusWrites) - before; n != 0 {
			return fmt.Errorf("%d Region status writes", n)
		}
		return nil
	})
	// Meanwhile the heartbeat went on: the shard Lease was renewed about once a second.
	if n := mgmtLog.count(leaseRenewals) - renewedBefore; n < 4 {
		t.Errorf("the shard Lease was renewed %d times in 8 s, want at least 4 (every second)", n)
	}
	if err := management.Client.Get(bg, client.ObjectKeyFromObject(r), r); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(r.Status.Conditions, "Audited") {
		t.Errorf("the foreign condition was dropped: %+v", r.Status.Conditions)
	}
	if !meta.IsStatusConditionTrue(r.Status.Conditions, regionsyncv1alpha1.ConditionReady) {
		t.Errorf("Ready is no longer true: %+v", r.Status.Conditions)
	}
}

// TestRestartOverSyncedShardWritesNothing: a syncer restarted over a shard in sync re-verifies it
// without a write to its objects on either cluster, and without rewriting its Region status (it
// waits for its first pass, then finds the status on the Region already current); the claim's
// Lease is the only thing it writes on management.
func TestRestartOverSyncedShardWritesNothing(t *testing.T) {
	bg := context.Background()
	const name = "rg-restart"
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := management.Client.Create(bg, r); err != nil {
		t.Fatal(err)
	}
	ns := "restart-ns"
	createNamespace(t, management.Client, ns, nil)
	for i := range 3 {
		if err := management.Client.Create(bg, tenant(ns, fmt.Sprintf("t%d-rgr", i), "Restart")); err != nil {
			t.Fatal(err)
		}
	}
	start := func(mgmtLog, localLog *requestLog) (*regionsync.Syncer, func()) {
		t.Helper()
		mgr, err := ctrl.NewManager(localLog.wrap(region.Config), ctrl.Options{Scheme: hostScheme, Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := regionsync.New(mgr, regionsync.Options{
			Region:     name,
			Management: regionsync.Management{Config: mgmtLog.wrap(management.Config)},
			Shard:      regionsync.Shard{RemoteResourceSuffix: "-rgr"},
			Resources:  []regionsync.Resource{{Object: &demov1alpha1.Tenant{}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(bg)
		done := make(chan struct{})
		go func() { defer close(done); _ = mgr.Start(ctx) }()
		return s, func() { stop(); <-done }
	}
	synced := func(s *regionsync.Syncer) func() (bool, error) {
		return func() (bool, error) {
			n := 0
			for _, st := range s.Stats() {
				n += st.Counts["synced"]
			}
			return s.Claim().Syncing && n == 3, nil
		}
	}
	var firstMgmt, firstLocal requestLog
	first, stopFirst := start(&firstMgmt, &firstLocal)
	eventually(t, 60*time.Second, "the first syncer synced the shard", synced(first))
	eventually(t, 30*time.Second, "the Region is Ready and Synced", func() (bool, error) {
		if err := management.Client.Get(bg, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(r.Status.Conditions, regionsyncv1alpha1.ConditionReady) &&
			meta.IsStatusConditionTrue(r.Status.Conditions, regionsyncv1alpha1.ConditionSynced), nil
	})
	stopFirst()

	var mgmtLog, localLog requestLog
	second, stopSecond := start(&mgmtLog, &localLog)
	t.Cleanup(stopSecond)
	eventually(t, 60*time.Second, "the restarted syncer re-verified the shard", synced(second))
	writes := func(l *requestLog, what func(path string) bool) int {
		return l.count(func(method, path, _ string) bool {
			return method != http.MethodGet && what(path)
		})
	}
	tenants := func(path string) bool { return strings.Contains(path, "/tenants") }
	regionStatus := func(path string) bool { return strings.HasSuffix(path, "/regions/"+name+"/status") }
	leases := func(path string) bool { return strings.Contains(path, "/leases/") }
	testenv.Consistently(t, "no object or Region status write after the restart", 5*time.Second, func() error {
		if n := writes(&mgmtLog, tenants) + writes(&localLog, tenants); n != 0 {
			return fmt.Errorf("%d Tenant writes", n)
		}
		if n := writes(&mgmtLog, regionStatus); n != 0 {
			return fmt.Errorf("%d Region status writes", n)
		}
		return nil
	})
	if n := writes(&mgmtLog, leases); n == 0 {
		t.Error("the restarted syncer wrote no shard Lease: it cannot have claimed the shard")
	}
	if err := management.Client.Get(bg, client.ObjectKeyFromObject(r), r); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(r.Status.Conditions, regionsyncv1alpha1.ConditionReady) {
		t.Errorf("Ready is no longer true after the restart: %+v", r.Status.Conditions)
	}
}
