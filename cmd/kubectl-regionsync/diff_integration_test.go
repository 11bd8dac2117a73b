//go:build integration

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestDiff: `diff -f` on a real management API server, as a platform team runs it before
// applying: a Progressive Distribution new to two regions prints each region's wave and the
// object it would create, and exits with differences (1); a source object edited locally is
// previewed through the Distribution that places it; a Distribution that selects no region
// exits 0; a Distribution the API server refuses, and a file without objects, exit 2 naming what
// is wrong; nothing is ever written. explain distribution/<name> gives the Distribution's verdicts.
func TestDiff(t *testing.T) {
	f := testenv.StartT(t, "management")
	management := f.Cluster("management")
	mc := management.Client
	rs := func(name, suffix string) *regionsyncv1alpha1.Region {
		return &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "prod"}},
			Spec: regionsyncv1alpha1.RegionSpec{Shard: &regionsyncv1alpha1.RegionShard{RemoteResourceSuffix: suffix,
				LabelSelector: regionsyncv1alpha1.RegionLabel + "=" + name, Kinds: []string{tenantKind, "ConfigMap"}}}}
	}
	create(t, mc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}, rs("use", "-use"), rs("euw", "-euw"),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "placer"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "placer"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"demo.regionsync.dev", ""}, Resources: []string{"tenants", "configmaps"}, Verbs: []string{"get", "list", "create", "update", "patch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "placer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "placer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "acme", Name: "placer"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "ca"}, Data: map[string]string{"ca.crt": "one"}},
	)
	p := &plugin{t: t, kubeconfig: writeKubeconfig(t, management)}
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	storefront := file("storefront.yaml", `apiVersion: regionsync.dev/v1alpha1
kind: Distribution
metadata:
  name: storefront
spec:
  serviceAccountName: placer
  placement:
    regionSelector:
      matchLabels: {tier: prod}
  strategy:
    type: Progressive
    waves:
    - name: canary
      regions: [use]
  template:
    apiVersion: demo.regionsync.dev/v1alpha1
    kind: Tenant
    spec: {displayName: Storefront, plan: pro}
`)
	out, err := p.run("diff", "-f", storefront, "-n", "acme")
	if !errors.Is(err, errDifferences) {
		t.Fatalf("diff of a new Distribution: %v, want differences\n%s", err, out)
	}
	for _, want := range []string{
		"Distribution acme/storefront (new; revision storefront-", "Progressive in 2 waves",
		"region use (wave 1 of 2: canary)\n  Tenant storefront-use: create", "region euw (wave 2 of 2: rest)",
		"Tenant storefront-use: create", "+++ after/storefront-use", "+  plan: pro", "+    " + regionsyncv1alpha1.RegionLabel + ": use",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "region use") > strings.Index(out, "region euw") {
		t.Errorf("regions not in the rollout's order (the canary first):\n%s", out)
	}
	var list regionsyncv1alpha1.DistributionList
	if err := mc.List(t.Context(), &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("diff wrote something: %d Distributions (%v)", len(list.Items), err)
	}

	// A source edited locally, through the Distribution that places it.
	create(t, mc, &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "ca"},
		Spec: regionsyncv1alpha1.DistributionSpec{ServiceAccountName: "placer", Placement: regionsyncv1alpha1.Placement{Regions: []string{"use"}},
			Source: &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: "ca"}}})
	out, err = p.run("diff", "-n", "acme", "-f", file("ca.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ca}\ndata: {ca.crt: two}\n"))
	if !errors.Is(err, errDifferences) || !strings.Contains(out, "ConfigMap ca-use: create") || !strings.Contains(out, "+  ca.crt: two") {
		t.Errorf("diff of an edited source: %v\n%s", err, out)
	}

	// explain distribution/<name> goes to the Distribution's own verdicts (no hub runs here).
	out, err = p.run("explain", "distribution/ca", "-n", "acme")
	if err != nil || !strings.Contains(out, "Distribution acme/ca: selects 1 region(s)") || !strings.Contains(out, "use     NotReconciled") {
		t.Errorf("explain distribution/ca: %v\n%s", err, out)
	}
	if _, err := p.run("explain", "configmap/ca", "-n", "acme", "--region", "use"); err == nil || !strings.Contains(err.Error(), "--region is for explaining a Distribution") {
		t.Errorf("explain configmap/ca --region: %v, want refused", err)
	}

	nowhere := strings.Replace(storefront, "storefront.yaml", "nowhere.yaml", 1)
	if err := os.WriteFile(nowhere, []byte(strings.Replace(mustRead(t, storefront), "tier: prod", "tier: none", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := p.run("diff", "-f", nowhere, "-n", "acme"); err != nil || !strings.Contains(out, "selects no region") {
		t.Errorf("diff of a Distribution selecting nothing: %v, want exit 0 and 'selects no region'\n%s", err, out)
	}

	bad := file("bad.yaml", strings.Replace(mustRead(t, storefront), "type: Progressive", "type: Sideways", 1))
	var ee *exitError
	if _, err := p.run("diff", "-f", bad, "-n", "acme"); !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "spec.strategy.type") {
		t.Errorf("diff of a refused Distribution: %v, want exit 2 naming spec.strategy.type", err)
	}
	if _, err := p.run("diff", "-f", file("empty.yaml", "---\n"), "-n", "acme"); !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "holds no object") {
		t.Errorf("diff of an empty file: %v, want exit 2", err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
