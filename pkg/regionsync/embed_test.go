//go:build integration

package regionsync_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The paired tests run each Example against real API servers (a management cluster and a
// regional cluster, with kube-controller-manager) and check what it promises.
var management, region *testenv.Cluster

func TestMain(m *testing.M) {
	testenv.SetProcessLoggers()
	base, cancel := context.WithCancel(context.Background())
	fleet, err := testenv.Start([]string{"management", "region"}, testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	management, region = fleet.Cluster("management"), fleet.Cluster("region")
	if err := management.Client.Create(base, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultManagementNamespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	managementConfig, hostScheme, ctx = management.Config, testenv.Scheme(), base
	code := m.Run()
	cancel()
	if err := fleet.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// requestLog records the requests a host's manager makes to the regional cluster.
type requestLog struct {
	mu       sync.Mutex
	requests []string // "METHOD path?query" of the successful requests
	notFound []string // "METHOD path" of the requests answered 404
}

func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			switch {
			case err != nil:
			case resp.StatusCode < 300:
				l.mu.Lock()
				l.requests = append(l.requests, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
				l.mu.Unlock()
			case resp.StatusCode == http.StatusNotFound:
				l.mu.Lock()
				l.notFound = append(l.notFound, req.Method+" "+req.URL.Path)
				l.mu.Unlock()
			}
			return resp, err
		})
	})
	return c
}

// count returns how many recorded requests satisfy match.
func (l *requestLog) count(match func(method, path, query string) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.requests {
		method, target, _ := strings.Cut(r, " ")
		path, query, _ := strings.Cut(target, "?")
		if match(method, path, query) {
			n++
		}
	}
	return n
}

// notFoundCount returns how many requests for method and path were answered 404.
func (l *requestLog) notFoundCount(method, path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.notFound {
		if r == method+" "+path {
			n++
		}
	}
	return n
}

// tenantWatches counts watches of Tenants.
func tenantWatches(method, path, query string) bool {
	return method == http.MethodGet && strings.HasSuffix(path, "/tenants") && strings.Contains(query, "watch=true")
}

// writes counts the creates, updates, patches and deletes of synced objects (not Events, not
// Leases, which are bookkeeping).
func writes(method, path, _ string) bool {
	return method != http.MethodGet && !strings.Contains(path, "/events") && !strings.Contains(path, "/leases")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.Eventually(t, what, timeout, func() error {
		ok, err := cond()
		if err == nil && !ok {
			err = errNotYet
		}
		return err
	})
}

var errNotYet = errors.New("not yet")

func createNamespace(t *testing.T, c client.Client, name string, annotations map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func tenant(namespace, name, displayName string) *demov1alpha1.Tenant {
	return testenv.Tenant(namespace, name, displayName)
}

// The typed embedding shares the host's informer (one watch of Tenants, not two), syncs copies
// whose status the host's own controller writes back, and under the default adoption policy
// leaves an unmarked pre-existing Tenant alone although the host's cache holds it.
func TestExampleTyped(t *testing.T) {
	bg := context.Background()
	// The demo operator keeps one token Secret per namespace: the region's own Tenant lives in
	// a namespace of its own.
	createNamespace(t, management.Client, "acme", nil)
	createNamespace(t, management.Client, "acme-old", nil)
	createNamespace(t, region.Client, "acme-old", nil)
	pre := tenant("acme-old", "legacy", "made in the region")
	if err := region.Client.Create(bg, pre); err != nil {
		t.Fatal(err)
	}
	var log requestLog
	localConfig = log.wrap(region.Config)
	ExampleNew_typed()

	for _, obj := range []*demov1alpha1.Tenant{tenant("acme", "web-us-east-1", "Web"), tenant("acme-old", "legacy-us-east-1", "from management")} {
		if err := management.Client.Create(bg, obj); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "copy acme/web synced and its status returned", func() (bool, error) {
		local := &demov1alpha1.Tenant{}
		if err := region.Client.Get(bg, client.ObjectKey{Namespace: "acme", Name: "web"}, local); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		remote := &demov1alpha1.Tenant{}
		if err := management.Client.Get(bg, client.ObjectKey{Namespace: "acme", Name: "web-us-east-1"}, remote); err != nil {
			return false, err
		}
		return local.Spec.DisplayName == "Web" && remote.Status.Phase == "Ready", nil
	})
	// The refused object: an event says so, the object is unchanged and unmarked.
	eventually(t, 30*time.Second, "adoption refused event", func() (bool, error) {
		return hasEvent(bg, region.Client, "acme-old", "legacy", "AdoptionRefused")
	})
	got := &demov1alpha1.Tenant{}
	if err := region.Client.Get(bg, client.ObjectKeyFromObject(pre), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.DisplayName != "made in the region" || got.Labels["regionsync.dev/sync-region"] != "" {
		t.Errorf("unmarked Tenant acme-old/legacy was touched: displayName %q, labels %v", got.Spec.DisplayName, got.Labels)
	}
	if n := log.count(tenantWatches); n != 1 {
		t.Errorf("the regional API server saw %d watches of Tenants, want 1 (the host's informer shared)", n)
	}
}

// hasEvent reports whether an events.k8s.io Event with reason regards namespace/name.
func hasEvent(ctx context.Context, c client.Client, namespace, name, reason string) (bool, error) {
	list := &corev1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return false, err
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			return true, nil
		}
	}
	return false, nil
}

