//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

const (
	// explainLabel marks what the figure creates, so that it is removed afterwards.
	explainLabel = "bench.regionsync.dev/explain"
	// explainAnswers is how many objects explain is timed on: half of the synced set, half of the
	// objects created for the figure.
	explainAnswers = 10
)

func explainRegionName(i int) string { return fmt.Sprintf("xr-%04d", i) }

// explain times the kubectl plugin as users run it (the built binary kubectl-regionsync, a
// process per answer, a fresh discovery cache each time) on management with p.ExplainRegions more
// Regions and shard Leases (Ready, live, as agents would have written them) and enough Tenants
// labelled for them to make p.ExplainObjects in all: explain on objects of the synced set and on
// created ones, then status and doctor once. Its requests are counted by a proxy in front of
// management that the plugin's kubeconfig points at. Everything the figure created is deleted.
func (b *suite) explain() {
	ctx, e := b.ctx, b.e
	explainRegions, explainObjects := b.p.ExplainRegions, b.p.ExplainObjects
	bin, err := testenv.BuildPlugin(b.dir)
	if err != nil {
		b.t.Fatal(err)
	}
	defer b.explainCleanup()
	// The synced set's verdict is Synced only while its region is live: the idle and fleet
	// figures stop the main region's agents.
	if err := b.mainAgentsRunning(); err != nil {
		b.errorf("explain: %v", err)
		return
	}
	start := time.Now()
	names := make([]string, explainRegions)
	for i := range names {
		names[i] = explainRegionName(i)
	}
	if err := parallel(len(names), 16, func(i int) error { return b.explainRegion(ctx, names[i]) }); err != nil {
		b.errorf("explain: creating the Regions: %v", err)
		return
	}
	existing := &metav1.PartialObjectMetadataList{}
	existing.SetGroupVersionKind(demov1alpha1.GroupVersion.WithKind("TenantList"))
	if err := b.mgmtAdmin.List(ctx, existing); err != nil {
		b.errorf("explain: listing the Tenants: %v", err)
		return
	}
	n := max(0, explainObjects-len(existing.Items))
	created, err := b.explainObjects(ctx, names, n)
	if err != nil {
		b.errorf("explain: creating %d Tenants: %v", n, err)
		return
	}
	b.r.note("explain: %d Regions and shard Leases and %d Tenants (labelled for them, unclaimed) created in %.0f s besides the suite's %d Tenants (the synced set of %d and the other sets)",
		explainRegions, n, time.Since(start).Seconds(), len(existing.Items), len(b.pairs))

	proxy, err := newCountingProxy(e.mgmt.Config)
	if err != nil {
		b.t.Fatal(err)
	}
	defer proxy.Close()
	kubeconfig := filepath.Join(b.dir, "explain-kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, "management", &rest.Config{Host: proxy.URL}); err != nil {
		b.t.Fatal(err)
	}
	run := func(args ...string) (string, int, time.Duration, int64, error) {
		cache, err := os.MkdirTemp(b.dir, "plugin-cache-")
		if err != nil {
			return "", 0, 0, 0, err
		}
		cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", cache}, args...)...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		before := proxy.requests.Load()
		t0 := time.Now()
		err = cmd.Run()
		took, requests := time.Since(t0), proxy.requests.Load()-before
		code := 0
		if exit := (&exec.ExitError{}); errors.As(err, &exit) {
			code, err = exit.ExitCode(), nil
		}
		if code != 0 && code != 2 {
			err = fmt.Errorf("exit code %d: %s", code, testenv.Tail(errOut.String(), 500))
		}
		return out.String(), code, took, requests, err
	}

	type answer struct {
		ref, want string // want: the verdict explain must give
	}
	var answers []answer
	for i := range explainAnswers / 2 {
		if len(b.pairs) == 0 {
			break
		}
		p := b.pairs[i*len(b.pairs)/(explainAnswers/2)]
		answers = append(answers, answer{ref: p.remote.Namespace + "/" + p.remote.Name, want: "Synced"})
	}
	for i := range explainAnswers - len(answers) {
		if len(created) == 0 {
			break
		}
		answers = append(answers, answer{ref: created[i*len(created)/explainAnswers].String(), want: "NotClaimed"})
	}
	var times []time.Duration
	var requests []int64
	for _, a := range answers {
		ns, name, _ := strings.Cut(a.ref, "/")
		out, code, took, reqs, err := run("explain", "tenant/"+name, "-n", ns, "-o", "json")
		if err == nil && code != 0 {
			err = fmt.Errorf("exit code %d", code)
		}
		var got struct{ Verdict string }
		if err == nil {
			err = json.Unmarshal([]byte(out), &got)
		}
		if err == nil && got.Verdict != a.want {
			err = fmt.Errorf("verdict %q, want %q", got.Verdict, a.want)
		}
		if err != nil {
			b.errorf("explain tenant/%s -n %s: %v", name, ns, err)
			return
		}
		times = append(times, took)
		requests = append(requests, reqs)
	}
	if len(times) == 0 {
		b.errorf("explain: no object to explain")
		return
	}
	slices.Sort(times)
	slices.Sort(requests)
	p50, worst := times[(len(times)-1)/2], times[len(times)-1]
	b.r.add(fmt.Sprintf("kubectl regionsync explain at %d Regions and %d Tenants (p50 / max wall time of %d answers; requests per answer)",
		explainRegions+2, len(existing.Items)+n, len(times)),
		fmt.Sprintf("%s / %s; %d–%d requests", ms(p50), ms(worst), requests[0], requests[len(requests)-1]), "-", "-", target("explain-wall-time").RowText(),
		verdict(target("explain-wall-time").MetDuration(worst)))
	for _, cmd := range []string{"status", "doctor"} {
		out, code, took, reqs, err := run(cmd)
		if err == nil && cmd == "status" && code != 0 {
			err = fmt.Errorf("exit code %d", code)
		}
		if last := explainRegionName(explainRegions - 1); err == nil && cmd == "status" && !strings.Contains(out, last) {
			err = fmt.Errorf("region %s missing from the table", last)
		}
		if err != nil {
			b.errorf("%s: %v", cmd, err)
			continue
		}
		said := fmt.Sprintf("%d lines of output", strings.Count(out, "\n"))
		if cmd == "doctor" { // what it found, in its own words
			said = strings.Join(strings.Fields(testenv.Tail(out, 600)), " ")
		}
		b.r.note("explain: kubectl regionsync %s on the same management: %s, %d requests, exit code %d: %s", cmd, ms(took), reqs, code, said)
	}
	b.r.note("explain: each answer is a process of the built plugin with a fresh discovery cache (its discovery requests included), through a counting proxy on the same machine; verdicts checked (Synced on the synced set, NotClaimed on the created objects)")
}

