//go:build integration

package regionsync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// Decommissioning a region: after Decommission (with DeleteCopies) its objects on management
// delete cleanly, also one that left the shard; its copies are gone (the namespace the agent
// created for one of them included); another region's object keeps the shared finalizer; the
// shard Lease is gone. DryRun changes nothing; a live holder of the shard Lease refuses without
// Force; a second run finds nothing left to do.
func TestDecommissionReleasesRegionFinalizers(t *testing.T) {
	bg := context.Background()
	const (
		regionName = "dc-north"
		finalizer  = "regionsync.dev/sync-local"
		mark       = "regionsync.dev/sync-region"
		regionKey  = "demo.regionsync.dev/region"
	)
	opts := regionsync.Options{
		Region:     regionName,
		Management: regionsync.Management{Config: managementConfig},
		Shard:      regionsync.Shard{RemoteResourceSuffix: "-dcn", NamespacePrefix: "decom-", LabelSelector: regionKey + "=" + regionName},
		Resources:  []regionsync.Resource{{Object: &demov1alpha1.Tenant{}}},
		Claim:      regionsync.Claim{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond},
	}
	labelled := func(tn *demov1alpha1.Tenant, region string) *demov1alpha1.Tenant {
		tn.Labels = map[string]string{regionKey: region}
		return tn
	}
	createNamespace(t, management.Client, "decom-a", nil)
	createNamespace(t, management.Client, "decom-b", nil)
	createNamespace(t, region.Client, "decom-b", nil)          // not the agent's: never deleted
	a := labelled(tenant("decom-a", "a-dcn", "A"), regionName) // its local namespace is created for it
	b := labelled(tenant("decom-b", "b-dcn", "B"), regionName)
	c := labelled(tenant("decom-b", "c-dcn", "C"), regionName) // relabelled out of the shard below
	d := labelled(tenant("decom-b", "d-dcn", "D"), regionName) // relabelled into dc-south's shard below
	other := labelled(tenant("decom-b", "o-other", "other region"), "other")
	other.Finalizers = []string{finalizer} // another region's claim, same finalizer key
	for _, o := range []*demov1alpha1.Tenant{a, b, c, d, other} {
		if err := management.Client.Create(bg, o); err != nil {
			t.Fatal(err)
		}
	}

	// A running syncer of the region claims and copies a, b and c.
	mgr, err := ctrl.NewManager(region.Config, ctrl.Options{Scheme: hostScheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := regionsync.New(mgr, opts); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(bg)
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(runCtx) }()
	defer func() {
		stop()
		if err := <-stopped; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	remoteOf := func(o *demov1alpha1.Tenant) *demov1alpha1.Tenant {
		got := &demov1alpha1.Tenant{}
		if err := management.Client.Get(bg, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatalf("management %s: %v", client.ObjectKeyFromObject(o), err)
		}
		return got
	}
	localKeys := map[string]client.ObjectKey{"a": {Namespace: "decom-a", Name: "a"}, "b": {Namespace: "decom-b", Name: "b"}, "c": {Namespace: "decom-b", Name: "c"}, "d": {Namespace: "decom-b", Name: "d"}}
	copyExists := func(name string) (bool, error) {
		got := &demov1alpha1.Tenant{}
		err := region.Client.Get(bg, localKeys[name], got)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && got.Labels[mark] == regionName, err
	}
	eventually(t, 60*time.Second, "a, b, c and d claimed and copied", func() (bool, error) {
		for _, o := range []*demov1alpha1.Tenant{a, b, c, d} {
			if !controllerutil.ContainsFinalizer(remoteOf(o), finalizer) {
				return false, nil
			}
		}
		for name := range localKeys {
			if ok, err := copyExists(name); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	// c leaves the shard (relabelled): its copy is kept and reported, its finalizer stays. d
	// moves into the shard another region recorded on its Lease (dc-south, same finalizer key).
	south := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: fleetspec.DefaultManagementNamespace, Name: "region-dc-south",
		Labels:      map[string]string{"regionsync.dev/shard-lease": "true"},
		Annotations: map[string]string{"regionsync.dev/shard": `{"region":"dc-south","labelSelector":"` + regionKey + `=dc-south","kinds":["Tenant.demo.regionsync.dev"]}`},
	}}
	if err := management.Client.Create(bg, south); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = management.Client.Delete(bg, south) }()
	for o, to := range map[*demov1alpha1.Tenant]string{c: "elsewhere", d: "dc-south"} {
		relabel := remoteOf(o)
		relabel.Labels[regionKey] = to
		if err := management.Client.Update(bg, relabel); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "OutOfShard reported on c's and d's copies", func() (bool, error) {
		okC, err := hasEvent(bg, region.Client, "decom-b", "c", "OutOfShard")
		if err != nil {
			return false, err
		}
		okD, err := hasEvent(bg, region.Client, "decom-b", "d", "OutOfShard")
		return okC && okD, err
	})
	for _, name := range []string{"c", "d"} {
		if ok, err := copyExists(name); !ok || err != nil {
			t.Fatalf("%s's copy after leaving the shard: exists %v, %v; want kept", name, ok, err)
		}
	}
	// While the region runs, only the objects that left its shard can be released, and the
	// Lease is kept (a dry run here: nothing written).
	oos, err := regionsync.Decommission(bg, opts, region.Client, regionsync.DecommissionOptions{OutOfShardOnly: true, DeleteCopies: true, DryRun: true})
	if err != nil {
		t.Fatalf("out-of-shard dry run with the agent running: %v", err)
	}
	if got := releasedNames(oos); !slices.Equal(got, []string{"decom-b/c-dcn"}) || oos.LeaseDeleted || oos.CopiesDeleted != 1 {
		t.Errorf("out-of-shard dry run: would release %v, delete the Lease %v, delete %d copies; want c only, no, 1", got, oos.LeaseDeleted, oos.CopiesDeleted)
	}

	// The agent is stopped (gracefully: it releases the shard Lease).
	stop()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	stopped <- nil // for the deferred receive
	leaseKey := client.ObjectKey{Namespace: fleetspec.DefaultManagementNamespace, Name: "region-" + regionName}
	lease := &coordinationv1.Lease{}
	if err := management.Client.Get(bg, leaseKey, lease); err != nil {
		t.Fatalf("shard Lease: %v", err)
	}

	changed := func() error {
		for _, o := range []*demov1alpha1.Tenant{a, b, c, d, other} {
			if !controllerutil.ContainsFinalizer(remoteOf(o), finalizer) {
				return fmt.Errorf("%s lost its finalizer", o.Name)
			}
		}
		for name := range localKeys {
			if ok, err := copyExists(name); !ok || err != nil {
				return fmt.Errorf("copy %s gone (%v)", name, err)
			}
		}
		if err := management.Client.Get(bg, leaseKey, &coordinationv1.Lease{}); err != nil {
			return fmt.Errorf("shard Lease: %w", err)
		}
		return nil
	}
	unchanged := func(when string) {
		t.Helper()
		if err := changed(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}

	// Dry run: the full plan, nothing written.
	dry, err := regionsync.Decommission(bg, opts, region.Client, regionsync.DecommissionOptions{DeleteCopies: true, DryRun: true})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if got := releasedNames(dry); !slices.Equal(got, []string{"decom-a/a-dcn", "decom-b/b-dcn", "decom-b/c-dcn"}) {
		t.Errorf("dry run would release %v, want a, b and c", got)
	}
	if !dry.LeaseDeleted || dry.CopiesDeleted != 2 || dry.NamespacesDeleted != 1 || len(dry.Skipped) != 1 || dry.Skipped[0].Remote.Name != "d-dcn" ||
		!strings.Contains(dry.Skipped[0].Reason, "dc-south") {
		t.Errorf("dry run report: lease %v, copies %d, namespaces %d, skipped %v; want true, 2, 1, d (in dc-south's shard)",
			dry.LeaseDeleted, dry.CopiesDeleted, dry.NamespacesDeleted, dry.Skipped)
	}
	for _, r := range dry.Released {
		if r.OutOfShard != (r.Remote.Name == "c-dcn") {
			t.Errorf("%s: OutOfShard %v", r.Remote, r.OutOfShard)
		}
	}
	testenv.Consistently(t, "nothing changed after the dry run", time.Second, changed)

	// A live replica holds the shard Lease: refused without Force.
	lease = &coordinationv1.Lease{}
	if err := management.Client.Get(bg, leaseKey, lease); err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = ptr.To(regionName + "/another-replica")
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](300)
	if err := management.Client.Update(bg, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := regionsync.Decommission(bg, opts, region.Client, regionsync.DecommissionOptions{DeleteCopies: true}); !errors.Is(err, regionsync.ErrShardHeld) {
		t.Fatalf("with a live holder: %v, want ErrShardHeld", err)
	}
	unchanged("after the refusal")

	// Forced: copies deleted, finalizers released, Lease deleted.
	report, err := regionsync.Decommission(bg, opts, region.Client, regionsync.DecommissionOptions{DeleteCopies: true, Force: true, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("decommission: %v (report %+v)", err, report)
	}
	if got := releasedNames(report); !slices.Equal(got, []string{"decom-a/a-dcn", "decom-b/b-dcn", "decom-b/c-dcn"}) {
		t.Errorf("released %v, want a, b and c", got)
	}
	if !report.LeaseDeleted || report.LeaseHolder != regionName+"/another-replica" {
		t.Errorf("report: lease deleted %v, holder %q", report.LeaseDeleted, report.LeaseHolder)
	}
	for _, name := range []string{"a", "b", "c"} {
		if ok, err := copyExists(name); ok || err != nil {
			t.Errorf("copy %s still there after Decommission (%v)", name, err)
		}
	}
	if ok, err := copyExists("d"); !ok || err != nil {
		t.Errorf("copy d (its object in dc-south's shard) deleted (%v)", err)
	}
	ns := &corev1.Namespace{}
	if err := region.Client.Get(bg, client.ObjectKey{Name: "decom-a"}, ns); err == nil && ns.DeletionTimestamp.IsZero() {
		t.Errorf("local namespace decom-a, created for a, not deleted")
	}
	if err := region.Client.Get(bg, client.ObjectKey{Name: "decom-b"}, ns); err != nil || !ns.DeletionTimestamp.IsZero() {
		t.Errorf("local namespace decom-b (not the agent's) deleted: %v", err)
	}
	if err := management.Client.Get(bg, leaseKey, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
		t.Errorf("shard Lease after Decommission: %v, want not found", err)
	}
	for _, o := range []*demov1alpha1.Tenant{other, d} {
		if got := remoteOf(o); !slices.Equal(got.Finalizers, []string{finalizer}) {
			t.Errorf("%s, another region's object: finalizers %v, want its claim kept", o.Name, got.Finalizers)
		}
	}

	// The region's objects now delete cleanly on management; the other region's object waits
	// for its region.
	for _, o := range []*demov1alpha1.Tenant{a, b, c, other} {
		if err := management.Client.Delete(bg, remoteOf(o)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "a, b and c deleted on management", func() (bool, error) {
		for _, o := range []*demov1alpha1.Tenant{a, b, c} {
			err := management.Client.Get(bg, client.ObjectKeyFromObject(o), &demov1alpha1.Tenant{})
			if !apierrors.IsNotFound(err) {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	})
	if got := remoteOf(other); got.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(got, finalizer) {
		t.Errorf("other region's object: deletion %v, finalizers %v; want Terminating on its claim", got.DeletionTimestamp, got.Finalizers)
	}

	// Idempotent: nothing left to do.
	again, err := regionsync.Decommission(bg, opts, region.Client, regionsync.DecommissionOptions{DeleteCopies: true})
	if err != nil || len(again.Released) != 0 || again.LeaseDeleted || again.CopiesDeleted+again.NamespacesDeleted != 0 {
		t.Errorf("second run: %v, report %+v; want nothing done", err, again)
	}

	for _, o := range []*demov1alpha1.Tenant{other, d} { // clean up the other regions' claims
		got := remoteOf(o)
		got.Finalizers = nil
		if err := management.Client.Update(bg, got); err != nil {
			t.Error(err)
		}
	}
}

func releasedNames(r regionsync.DecommissionReport) []string {
	out := make([]string, 0, len(r.Released))
	for _, o := range r.Released {
		out = append(out, o.Remote.String())
	}
	slices.Sort(out)
	return out
}
