//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/inspect"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

var keys = shard.NewKeys(fleetspec.DefaultAnnotationDomain)

// tenantKind is the demo Tenant kind as the agents and the plugin name it.
const tenantKind = "Tenant.demo.regionsync.dev"

// plugin runs the plugin's commands against a kubeconfig with the contexts "management" and
// "region", counting every request it makes.
type plugin struct {
	t          *testing.T
	kubeconfig string
	requests   atomic.Int64
}

// run runs `kubectl regionsync args...` against management, with a fresh discovery cache.
func (p *plugin) run(args ...string) (string, error) {
	p.t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, func(c *rest.Config) *rest.Config {
		c = rest.CopyConfig(c)
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				p.requests.Add(1)
				return rt.RoundTrip(r)
			})
		})
		return c
	})
	cmd.SetArgs(append([]string{"--kubeconfig", p.kubeconfig, "--context", "management", "--cache-dir", p.t.TempDir()}, args...))
	err := cmd.ExecuteContext(context.Background())
	if err != nil {
		err = fmt.Errorf("%w (stderr: %s)", err, errOut.String())
	}
	return out.String(), err
}

// mustRun runs the plugin and fails the test on an error.
func (p *plugin) mustRun(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatalf("kubectl regionsync %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// explainJSON runs explain -o json.
func (p *plugin) explainJSON(args ...string) (*inspect.Explanation, error) {
	out, err := p.run(append([]string{"explain", "-o", "json"}, args...)...)
	if err != nil {
		return nil, err
	}
	e := &inspect.Explanation{}
	if err := json.Unmarshal([]byte(out), e); err != nil {
		return nil, fmt.Errorf("explain -o json: %w\n%s", err, out)
	}
	return e, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// writeKubeconfig writes one kubeconfig with a context per cluster, named after it.
func writeKubeconfig(t *testing.T, clusters ...*testenv.Cluster) string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for _, c := range clusters {
		kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		ctx := kc.Contexts[kc.CurrentContext]
		merged.Clusters[c.Name] = kc.Clusters[ctx.Cluster]
		merged.AuthInfos[c.Name] = kc.AuthInfos[ctx.AuthInfo]
		merged.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name, Namespace: "default"}
	}
	merged.CurrentContext = clusters[0].Name
	path := t.TempDir() + "/kubeconfig"
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startAgent runs region's syncer through the library on the regional cluster until the test
// ends: Tenants named *<suffix> labelled for the region, copied to namespaces ending in suffix
// (two regions share one regional cluster). It returns a func that stops the agent (idempotent).
func startAgent(t *testing.T, log *testenv.TestLog, management, regional *testenv.Cluster, region, suffix, version string, mutate func(*regionsync.Options)) func() {
	t.Helper()
	opts := regionsync.Options{
		Region:     region,
		Management: regionsync.Management{Config: management.Config},
		Shard: regionsync.Shard{
			RemoteResourceSuffix: suffix, LocalNamespaceSuffix: suffix,
			LabelSelector: regionsyncv1alpha1.RegionLabel + "=" + region,
		},
		Resources:         []regionsync.Resource{{Object: &demov1alpha1.Tenant{}}},
		Claim:             regionsync.Claim{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
		HeartbeatInterval: 5 * time.Second,
		Version:           version,
		Logger:            log.Logger(region),
	}
	if mutate != nil {
		mutate(&opts)
	}
	mgr, err := ctrl.NewManager(regional.Config, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Logger:                 log.Logger(region + "-manager"),
		Cache:                  regionsync.LocalCacheOptions(opts),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := regionsync.New(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent %s: %v", region, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, client.ObjectKeyFromObject(o), err)
		}
	}
}

// labelled is a Tenant on management labelled for region.
func labelled(ns, name, region string) *demov1alpha1.Tenant {
	return testenv.Tenant(ns, name, "Web", func(tn *demov1alpha1.Tenant) {
		tn.Labels = map[string]string{regionsyncv1alpha1.RegionLabel: region}
	})
}

// verdictIs waits until explain args gives verdict, and returns that inspect.Explanation.
func verdictIs(t *testing.T, p *plugin, verdict string, timeout time.Duration, args ...string) *inspect.Explanation {
	t.Helper()
	var e *inspect.Explanation
	testenv.Eventually(t, fmt.Sprintf("explain %s says %s", strings.Join(args, " "), verdict), timeout, func() error {
		var err error
		if e, err = p.explainJSON(args...); err != nil {
			return err
		}
		if e.Verdict != verdict {
			return fmt.Errorf("verdict %s: %s", e.Verdict, e.Summary)
		}
		return nil
	})
	return e
}

func hasFinding(e *inspect.Explanation, topic, text string) bool {
	for _, f := range e.Findings {
		if f.Topic == topic && strings.Contains(f.Text, text) {
			return true
		}
	}
	return false
}

// TestPlugin runs the plugin's commands against a management cluster whose Regions, shard Leases,
// finalizers, annotations and Events two real agents (regions use and euw, the library in this
// process, one regional cluster) write.
func TestPlugin(t *testing.T) {
	bg := context.Background()
	// Management serves the Region kind but not yet the hub's Distribution (installed later).
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	regionCRD := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "crds", "regionsync.dev_regions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(regionCRD, "regions.yaml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	fleet, err := testenv.Start([]string{"management", "region"}, testenv.Options{
		Dir: t.TempDir(), Log: t.Logf, CRDDirectoryPaths: []string{regionCRD, filepath.Join(root, "deploy", "crds", "demo")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleet.Stop(); err != nil {
			t.Errorf("stopping clusters: %v", err)
		}
	})
	management, regional := fleet.Cluster("management"), fleet.Cluster("region")
	mc, rc := management.Client, regional.Client
	create(t, mc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultManagementNamespace}})
	for _, ns := range []string{"acme", "locked"} {
		create(t, mc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	// Regions use and use3 are registered with their shard (spec.shard, the operator's record;
	// use3's agent never runs); euw is a Region made before spec.shard existed.
	registeredShard := func(region string) *regionsyncv1alpha1.RegionShard {
		return &regionsyncv1alpha1.RegionShard{
			RemoteResourceSuffix: "-" + region, LocalNamespaceSuffix: "-" + region,
			LabelSelector: regionsyncv1alpha1.RegionLabel + "=" + region, Kinds: []string{"Tenant.demo.regionsync.dev"},
		}
	}
	create(t, mc, &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "use"}, Spec: regionsyncv1alpha1.RegionSpec{Shard: registeredShard("use")}},
		&regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "use3"}, Spec: regionsyncv1alpha1.RegionSpec{Shard: registeredShard("use3")}},
		&regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "euw"}})
	p := &plugin{t: t, kubeconfig: writeKubeconfig(t, management, regional)}

	log := testenv.NewTestLog(t)
	startAgent(t, log, management, regional, "use", "-use", "v0.5.0", func(o *regionsync.Options) {
		// Every deletion is held (the budget allows none below 10 copies) and one namespace
		// is excluded.
		o.DeletionBudget = regionsync.DeletionBudget{MaxFraction: ptr.To(0.1), MinObjects: ptr.To(0)}
		o.Shard.ExcludedNamespaces = []string{"locked-use"}
		o.TracerProvider = sdktrace.NewTracerProvider()
	})
	startAgent(t, log, management, regional, "euw", "-euw", "v0.3.0", nil)

	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	web := labelled("acme", "web-use", "use")
	web.Annotations = map[string]string{keys.TraceParent: traceparent}
	create(t, mc, web, labelled("acme", "web-euw", "euw"), labelled("acme", "stray-apac", "apac"),
		labelled("acme", "wrong-use", "euw"), labelled("locked", "web-use", "use"),
		labelled("acme", "held-use", "use"), labelled("acme", "held2-use", "use"), labelled("acme", "fight-use", "use"),
		labelled("acme", "web-use3", "use3"))

	t.Run("explain: synced and current, with the copy, its trace and no drift", func(t *testing.T) {
		e := verdictIs(t, p, inspect.VerdictSynced, 60*time.Second, "tenant/web-use", "-n", "acme", "--region-context", "region")
		if e.Region != "use" || e.Copy != "acme-use/web in region use" {
			t.Errorf("region %q, copy %q; want use, acme-use/web in region use", e.Region, e.Copy)
		}
		if e.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || e.CopyTraceID != e.TraceID {
			t.Errorf("trace %q, copy's trace %q: want the management-side trace 4bf92f3577b34da6a3ce929d0e0e4736 on both", e.TraceID, e.CopyTraceID)
		}
		if e.CopyObject == nil || e.CopyObject["spec"].(map[string]any)["displayName"] != "Web" {
			t.Errorf("explain does not show the copy: %v", e.CopyObject)
		}
		if e.Drift != "" || !hasFinding(e, inspect.TopicClaim, "claimed: finalizer "+keys.Finalizer) || !hasFinding(e, inspect.TopicCurrent, "current: generation 1") {
			t.Errorf("findings %+v, drift %q", e.Findings, e.Drift)
		}
		if !hasFinding(e, inspect.TopicShard, "copy acme-use/web") || hasFinding(e, inspect.TopicShard, "not registered") {
			t.Errorf("the copy's namespace is not the registered one: %+v", e.Findings)
		}
		text := p.mustRun("explain", "tenants.demo.regionsync.dev/web-use", "-n", "acme", "--region-context", "region")
		t.Logf("kubectl regionsync explain tenants.demo.regionsync.dev/web-use -n acme --region-context region\n%s", text)
		for _, want := range []string{"Tenant.demo.regionsync.dev acme/web-use on management", "Verdict: Synced", "use takes it: region use (names *-use", "ok claim", "Copy acme-use/web in region use:\n  apiVersion: demo.regionsync.dev/v1alpha1"} {
			if !strings.Contains(text, want) {
				t.Errorf("explain output lacks %q:\n%s", want, text)
			}
		}
	})

	t.Run("explain: why no shard takes it", func(t *testing.T) {
		for _, tc := range []struct{ name, want string }{
			{"stray-apac", "region apac has no shard Lease"},
			{"wrong-use", `do not match the shard's selector "regionsync.dev/region=use"`},
		} {
			e := verdictIs(t, p, inspect.VerdictNoShard, 10*time.Second, "tenant/"+tc.name, "-n", "acme")
			var all []string
			for _, f := range e.Findings {
				all = append(all, f.Text)
			}
			for _, s := range e.Shards {
				for _, m := range s.Misses {
					all = append(all, m.Text)
				}
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Errorf("explain %s lacks %q: %+v", tc.name, tc.want, e)
			}
		}
	})

	t.Run("explain: a registered region whose agent does not claim", func(t *testing.T) {
		e := verdictIs(t, p, inspect.VerdictRegionNotLive, 10*time.Second, "tenant/web-use3", "-n", "acme")
		if e.Region != "use3" || !hasFinding(e, inspect.TopicRegion, "registered on its Region (spec.shard) but no agent holds its shard Lease") || !hasFinding(e, inspect.TopicShard, "copy acme-use3/web") {
			t.Errorf("region %q, findings %+v", e.Region, e.Findings)
		}
	})

	t.Run("explain: a protected namespace the agent refused", func(t *testing.T) {
		e := verdictIs(t, p, inspect.VerdictProtectedNamespace, 30*time.Second, "tenant/web-use", "-n", "locked")
		if !hasFinding(e, inspect.TopicShard, "locked-use") {
			t.Errorf("findings do not name the local namespace locked-use: %+v", e.Findings)
		}
		text := p.mustRun("explain", "tenant/web-use", "-n", "locked")
		if !strings.Contains(text, "Events on management") || !strings.Contains(text, "Warning  ProtectedNamespace") {
			t.Errorf("explain does not show the agent's Event:\n%s", text)
		}
	})

	t.Run("status: both regions live, their counts, the skew, no Distributions column", func(t *testing.T) {
		var report inspect.StatusReport
		// Region use has an invalid object (the protected namespace): Synced, hence Ready, is False.
		testenv.Eventually(t, "status shows euw Ready, use not Ready for its invalid object, both live with their Tenants synced", 60*time.Second, func() error {
			out, err := p.run("status", "-o", "json")
			if err != nil {
				return err
			}
			report = inspect.StatusReport{}
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				return err
			}
			if len(report.Regions) != 3 || report.Regions[2].Name != "use3" || report.Regions[2].HasLease || report.Regions[2].Live {
				return fmt.Errorf("want euw, use and use3 (a Region without a Lease): %+v", report.Regions)
			}
			for _, r := range report.Regions[:2] {
				wantReady, wantInvalid := metav1.ConditionTrue, int32(0)
				if r.Name == "use" {
					wantReady, wantInvalid = metav1.ConditionFalse, 1
				}
				if r.Ready != wantReady || !r.Live || len(r.Resources) != 1 || r.Resources[0].Synced == 0 || r.Resources[0].Invalid != wantInvalid {
					return fmt.Errorf("region %s: %+v", r.Name, r)
				}
			}
			return nil
		})
		if report.Distributions != nil {
			t.Errorf("Distributions reported without the kind: %+v", report.Distributions)
		}
		byName := map[string]inspect.RegionStatus{report.Regions[0].Name: report.Regions[0], report.Regions[1].Name: report.Regions[1]}
		if !strings.Contains(p.mustRun("status"), "no Lease") {
			t.Error("status does not say use3 has no Lease")
		}
		if byName["euw"].VersionSkew == "" || byName["use"].VersionSkew != "" || report.NewestAgentVersion != "v0.5.0" {
			t.Errorf("skew: euw %q, use %q, newest %q; want euw (v0.3.0) flagged against v0.5.0", byName["euw"].VersionSkew, byName["use"].VersionSkew, report.NewestAgentVersion)
		}
		if byName["use"].Resources[0].Resource != "Tenant.demo.regionsync.dev" || byName["use"].LeaseHolder == "" || byName["use"].ShardState != claim.StateSyncing {
			t.Errorf("region use: %+v", byName["use"])
		}
		// The agents report the regional API server's version; a source-built one (v0.0.0-master)
		// as its major.minor.
		for _, name := range []string{"use", "euw"} {
			if v := byName[name].KubernetesVersion; !strings.HasPrefix(v, "v1.") {
				t.Errorf("region %s reports Kubernetes version %q, want the regional API server's v1.x", name, v)
			}
		}
		table := p.mustRun("status")
		t.Logf("kubectl regionsync status\n%s", table)
		for _, want := range []string{"REGION", "euw", "v0.3.0 SKEW", "False (NotReady)", "v0.5.0", "Tenant.demo.regionsync.dev", "SKEW: 1 region(s)"} {
			if !strings.Contains(table, want) {
				t.Errorf("status table lacks %q:\n%s", want, table)
			}
		}
		if strings.Contains(table, "Distributions") {
			t.Errorf("a Distributions line without the kind:\n%s", table)
		}
		if wide := p.mustRun("status", "-o", "wide"); !strings.Contains(wide, "SHARD-STATE") || !strings.Contains(wide, "Syncing") {
			t.Errorf("status -o wide lacks the claim state:\n%s", wide)
		}
		if out, err := p.run("status", "-o", "xml"); err == nil || !strings.Contains(err.Error(), `unknown output format "xml"`) {
			t.Errorf("status -o xml: %v\n%s", err, out)
		}
	})

	t.Run("the Region reports the regional ClusterProperty objects (About API)", func(t *testing.T) {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "clusterproperties.about.k8s.io",
				// The API server refuses a CRD of a *.k8s.io group without an approval annotation.
				Annotations: map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/tree/master/keps/sig-multicluster/2149-clusterid"}},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "about.k8s.io", Scope: apiextensionsv1.ClusterScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusterproperties", Singular: "clusterproperty", Kind: "ClusterProperty", ListKind: "ClusterPropertyList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"value": {Type: "string"}}},
					}}}}},
			},
		}
		if _, err := envtest.InstallCRDs(regional.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}); err != nil {
			t.Fatal(err)
		}
		prop := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "about.k8s.io/v1alpha1", "kind": "ClusterProperty",
			"metadata": map[string]any{"name": "cluster.clusterset.k8s.io"}, "spec": map[string]any{"value": "regional-cluster-1"}}}
		create(t, rc, prop)
		testenv.Eventually(t, "Region use reports the regional ClusterProperty", 60*time.Second, func() error {
			r := &regionsyncv1alpha1.Region{}
			if err := mc.Get(bg, client.ObjectKey{Name: "use"}, r); err != nil {
				return err
			}
			want := []regionsyncv1alpha1.ClusterProperty{{Name: "cluster.clusterset.k8s.io", Value: "regional-cluster-1"}}
			if !slices.Equal(r.Status.ClusterProperties, want) {
				return fmt.Errorf("clusterProperties %+v", r.Status.ClusterProperties)
			}
			return nil
		})
	})

	t.Run("pause and resume on management", func(t *testing.T) {
		verdictIs(t, p, inspect.VerdictSynced, 30*time.Second, "tenant/web-euw", "-n", "acme")
		if out := p.mustRun("pause", "tenant/web-euw", "-n", "acme"); !strings.Contains(out, "paused") {
			t.Errorf("pause: %s", out)
		}
		tn := &demov1alpha1.Tenant{}
		if err := mc.Get(bg, client.ObjectKey{Namespace: "acme", Name: "web-euw"}, tn); err != nil {
			t.Fatal(err)
		}
		tn.Spec.DisplayName = "changed while paused"
		if err := mc.Update(bg, tn); err != nil {
			t.Fatal(err)
		}
		e := verdictIs(t, p, inspect.VerdictPaused, 10*time.Second, "tenant/web-euw", "-n", "acme")
		if !hasFinding(e, inspect.TopicCurrent, "management generation 2, last copied 1") {
			t.Errorf("a paused change is not reported as not current: %+v", e.Findings)
		}
		testenv.Consistently(t, "the paused change does not reach the region", 3*time.Second, func() error {
			local := &demov1alpha1.Tenant{}
			if err := rc.Get(bg, client.ObjectKey{Namespace: "acme-euw", Name: "web"}, local); err != nil {
				return err
			}
			if local.Spec.DisplayName != "Web" {
				return fmt.Errorf("copy has %q", local.Spec.DisplayName)
			}
			return nil
		})
		p.mustRun("resume", "tenant/web-euw", "-n", "acme")
		verdictIs(t, p, inspect.VerdictSynced, 30*time.Second, "tenant/web-euw", "-n", "acme", "--region-context", "region")
	})

	t.Run("pause in the region: the drift stays and is shown", func(t *testing.T) {
		p.mustRun("pause", "tenant/web", "-n", "acme-euw", "--region-context", "region")
		local := &demov1alpha1.Tenant{}
		if err := rc.Get(bg, client.ObjectKey{Namespace: "acme-euw", Name: "web"}, local); err != nil {
			t.Fatal(err)
		}
		local.Spec.DisplayName = "edited in the region"
		if err := rc.Update(bg, local); err != nil {
			t.Fatal(err)
		}
		e := verdictIs(t, p, inspect.VerdictPaused, 10*time.Second, "tenant/web-euw", "-n", "acme", "--region-context", "region")
		if !strings.Contains(e.Drift, "edited in the region") || !strings.Contains(e.Drift, "changed while paused") {
			t.Errorf("drift does not show both sides:\n%s", e.Drift)
		}
		p.mustRun("resume", "tenant/web", "-n", "acme-euw", "--region-context", "region")
		e = verdictIs(t, p, inspect.VerdictSynced, 30*time.Second, "tenant/web-euw", "-n", "acme", "--region-context", "region")
		if e.Drift != "" {
			t.Errorf("drift after resume: %s", e.Drift)
		}
	})

	t.Run("explain: a write fight in the region", func(t *testing.T) {
		verdictIs(t, p, inspect.VerdictSynced, 30*time.Second, "tenant/fight-use", "-n", "acme")
		ctx, stop := context.WithCancel(bg)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // a regional controller that keeps rewriting the copy's spec
			defer wg.Done()
			for ctx.Err() == nil {
				local := &demov1alpha1.Tenant{}
				if err := rc.Get(ctx, client.ObjectKey{Namespace: "acme-use", Name: "fight"}, local); err == nil && local.Spec.DisplayName != "the region's" {
					local.Spec.DisplayName = "the region's"
					_ = rc.Update(ctx, local)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		defer func() { stop(); wg.Wait() }()
		e := verdictIs(t, p, inspect.VerdictWriteFight, 60*time.Second, "tenant/fight-use", "-n", "acme", "--region-context", "region")
		t.Logf("kubectl regionsync explain tenant/fight-use -n acme --region-context region\n%s", p.mustRun("explain", "tenant/fight-use", "-n", "acme", "--region-context", "region"))
		if !hasFinding(e, inspect.TopicFight, "keeps undoing the spec of the local copy") {
			t.Errorf("findings: %+v", e.Findings)
		}
	})

	t.Run("explain and release: a held deletion, one copy", func(t *testing.T) {
		verdictIs(t, p, inspect.VerdictSynced, 30*time.Second, "tenant/held-use", "-n", "acme")
		if err := mc.Delete(bg, labelled("acme", "held-use", "use")); err != nil {
			t.Fatal(err)
		}
		e := verdictIs(t, p, inspect.VerdictDeletionHeld, 30*time.Second, "tenant/held-use", "-n", "acme", "--region-context", "region")
		if !strings.Contains(e.Summary, "release --region use --before now") {
			t.Errorf("summary gives no release: %s", e.Summary)
		}
		if _, err := p.run("release", "tenant/web-use", "-n", "acme"); err == nil {
			t.Error("release of a copy without --region-context succeeded")
		}
		if _, err := p.run("release", "tenant/stray-apac", "-n", "acme", "--region-context", "management"); err == nil || !strings.Contains(err.Error(), "is not a regionsync copy") {
			t.Errorf("release of an object that is no copy: %v", err)
		}
		out := p.mustRun("release", "tenant/held", "-n", "acme-use", "--region-context", "region")
		if !strings.Contains(out, keys.ReleaseDeletion+"=true") {
			t.Errorf("release: %s", out)
		}
		testenv.Eventually(t, "the released deletion goes through: the management object is gone", 60*time.Second, func() error {
			err := mc.Get(bg, client.ObjectKey{Namespace: "acme", Name: "held-use"}, &demov1alpha1.Tenant{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return errors.Join(err, errors.New("still there"))
		})
		verdictIs(t, p, inspect.VerdictNotFound, 10*time.Second, "tenant/held-use", "-n", "acme", "--region-context", "region")
	})

	t.Run("release: a region's holds before a time", func(t *testing.T) {
		if err := mc.Delete(bg, labelled("acme", "held2-use", "use")); err != nil {
			t.Fatal(err)
		}
		verdictIs(t, p, inspect.VerdictDeletionHeld, 30*time.Second, "tenant/held2-use", "-n", "acme")
		if _, err := p.run("release", "--region", "nowhere", "--before", "now"); err == nil || !strings.Contains(err.Error(), "no Region nowhere") {
			t.Errorf("release of an unknown region: %v", err)
		}
		if _, err := p.run("release", "--region", "use", "--before", "yesterday"); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
			t.Errorf("release with a bad time: %v", err)
		}
		p.mustRun("release", "--region", "use", "--before", "now")
		r := &regionsyncv1alpha1.Region{}
		if err := mc.Get(bg, client.ObjectKey{Name: "use"}, r); err != nil {
			t.Fatal(err)
		}
		if _, err := time.Parse(time.RFC3339, r.Annotations[keys.ReleaseDeletionsBefore]); err != nil {
			t.Fatalf("Region use: %s=%q", keys.ReleaseDeletionsBefore, r.Annotations[keys.ReleaseDeletionsBefore])
		}
		testenv.Eventually(t, "the region releases the hold: the management object is gone", 90*time.Second, func() error {
			err := mc.Get(bg, client.ObjectKey{Namespace: "acme", Name: "held2-use"}, &demov1alpha1.Tenant{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return errors.Join(err, errors.New("still there"))
		})
	})

	t.Run("explain: an invalid mapping the agent refused", func(t *testing.T) {
		long := strings.Repeat("n", 60) // 60 + "-use" is longer than a namespace may be
		create(t, mc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: long}}, labelled(long, "web-use", "use"))
		e := verdictIs(t, p, inspect.VerdictInvalidMapping, 30*time.Second, "tenant/web-use", "-n", long)
		if !hasFinding(e, inspect.TopicShard, "the agent refused it") {
			t.Errorf("findings: %+v", e.Findings)
		}
	})

	t.Run("explain: overlapping shards, a refused shard, a region not live", func(t *testing.T) {
		// Region use2 claims names *-use as well, with no label selector: it overlaps use, which
		// registered first, so use2's agent refuses to sync.
		stop := startAgent(t, log, management, regional, "use2", "-use", "v0.5.0", func(o *regionsync.Options) {
			o.Shard.LabelSelector, o.Shard.LocalNamespaceSuffix = "", "-use2"
		})
		create(t, mc, labelled("acme", "other-use", "other"), &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "use2"}})
		e := verdictIs(t, p, inspect.VerdictShardOverlap, 60*time.Second, "tenant/web-use", "-n", "acme")
		if !strings.Contains(e.Summary, "regions use, use2 overlap") || !strings.Contains(e.Summary, "use syncs (registered first)") || e.Region != "use" {
			t.Errorf("overlap: region %q, %s", e.Region, e.Summary)
		}
		// Only use2's shard takes other-use (use selects on its label): use2 refuses.
		e = verdictIs(t, p, inspect.VerdictShardRefused, 30*time.Second, "tenant/other-use", "-n", "acme")
		if e.Region != "use2" || !hasFinding(e, inspect.TopicRegion, "it collides with the shard of region use (Lease regionsync-system/region-use)") {
			t.Errorf("refused: region %q, findings %+v", e.Region, e.Findings)
		}
		testenv.Eventually(t, "status shows use2 refused", 30*time.Second, func() error {
			table, err := p.run("status")
			if err == nil && !strings.Contains(table, "False (ShardOverlap)") {
				err = fmt.Errorf("no use2 overlap:\n%s", table)
			}
			return err
		})
		// Stopped, use2's agent releases its Lease: nobody holds it.
		stop()
		verdictIs(t, p, inspect.VerdictRegionNotLive, 30*time.Second, "tenant/other-use", "-n", "acme")
		if err := mc.Delete(bg, labelled("acme", "other-use", "other")); err != nil {
			t.Fatal(err)
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: fleetspec.DefaultManagementNamespace, Name: claim.LeaseName("use2")}}
		if err := mc.Delete(bg, lease); err != nil {
			t.Fatal(err)
		}
		if err := mc.Delete(bg, &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "use2"}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("explain at 1,003 regions: the same requests as at 3", func(t *testing.T) {
		explainRequests := func() (int64, time.Duration) {
			before := p.requests.Load()
			start := time.Now()
			if _, err := p.explainJSON("tenant/web-use", "-n", "acme", "--region-context", "region"); err != nil {
				t.Fatal(err)
			}
			return p.requests.Load() - before, time.Since(start)
		}
		statusRequests := func() (int64, time.Duration) {
			before := p.requests.Load()
			start := time.Now()
			p.mustRun("status")
			return p.requests.Load() - before, time.Since(start)
		}
		atTwo, tookAtTwo := explainRequests()
		statusAtTwo, statusTookAtTwo := statusRequests()
		createRegions(t, management, 1000)
		var atThousand int64
		var took time.Duration
		var e *inspect.Explanation
		atThousand, took = explainRequests()
		if e, _ = p.explainJSON("tenant/web-use", "-n", "acme"); e == nil || e.Region != "use" {
			t.Errorf("explain at 1,000 regions: %+v", e)
		}
		t.Logf("explain with --region-context: %d requests and %s at 3 regions, %d requests and %s at 1,003 regions", atTwo, tookAtTwo.Round(time.Millisecond), atThousand, took.Round(time.Millisecond))
		if atThousand != atTwo {
			t.Errorf("explain made %d requests at 1,003 regions, %d at 3: not independent of the number of regions", atThousand, atTwo)
		}
		// Discovery (a fresh cache: /api and /apis), the object, the Leases, the Regions, the Events;
		// in the region the copy and its Events.
		if atTwo > 8 {
			t.Errorf("explain made %d requests, want at most 8", atTwo)
		}
		statusAtThousand, statusTook := statusRequests()
		t.Logf("status: %d requests and %s at 3 regions, %d requests and %s at 1,003 regions", statusAtTwo, statusTookAtTwo.Round(time.Millisecond), statusAtThousand, statusTook.Round(time.Millisecond))
		if statusAtThousand != statusAtTwo {
			t.Errorf("status made %d requests at 1,003 regions, %d at 3: not independent of the number of regions", statusAtThousand, statusAtTwo)
		}
		out := p.mustRun("status", "-o", "json")
		var report inspect.StatusReport
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatal(err)
		}
		if len(report.Regions) != 1003 {
			t.Errorf("status lists %d regions, want 1003", len(report.Regions))
		}
		// doctor on the same fleet: what the real agents and objects above give, at 1,003 regions.
		before, start := p.requests.Load(), time.Now()
		out, err := p.run("doctor", "-o", "json")
		took, requests := time.Since(start), p.requests.Load()-before
		if !errors.Is(err, errProblemsFound) {
			t.Fatalf("doctor: %v", err)
		}
		var d inspect.DoctorReport
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		t.Logf("doctor at 1,003 regions: %d requests, %s, %d findings, checked %+v", requests, took.Round(time.Millisecond), len(d.Findings), d.Checked)
		for _, want := range []struct{ class, object string }{
			{inspect.FindingVersionSkew, "Region euw"},
			{inspect.FindingStaleHeartbeat, "Region use3"},
			{inspect.FindingUnknownRegion, "Tenant.demo.regionsync.dev acme/stray-apac"},
		} {
			if findingOf(&d, want.class, want.object) == nil {
				t.Errorf("doctor lacks %s about %s: %+v", want.class, want.object, d.Findings)
			}
		}
		for _, f := range d.Findings {
			if f.Class == inspect.FindingShardOverlap || f.Class == inspect.FindingOrphanedFinalizer {
				t.Errorf("doctor reports %s about %s: %s", f.Class, f.Object, f.Problem)
			}
		}
	})

	t.Run("status: Distributions where the kind is served", func(t *testing.T) {
		if _, err := envtest.InstallCRDs(management.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(root, "deploy", "crds", "regionsync.dev_distributions.yaml")}}); err != nil {
			t.Fatal(err)
		}
		// No hub runs here: the test writes the status a hub would.
		for name, cond := range map[string]metav1.Condition{
			"rolling": {Type: regionsyncv1alpha1.DistributionAvailable, Status: metav1.ConditionFalse, Reason: regionsyncv1alpha1.ReasonProgressing, Message: "use is not current"},
			"broken":  {Type: regionsyncv1alpha1.DistributionDegraded, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonUnplaceable},
			"fine":    {Type: regionsyncv1alpha1.DistributionAvailable, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonAvailable},
		} {
			d := &regionsyncv1alpha1.Distribution{
				ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
				Spec: regionsyncv1alpha1.DistributionSpec{
					Template:  runtime.RawExtension{Raw: []byte(`{"apiVersion":"demo.regionsync.dev/v1alpha1","kind":"Tenant","spec":{"displayName":"Web","plan":"team"}}`)},
					Placement: regionsyncv1alpha1.Placement{Regions: []string{"use"}},
				},
			}
			if err := mc.Create(bg, d); err != nil {
				t.Fatal(err)
			}
			cond.LastTransitionTime = metav1.Now()
			d.Status.Conditions = []metav1.Condition{cond}
			if name == "rolling" {
				d.Status.Regions = []regionsyncv1alpha1.DistributionRegionStatus{{Region: "use", State: regionsyncv1alpha1.PlacementApplied, Generation: 2}}
			}
			if err := mc.Status().Update(bg, d); err != nil {
				t.Fatal(err)
			}
		}
		out := p.mustRun("status")
		if want := "Distributions: 3, 1 progressing, 0 halted, 1 degraded, 0 with removals held (need attention: acme/broken)"; !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, tail(out))
		}
		var report inspect.StatusReport
		if err := json.Unmarshal([]byte(p.mustRun("status", "-o", "json")), &report); err != nil {
			t.Fatal(err)
		}
		for _, r := range report.Regions {
			switch {
			case r.Name == "use" && (r.Distributions == nil || *r.Distributions != inspect.RegionDistributions{Progressing: 1}):
				t.Errorf("region use's Distributions %+v, want 1 progressing", r.Distributions)
			case r.Name != "use" && r.Distributions != nil:
				t.Errorf("region %s's Distributions %+v, want none", r.Name, r.Distributions)
			}
		}
		if !strings.Contains(out, "DISTRIBUTIONS") || !strings.Contains(out, "1 progressing") {
			t.Errorf("status lacks the DISTRIBUTIONS column:\n%s", testenv.Tail(out, 3000))
		}
	})
}