// explainRegion creates a Region with a Ready status and its shard Lease held and renewed now, as
// a live agent would have written them.
func (b *suite) explainRegion(ctx context.Context, name string) error {
	def, err := json.Marshal(shard.Definition{Region: name, RemoteResourceSuffix: "-" + name, LabelSelector: regionsyncv1alpha1.RegionLabel + "=" + name,
		Kinds: []string{"Tenant.demo.regionsync.dev"}})
	if err != nil {
		return err
	}
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetspec.DefaultManagementNamespace, Name: claim.LeaseName(name),
			Labels: map[string]string{claim.LeaseLabel: "true", explainLabel: "true"},
			Annotations: map[string]string{claim.DefinitionAnnotation: string(def), claim.StateAnnotation: claim.StateSyncing,
				claim.HolderAnnotation: name + "-agent-0", claim.RegisteredAnnotation: now.UTC().Format(time.RFC3339Nano)}},
		// Held for the figure's length: no agent renews it.
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name + "-agent-0"), LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &now, AcquireTime: &now},
	}
	if err := b.mgmtAdmin.Create(ctx, lease); err != nil {
		return err
	}
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{explainLabel: "true"}}}
	if err := b.mgmtAdmin.Create(ctx, r); err != nil {
		return err
	}
	r.Status = regionsyncv1alpha1.RegionStatus{
		Conditions: []metav1.Condition{{Type: regionsyncv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonReady, LastTransitionTime: metav1.Now()}},
		Leader:     name + "-agent-0", HeartbeatTime: ptr.To(metav1.Now()),
		Resources: []regionsyncv1alpha1.ResourceCounts{{Resource: "Tenant.demo.regionsync.dev", Synced: 10}},
	}
	return b.mgmtAdmin.Status().Update(ctx, r)
}

// explainObjects creates n Tenants, 100 per namespace (tenant-explain-NNN), each labelled for one
// of regions in turn and named with its suffix, and returns their keys.
func (b *suite) explainObjects(ctx context.Context, regions []string, n int) ([]client.ObjectKey, error) {
	const perNS = 100
	if err := parallel((n+perNS-1)/perNS, 16, func(i int) error {
		return b.mgmtAdmin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tenant-explain-%03d", i), Labels: map[string]string{explainLabel: "true"}}})
	}); err != nil {
		return nil, err
	}
	keys := make([]client.ObjectKey, n)
	err := parallel(n, 16, func(i int) error {
		region := regions[i%len(regions)]
		keys[i] = client.ObjectKey{Namespace: fmt.Sprintf("tenant-explain-%03d", i/perNS), Name: fmt.Sprintf("t%05d-%s", i, region)}
		return b.mgmtAdmin.Create(ctx, &demov1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: keys[i].Namespace, Name: keys[i].Name, Labels: map[string]string{regionsyncv1alpha1.RegionLabel: region, explainLabel: "true"}},
			Spec:       demov1alpha1.TenantSpec{DisplayName: "Tenant " + keys[i].Name, Plan: "team", Replicas: 1},
		})
	})
	return keys, err
}

// explainCleanup deletes what the figure created: the Tenants (nothing claimed them: no
// finalizer), the Regions and the shard Leases.
func (b *suite) explainCleanup() {
	ctx, c := b.ctx, b.mgmtAdmin
	nss := &corev1.NamespaceList{}
	sel := client.MatchingLabels{explainLabel: "true"}
	if err := c.List(ctx, nss, sel); err != nil {
		b.r.note("explain: cleaning up: %v", err)
		return
	}
	for _, ns := range nss.Items {
		if err := c.DeleteAllOf(ctx, &demov1alpha1.Tenant{}, client.InNamespace(ns.Name), sel); err != nil {
			b.r.note("explain: cleaning up %s: %v", ns.Name, err)
		}
	}
	if err := c.DeleteAllOf(ctx, &regionsyncv1alpha1.Region{}, sel); err != nil {
		b.r.note("explain: cleaning up the Regions: %v", err)
	}
	if err := c.DeleteAllOf(ctx, &coordinationv1.Lease{}, client.InNamespace(fleetspec.DefaultManagementNamespace), sel); err != nil {
		b.r.note("explain: cleaning up the Leases: %v", err)
	}
}

// countingProxy is a plain-HTTP reverse proxy to an API server that authenticates as cfg and
// counts the requests it forwards.
type countingProxy struct {
	*httptest.Server
	requests atomic.Int64
}

func newCountingProxy(cfg *rest.Config) (*countingProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	p := &countingProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		rp.ServeHTTP(w, r)
	}))
	return p, nil
}
