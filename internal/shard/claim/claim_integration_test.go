//go:build integration

package claim

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

const leaseNamespace = "regionsync-system"

// leaseLists counts the lists of shard Leases made through a client.
type leaseLists struct{ n atomic.Int64 }

func (c *leaseLists) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if isLeaseList(r) {
				c.n.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// isLeaseList reports whether r lists the shard Leases.
func isLeaseList(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/namespaces/"+leaseNamespace+"/leases")
}

// startManagement starts a management API server with the shard Leases' namespace and returns it
// with an admin clientset.
func startManagement(t *testing.T) (*testenv.Cluster, kubernetes.Interface) {
	t.Helper()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	admin := kubernetes.NewForConfigOrDie(mgmt.Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNamespace}}
	if _, err := admin.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return mgmt, admin
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tenants is the shard of region over Tenants named *suffix.
func tenants(region, suffix string) shard.Definition {
	return shard.Definition{Region: region, RemoteResourceSuffix: suffix, Kinds: []string{"Tenant.demo.regionsync.dev"}}
}

// running is one Claimer running until stop.
type running struct {
	c     *Claimer
	lists *leaseLists
	stop  func()
}

func startClaimer(t *testing.T, cfg *rest.Config, def shard.Definition, fleet string) *running {
	t.Helper()
	lists := &leaseLists{}
	cs, err := kubernetes.NewForConfig(lists.wrap(cfg))
	if err != nil {
		t.Fatal(err)
	}
	c := &Claimer{
		Client: cs, Namespace: leaseNamespace, Def: def, Identity: fleet, Holder: fleet + "-0",
		LeaseDuration: 20 * time.Second, RenewDeadline: 15 * time.Second, RetryPeriod: time.Second,
		Log: logr.Discard(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Start(ctx) })
	r := &running{c: c, lists: lists}
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(r.stop)
	return r
}

func syncing(r *running) func() error {
	return func() error {
		if s := r.c.State(); !s.Syncing {
			return fmt.Errorf("not syncing: %s: %s", s.Reason, s.Message)
		}
		return nil
	}
}

func refusedFor(r *running, other string) func() error {
	return func() error {
		s := r.c.State()
		if s.Syncing || s.Reason != regionsyncv1alpha1.ReasonShardOverlap || !strings.Contains(s.Message, "region "+other+" ") {
			return fmt.Errorf("want refused for the shard of %s; state %+v", other, s)
		}
		return nil
	}
}

// TestClaimOverlapAcrossRestarts: a fresh shard lists the shard Leases twice before it syncs (once
// more after marking itself Syncing, for an overlapping shard started at the same moment); a
// shard restarting over its own Syncing record lists them once, and still refuses where an older
// overlapping shard syncs; a younger overlapping shard stays refused while it runs.
func TestClaimOverlapAcrossRestarts(t *testing.T) {
	mgmt, admin := startManagement(t)
	bg := context.Background()

	a := startClaimer(t, mgmt.Config, tenants("a", "-x"), "fleet-a")
	testenv.Eventually(t, "a fresh shard syncs", 30*time.Second, syncing(a))
	if n := a.lists.n.Load(); n != 2 {
		t.Errorf("a fresh shard listed the shard Leases %d times before syncing, want 2", n)
	}
	a.stop()

	// The stopped shard stays reserved: a younger overlapping shard refuses, naming it.
	b := startClaimer(t, mgmt.Config, tenants("b", "-x"), "fleet-b")
	testenv.Eventually(t, "the younger overlapping shard refuses", 30*time.Second, refusedFor(b, "a"))

	a = startClaimer(t, mgmt.Config, tenants("a", "-x"), "fleet-a")
	testenv.Eventually(t, "the shard syncs again after its restart", 30*time.Second, syncing(a))
	if n := a.lists.n.Load(); n != 1 {
		t.Errorf("a shard restarting over its own Syncing record listed the shard Leases %d times before syncing, want 1", n)
	}
	testenv.Consistently(t, "the younger overlapping shard stays refused", 3*time.Second, refusedFor(b, "a"))
	a.stop()

	// An older overlapping shard, held and Syncing, registered long before: the restart over
	// a's own Syncing record still refuses.
	older := olderSyncing("c", "-x")
	if _, err := admin.CoordinationV1().Leases(leaseNamespace).Create(bg, older, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a = startClaimer(t, mgmt.Config, tenants("a", "-x"), "fleet-a")
	testenv.Eventually(t, "the restart refuses for the older overlapping shard", 30*time.Second, refusedFor(a, "c"))
	testenv.Consistently(t, "the restarted shard stays refused", 3*time.Second, refusedFor(a, "c"))

	// The older shard gone, a (recorded Refused now) marks itself Syncing again and syncs.
	b.stop()
	if err := admin.CoordinationV1().Leases(leaseNamespace).Delete(bg, older.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the shard syncs once the older one is gone", 30*time.Second, syncing(a))
}

// TestClaimListsAgainAfterMarking: an older overlapping shard marked Syncing between a fresh
// shard's first list and its own mark (injected the moment that first list is answered) is seen
// by the list the fresh shard makes after marking itself: it refuses, naming the older shard.
func TestClaimListsAgainAfterMarking(t *testing.T) {
	mgmt, admin := startManagement(t)
	bg := context.Background()
	var injected atomic.Bool
	var injectErr atomic.Value
	cfg := rest.CopyConfig(mgmt.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && isLeaseList(r) && injected.CompareAndSwap(false, true) {
				if _, err := admin.CoordinationV1().Leases(leaseNamespace).Create(bg, olderSyncing("d", "-y"), metav1.CreateOptions{}); err != nil {
					injectErr.Store(err.Error())
				}
			}
			return resp, err
		})
	}
	e := startClaimer(t, cfg, tenants("e", "-y"), "fleet-e")
	testenv.Eventually(t, "the fresh shard refuses for the older shard marked after its first list", 30*time.Second, func() error {
		if v := injectErr.Load(); v != nil {
			t.Fatalf("creating the older shard's Lease: %s", v)
		}
		return refusedFor(e, "d")()
	})
	if !injected.Load() {
		t.Fatal("the older shard's Lease was never created")
	}
	if n := e.lists.n.Load(); n < 2 {
		t.Errorf("the fresh shard listed the shard Leases %d times, want at least 2", n)
	}
	testenv.Consistently(t, "the fresh shard stays refused", 3*time.Second, refusedFor(e, "d"))
}

// olderSyncing is the Lease of region's shard over Tenants named *suffix, held, Syncing and
// registered long ago, as its agent would have written it.
func olderSyncing(region, suffix string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: LeaseName(region), Labels: map[string]string{LeaseLabel: "true"},
			Annotations: map[string]string{
				DefinitionAnnotation: fmt.Sprintf(`{"region":%q,"remoteResourceSuffix":%q,"kinds":["Tenant.demo.regionsync.dev"]}`, region, suffix),
				StateAnnotation:      StateSyncing, HolderAnnotation: "fleet-" + region + "-0", RegisteredAnnotation: "2001-01-01T00:00:00Z",
			}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("fleet-" + region), LeaseDurationSeconds: ptr.To[int32](3600),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
}