func tail(s string) string {
	if i := strings.LastIndex(s, "SKEW"); i > 0 {
		return s[i:]
	}
	return testenv.Tail(s, 2000)
}

// createRegions creates n Regions with a Ready status and n shard Leases, as n live agents would
// have written them, concurrently.
func createRegions(t *testing.T, c *testenv.Cluster, n int) {
	t.Helper()
	bg := context.Background()
	start := time.Now()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				errs <- createRegion(bg, c.Client, fmt.Sprintf("r%04d", i))
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d Regions and shard Leases created in %s", n, time.Since(start).Round(time.Millisecond))
}

func createRegion(ctx context.Context, c client.Client, name string) error {
	def, err := json.Marshal(shard.Definition{Region: name, RemoteResourceSuffix: "-" + name, LabelSelector: regionsyncv1alpha1.RegionLabel + "=" + name, Kinds: []string{"Tenant.demo.regionsync.dev"}})
	if err != nil {
		return err
	}
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetspec.DefaultManagementNamespace, Name: claim.LeaseName(name),
			Labels: map[string]string{claim.LeaseLabel: "true"},
			Annotations: map[string]string{claim.DefinitionAnnotation: string(def), claim.StateAnnotation: claim.StateSyncing,
				claim.HolderAnnotation: name + "-agent-0", claim.RegisteredAnnotation: now.UTC().Format(time.RFC3339Nano)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name + "-fleet"), LeaseDurationSeconds: ptr.To[int32](60), RenewTime: &now, AcquireTime: &now},
	}
	if err := c.Create(ctx, lease); err != nil {
		return err
	}
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, r); err != nil {
		return err
	}
	r.Status = regionsyncv1alpha1.RegionStatus{
		Conditions: []metav1.Condition{{Type: regionsyncv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonReady, LastTransitionTime: metav1.Now()}},
		Leader:     name + "-agent-0", AgentVersion: "v0.5.0", HeartbeatTime: ptr.To(metav1.Now()),
		Resources: []regionsyncv1alpha1.ResourceCounts{{Resource: "Tenant.demo.regionsync.dev", Synced: 10}},
	}
	return c.Status().Update(ctx, r)
}
