//go:build integration

package hub_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestHubSecureMetrics: the hub's secure metrics endpoint, run as the hub's ServiceAccount with
// the RBAC deploy/kustomize/hub ships, answers a scraper bound to regionsync-metrics-reader and
// refuses one that is not bound, and an anonymous one.
func TestHubSecureMetrics(t *testing.T) {
	bg := context.Background()
	f := testenv.StartT(t, "management")
	mgmt := f.Cluster("management")
	installHubRBAC(t, mgmt)
	create(t, mgmt.Client,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: "prometheus"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: "other"}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-regionsync-metrics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "regionsync-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
		})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg, err := mgmt.ServiceAccountTokenConfig(bg, "regionsync-system", "regionsync-hub")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     testenv.Scheme(),
		Logger:     testenv.NewTestLog(t).Logger("hub"),
		Metrics:    hub.MetricsServerOptions(hub.TelemetryConfig{MetricsAddr: addr, SecureMetrics: true}),
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	token := func(name string) string {
		c, err := mgmt.ServiceAccountTokenConfig(bg, "monitoring", name)
		if err != nil {
			t.Fatal(err)
		}
		return c.BearerToken
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the endpoint's certificate is self-signed
	scrape := func(bearer string) (int, error) {
		req, err := http.NewRequestWithContext(bg, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	reader, other := token("prometheus"), token("other")
	testenv.Eventually(t, "a scraper bound to regionsync-metrics-reader is answered", 60*time.Second, func() error {
		code, err := scrape(reader)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
	for name, bearer := range map[string]string{"a ServiceAccount not bound": other, "anonymous": ""} {
		code, err := scrape(bearer)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusForbidden && code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401 or 403", name, code)
		}
	}
}
