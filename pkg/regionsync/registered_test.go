//go:build integration

package regionsync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/regionsync"
)

// An agent whose shard differs from the one the operator registered on its Region (spec.shard,
// what the hub places by) does not claim: it says why, takes no Lease and syncs nothing; once
// the Region registers the agent's shard, it claims.
func TestShardRegistration(t *testing.T) {
	bg := context.Background()
	const name = "reg-south"
	wrong := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: regionsyncv1alpha1.RegionSpec{
		Shard: &regionsyncv1alpha1.RegionShard{RemoteResourceSuffix: "-south", Kinds: []string{"Tenant.demo.regionsync.dev"}},
	}}
	if err := management.Client.Create(bg, wrong); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(region.Config, ctrl.Options{Scheme: hostScheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := regionsync.New(mgr, regionsync.Options{
		Region:     name,
		Management: regionsync.Management{Config: management.Config},
		Shard:      regionsync.Shard{RemoteResourceSuffix: "-rgs"},
		Resources:  []regionsync.Resource{{Object: &demov1alpha1.Tenant{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(bg)
	t.Cleanup(stop)
	go func() { _ = mgr.Start(ctx) }()

	eventually(t, 30*time.Second, "the claim refused with ShardNotRegistered", func() (bool, error) {
		c := s.Claim()
		return c.Reason == regionsyncv1alpha1.ReasonShardNotRegistered && strings.Contains(c.Message, `shard.remoteResourceSuffix: configured "-rgs", registered "-south"`), nil
	})
	lease := client.ObjectKey{Namespace: fleetspec.DefaultManagementNamespace, Name: "region-" + name}
	time.Sleep(2 * time.Second)
	if err := management.Client.Get(bg, lease, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
		t.Fatalf("shard Lease while refused: %v", err)
	}

	// The operator registers the shard the agent runs (spec.shard is immutable: a new Region).
	if err := management.Client.Delete(bg, wrong); err != nil {
		t.Fatal(err)
	}
	right := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: regionsyncv1alpha1.RegionSpec{
		Shard: &regionsyncv1alpha1.RegionShard{RemoteResourceSuffix: "-rgs", Kinds: []string{"Tenant.demo.regionsync.dev"}},
	}}
	eventually(t, 30*time.Second, "the right Region created", func() (bool, error) {
		err := management.Client.Create(bg, right.DeepCopy())
		return err == nil, client.IgnoreAlreadyExists(err)
	})
	eventually(t, 30*time.Second, "the claim held once the shard is registered", func() (bool, error) {
		return s.Claim().Held, nil
	})
}
