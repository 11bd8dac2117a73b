//go:build integration

package regionsync_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestManagementConnectionsShared: a syncer that claimed its shard, synced its objects and
// published its Region keeps two connections to management open: its connectivity probe's, and
// the one its management cache, its writes, its events, the claim and the Region status share
// (each costs management a TLS handshake and the syncer an identity check when it is made). The
// identity checks' own short-lived connections dial on their own and are not counted here. Every
// request to management, the probe's and the identity checks' included, names the syncer and its
// region in its User-Agent.
func TestManagementConnectionsShared(t *testing.T) {
	bg := context.Background()
	const name = "rg-conns"
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := management.Client.Create(bg, r); err != nil {
		t.Fatal(err)
	}
	ns := "conns-ns"
	createNamespace(t, management.Client, ns, nil)
	for i := range 2 {
		if err := management.Client.Create(bg, tenant(ns, fmt.Sprintf("t%d-rgc", i), "Conns")); err != nil {
			t.Fatal(err)
		}
	}
	var open atomic.Int64
	cfg := rest.CopyConfig(management.Config)
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		open.Add(1)
		return &countedConn{Conn: c, open: &open}, nil
	}
	cfg.UserAgent = ""
	var agents sync.Map // method and path → the User-Agent of the last such request
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			agents.Store(req.Method+" "+req.URL.Path, req.Header.Get("User-Agent"))
			return rt.RoundTrip(req)
		})
	})
	mgr, err := ctrl.NewManager(region.Config, ctrl.Options{Scheme: hostScheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := regionsync.New(mgr, regionsync.Options{
		Region:     name,
		Version:    "v1.2.3",
		Management: regionsync.Management{Config: cfg},
		Shard:      regionsync.Shard{RemoteResourceSuffix: "-rgc"},
		Resources:  []regionsync.Resource{{Object: &demov1alpha1.Tenant{}}},
		Claim:      regionsync.Claim{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(bg)
	t.Cleanup(stop)
	go func() { _ = mgr.Start(runCtx) }()
	eventually(t, 60*time.Second, "the shard synced and the Region Ready and Synced", func() (bool, error) {
		n := 0
		for _, st := range s.Stats() {
			n += st.Counts["synced"]
		}
		if !s.Claim().Syncing || n != 2 {
			return false, nil
		}
		if err := management.Client.Get(bg, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(r.Status.Conditions, regionsyncv1alpha1.ConditionReady) &&
			meta.IsStatusConditionTrue(r.Status.Conditions, regionsyncv1alpha1.ConditionSynced), nil
	})
	// Requests racing on a new HTTP/2 transport may dial twice; the spare connection is closed.
	testenv.Eventually(t, "two connections to management open", 30*time.Second, func() error {
		if n := open.Load(); n != 2 {
			return fmt.Errorf("%d connections open, want 2 (the probe's and one shared by everything else)", n)
		}
		return nil
	})
	testenv.Consistently(t, "two connections to management open", 3*time.Second, func() error {
		if n := open.Load(); n != 2 {
			return fmt.Errorf("%d connections open, want 2 (the probe's and one shared by everything else)", n)
		}
		return nil
	})
	want := "regionsync/v1.2.3 (region " + name + ")"
	seen := map[string]bool{}
	agents.Range(func(k, v any) bool {
		seen[k.(string)] = true
		if v != want {
			t.Errorf("%s to management with User-Agent %q, want %q", k, v, want)
		}
		return true
	})
	for _, path := range []string{"/version", "/api/v1/namespaces"} { // the probe, the identity check
		if !seen["GET "+path] {
			t.Errorf("no GET %s to management seen (seen: %v)", path, seen)
		}
	}
}

// countedConn counts itself out of open when closed.
type countedConn struct {
	net.Conn
	open   *atomic.Int64
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.open.Add(-1)
	}
	return c.Conn.Close()
}
