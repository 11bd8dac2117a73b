//go:build integration

package testenv_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The proxy refuses connections while down and forwards them while up.
func TestProxyDownUp(t *testing.T) {
	f := testenv.StartT(t, "proxied")
	c := f.Clusters[0]
	p, err := testenv.NewProxy(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.Config(c.Config)
	cfg.Timeout = 2e9
	cl, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.List(ctx, &corev1.NamespaceList{}); err == nil {
		t.Fatal("request succeeded through a proxy that is down")
	}
	if err := p.Up(); err != nil {
		t.Fatal(err)
	}
	if err := cl.List(ctx, &corev1.NamespaceList{}); err != nil {
		t.Fatalf("request through the proxy: %v", err)
	}
	p.Down()
	if err := cl.List(ctx, &corev1.NamespaceList{}); err == nil {
		t.Fatal("request succeeded after the proxy went down")
	}
	if err := p.Up(); err != nil {
		t.Fatal(err)
	}
	if err := cl.List(ctx, &corev1.NamespaceList{}); err != nil {
		t.Fatalf("request after the proxy came back: %v", err)
	}
}