// The unstructured embedding syncs ConfigMaps (content fields, not spec) by server-side apply.
func TestExampleUnstructured(t *testing.T) {
	bg := context.Background()
	localConfig = region.Config
	ExampleNew_unstructured()
	createNamespace(t, management.Client, "tenant-blue", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-blue", Name: "settings-eu-west-1"}, Data: map[string]string{"color": "blue"}}
	if err := management.Client.Create(bg, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ConfigMap tenant-blue/settings synced", func() (bool, error) {
		local := &corev1.ConfigMap{}
		if err := region.Client.Get(bg, client.ObjectKey{Namespace: "tenant-blue", Name: "settings"}, local); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return local.Data["color"] == "blue" && local.Labels["regionsync.dev/sync-region"] == "eu-west-1", nil
	})
}

// The sync-controller compatible embedding uses sync-controller's finalizer and takes over, in
// place, a copy sync-controller made in a namespace it created for it.
func TestExampleSyncControllerCompatible(t *testing.T) {
	bg := context.Background()
	// What sync-controller left in the region: a namespace it created for "app" and the copy.
	createNamespace(t, region.Client, "teleport-acme", map[string]string{"cloud.teleport.dev/sync-owner": "app"})
	old := tenant("teleport-acme", "app", "old spec")
	if err := region.Client.Create(bg, old); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, management.Client, "teleport-acme", nil)
	remote := tenant("teleport-acme", "app-ap-south-1", "new spec")
	if err := management.Client.Create(bg, remote); err != nil {
		t.Fatal(err)
	}
	localConfig = region.Config
	ExampleNew_syncControllerCompatible()
	eventually(t, 30*time.Second, "sync-controller's copy taken over in place", func() (bool, error) {
		local := &demov1alpha1.Tenant{}
		if err := region.Client.Get(bg, client.ObjectKeyFromObject(old), local); err != nil {
			return false, err
		}
		if local.UID != old.UID {
			return false, errors.New("the copy was replaced, not taken over")
		}
		return local.Spec.DisplayName == "new spec" && local.Labels["cloud.teleport.dev/sync-region"] == "ap-south-1", nil
	})
	got := &demov1alpha1.Tenant{}
	if err := management.Client.Get(bg, client.ObjectKeyFromObject(remote), got); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(got, "cloud.teleport.dev/sync-local") {
		t.Errorf("remote finalizers %v, want sync-controller's cloud.teleport.dev/sync-local", got.Finalizers)
	}
}

// Two replicas of a host without leader election: both sync caches, exactly one writes.
func TestExampleLeaderElectionOff(t *testing.T) {
	bg := context.Background()
	var logs [2]requestLog
	for i := range logs {
		localConfig = logs[i].wrap(region.Config)
		ExampleNew_leaderElectionOff()
	}
	createNamespace(t, management.Client, "globex", nil)
	for i := range 3 {
		if err := management.Client.Create(bg, tenant("globex", fmt.Sprintf("t%d-sa-east-1", i), "Globex")); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "3 copies in globex", func() (bool, error) {
		list := &demov1alpha1.TenantList{}
		if err := region.Client.List(bg, list, client.InNamespace("globex")); err != nil {
			return false, err
		}
		return len(list.Items) == 3, nil
	})
	// A second writer, if there were one, would show itself within the window.
	testenv.Consistently(t, "exactly one writer", 2*time.Second, func() error {
		if a, b := logs[0].count(writes), logs[1].count(writes); (a == 0) == (b == 0) {
			return fmt.Errorf("writes by replica 0: %d, by replica 1: %d", a, b)
		}
		return nil
	})
}
