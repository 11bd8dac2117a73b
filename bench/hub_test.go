//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The hub figures: bin/hub (as startHubs runs it) places one Distribution (a template of the demo
// Tenant, placed by a region selector) in BENCH_HUB_REGIONS simulated regions (the fleet harness),
// and each template change is timed until every region's per-region object on management is
// current (the agent's generation annotations name its generation), against a plain client
// writing the same regions' objects itself in the same run. Then BENCH_HUB_DISTRIBUTIONS
// Distributions over the same regions (their agents stopped: only the per-region objects are
// written): the hub's live heap per per-region object and the time until every Distribution is
// Applied.

const (
	// hubNamespace holds the changed Distribution, the plain client's objects of the same
	// regions, and nothing else (the figure's watch is of this namespace).
	hubNamespace = "tenant-hub"
	// hubScaleNamespace holds the scale figure's Distributions.
	hubScaleNamespace = "tenant-hubscale"
	hubDistName       = "storefront"
	hubPlainName      = "plain"
	// hubRegionLabel on a Region places the figure's Distributions there.
	hubRegionLabel = "bench.regionsync.dev/hub"
)

// hubRegionName names the i-th region of the hub figures (fixed width: no suffix ends another).
func hubRegionName(i int) string { return fmt.Sprintf("hub-%03d", i) }

// hubCopy is what the figure last saw of one per-region object on management.
type hubCopy struct {
	display string
	current bool
	// since is when it was first seen current with this display name.
	since time.Time
}

// hubRecorder keeps the latest state of every Tenant in hubNamespace on management.
type hubRecorder struct {
	keys shard.Keys
	mu   sync.Mutex
	objs map[string]hubCopy
}

func (r *hubRecorder) on(obj any) {
	t, ok := obj.(*demov1alpha1.Tenant)
	if !ok {
		return
	}
	now := time.Now()
	c := hubCopy{display: t.Spec.DisplayName, current: t.Annotations[r.keys.RemoteGeneration] == strconv.FormatInt(t.Generation, 10)}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.objs[t.Name]
	switch {
	case !c.current:
	case seen && prev.current && prev.display == c.display:
		c.since = prev.since
	default:
		c.since = now
	}
	r.objs[t.Name] = c
}

// allCurrent reports whether every named object is current with display name want, and when the
// last of them became so.
func (r *hubRecorder) allCurrent(names []string, want string) (bool, time.Time, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	n := 0
	for _, name := range names {
		c := r.objs[name]
		if !c.current || c.display != want {
			continue
		}
		n++
		if c.since.After(last) {
			last = c.since
		}
	}
	return n == len(names), last, n
}

// waitCurrent waits until every named object is current with display name want and returns when
// the last one became so.
func (r *hubRecorder) waitCurrent(ctx context.Context, names []string, want string, timeout time.Duration) (time.Time, error) {
	var at time.Time
	var n int
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var ok bool
		ok, at, n = r.allCurrent(names, want)
		return ok, nil
	})
	if err != nil {
		return at, fmt.Errorf("%d of %d objects current with %q after %s", n, len(names), want, timeout)
	}
	return at, nil
}

// hubDistribution is a Distribution of the demo Tenant (display name display) placed in every
// Region labelled hubRegionLabel, written as the namespace's ServiceAccount.
func hubDistribution(ns, name, display string) *regionsyncv1alpha1.Distribution {
	return &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template: hubTemplate(display),
			Placement: regionsyncv1alpha1.Placement{RegionSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{hubRegionLabel: "true"},
			}},
			ServiceAccountName: rolloutSA,
		},
	}
}

func hubTemplate(display string) runtime.RawExtension {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": demov1alpha1.GroupVersion.String(), "kind": "Tenant",
		"spec": map[string]any{"displayName": display, "plan": planFirst},
	})
	return runtime.RawExtension{Raw: raw}
}

// hubWindow is one kind of change's measurements.
type hubWindow struct {
	took  []time.Duration
	delta []delta   // management's requests over each change, until its writes (status included) landed
	db    []float64 // the growth of management's etcd database file over each change
}

func (w *hubWindow) writes(match func(reqKey) bool) float64 {
	var n float64
	for _, d := range w.delta {
		n += d.count(match)
	}
	return n / float64(len(w.delta))
}

// summary lists the writes per change by series.
func (w *hubWindow) summary() string {
	sum := delta{requests: map[reqKey]float64{}}
	for _, d := range w.delta {
		for k, v := range d.requests {
			sum.requests[k] += v / float64(len(w.delta))
		}
	}
	var parts []string
	for k, v := range sum.requests {
		if isWrite(k) && v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// dbGrowth is the growth of management's etcd database file over the changes, per change.
func (w *hubWindow) dbGrowth() float64 {
	var n float64
	for _, g := range w.db {
		n += g
	}
	return n / float64(len(w.db))
}

// hubFigures is the hub figure.
func (b *suite) hubFigures() {
	for _, a := range b.agents { // the main region's agents have nothing to do here
		a.Stop(syscall.SIGTERM)
	}
	n := b.p.HubRegions
	names := make([]string, n)
	for i := range names {
		names[i] = hubRegionName(i)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	log, err := fleetLogger(filepath.Join(b.dir, "fleet.log"))
	if err != nil {
		b.errorf("hub: %v", err)
		return
	}
	start := time.Now()
	cfgs := make(map[string]*config.AgentConfig, n)
	var mu sync.Mutex
	err = forEach(n, 8, func(i int) error {
		cfg, err := b.e.deriveRegionWith(ctx, names[i], "-"+names[i])
		if err != nil {
			return err
		}
		cfg.Management.CredentialRenewal = config.CredentialRenewalConfig{} // it impersonates: no token to renew
		region := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}
		if err := b.mgmtAdmin.Patch(ctx, region, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+hubRegionLabel+`":"true"}}}`))); err != nil {
			return fmt.Errorf("labelling Region %s: %w", names[i], err)
		}
		mu.Lock()
		cfgs[names[i]] = cfg
		mu.Unlock()
		return nil
	})
	if err == nil {
		err = b.placerNamespace(ctx, hubNamespace, names)
	}
	if err == nil {
		err = b.placerNamespace(ctx, hubScaleNamespace, nil)
	}
	if err != nil {
		b.errorf("hub: %v", err)
		return
	}
	rec := &hubRecorder{keys: shard.NewKeys(agentconfig.Effective(b.e.mainConfig).AnnotationDomain), objs: map[string]hubCopy{}}
	if err := b.watchHubNamespace(ctx, rec); err != nil {
		b.errorf("hub: watching management: %v", err)
		return
	}
	f, err := b.startSimFleet(names, cfgs, log.WithName("hub"))
	if err != nil {
		b.errorf("hub: %v", err)
		return
	}
	fleetStopped := false
	defer func() {
		if !fleetStopped {
			f.stop()
		}
	}()
	if _, err := f.waitSynced(ctx, 0, 3*time.Minute); err != nil {
		b.errorf("hub: %v", err)
		return
	}
	if err := b.waitRegionsLive(ctx, names, 2*time.Minute); err != nil {
		b.errorf("hub: %v", err)
		return
	}
	hubs, err := b.startHubs(ctx, "hub")
	defer func() {
		for _, h := range hubs {
			h.Stop(syscall.SIGTERM)
		}
	}()
	if err != nil {
		b.errorf("hub: the hub: %v", err)
		return
	}
	b.r.note("hub: %d regions registered and labelled %s=true (shard.localNamespaceSuffix -<region>), their syncers started, bin/hub as %d process(es) with deploy/kustomize/hub's configuration, in %s",
		n, hubRegionLabel, len(hubs), time.Since(start).Round(time.Second))
	if !b.hubChanges(ctx, rec, names) {
		return
	}
	f.stop() // the scale figure writes per-region objects only
	fleetStopped = true
	b.hubScale(ctx, names, hubs)
}

// watchHubNamespace records every Tenant of hubNamespace as management holds it, until ctx ends.
func (b *suite) watchHubNamespace(ctx context.Context, rec *hubRecorder) error {
	cfg := rest.CopyConfig(b.e.mgmt.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := cache.New(cfg, cache.Options{Scheme: testenv.Scheme(), DefaultNamespaces: map[string]cache.Config{hubNamespace: {}}})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, &demov1alpha1.Tenant{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(handler(rec.on)); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the cache of management did not sync")
	}
	return nil
}

// hubChanges places the Distribution and creates the plain client's objects, then changes each
// BENCH_HUB_CHANGES times (hub, plain client one request at a time, plain client with the
// suite's workers, in turn) and measures each change until every region's object is current,
// management's writes per change, and the writes at rest.
func (b *suite) hubChanges(ctx context.Context, rec *hubRecorder, names []string) bool {
	n := len(names)
	distNames, plainNames := make([]string, n), make([]string, n)
	for i, r := range names {
		distNames[i], plainNames[i] = hubDistName+"-"+r, hubPlainName+"-"+r
	}
	// The plain client writes as the ServiceAccount the hub writes as.
	cfg := b.e.mgmt.ImpersonatingConfig(testenv.ServiceAccountUser(hubNamespace, rolloutSA), "system:serviceaccounts", "system:serviceaccounts:"+hubNamespace)
	cfg.QPS, cfg.Burst = -1, 0
	plain, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		b.errorf("hub: %v", err)
		return false
	}
	applyPlain := func(display string, workers int) error {
		return forEach(n, workers, func(i int) error {
			t := &demov1alpha1.Tenant{
				TypeMeta:   metav1.TypeMeta{APIVersion: demov1alpha1.GroupVersion.String(), Kind: "Tenant"},
				ObjectMeta: metav1.ObjectMeta{Namespace: hubNamespace, Name: plainNames[i], Labels: map[string]string{regionsyncv1alpha1.RegionLabel: names[i]}},
				Spec:       demov1alpha1.TenantSpec{DisplayName: display, Plan: planFirst},
			}
			return plain.Patch(ctx, t, client.Apply, client.FieldOwner("bench-plain"), client.ForceOwnership) //nolint:staticcheck // the plain client's server-side apply
		})
	}
	timeout := 2*time.Minute + time.Duration(n)*time.Second
	t0 := time.Now()
	if err := b.mgmtAdmin.Create(ctx, hubDistribution(hubNamespace, hubDistName, "initial")); err != nil {
		b.errorf("hub: creating the Distribution: %v", err)
		return false
	}
	at, err := rec.waitCurrent(ctx, distNames, "initial", timeout)
	if err != nil {
		b.errorf("hub: placing the Distribution: %v", err)
		return false
	}
	placed := at.Sub(t0)
	t0 = time.Now()
	if err := applyPlain("initial", b.concurrency); err != nil {
		b.errorf("hub: the plain client: %v", err)
		return false
	}
	if at, err = rec.waitCurrent(ctx, plainNames, "initial", timeout); err != nil {
		b.errorf("hub: the plain client's objects: %v", err)
		return false
	}
	b.r.note("hub: placing the Distribution (creation until all %d regions' objects current): %s; the plain client creating its %d objects (%d workers) until current: %s",
		n, secs(placed), n, b.concurrency, secs(at.Sub(t0)))
	if _, err := b.waitDistStatus(ctx, hubNamespace, hubDistName, n, time.Minute); err != nil {
		b.errorf("hub: %v", err)
		return false
	}
	var hubW, serial, parallel hubWindow
	var statusLag []time.Duration
	measure := func(w *hubWindow, change func() error, objs []string, display string, after func(time.Time) error) bool {
		m0, err := b.mgmtM.read(ctx)
		if err != nil {
			b.errorf("hub: %v", err)
			return false
		}
		t0 := time.Now()
		if err := change(); err != nil {
			b.errorf("hub: change %s: %v", display, err)
			return false
		}
		at, err := rec.waitCurrent(ctx, objs, display, timeout)
		if err != nil {
			b.errorf("hub: change %s: %v", display, err)
			return false
		}
		w.took = append(w.took, at.Sub(t0))
		if after != nil {
			if err := after(t0); err != nil {
				b.errorf("hub: change %s: %v", display, err)
				return false
			}
		}
		time.Sleep(2 * time.Second) // the writes in flight land
		m1, err := b.mgmtM.read(ctx)
		if err != nil {
			b.errorf("hub: %v", err)
			return false
		}
		w.delta, w.db = append(w.delta, diff(m0, m1)), append(w.db, m1.db-m0.db)
		return true
	}
	for i := range b.p.HubChanges {
		display := fmt.Sprintf("change-%d", i)
		if !measure(&hubW, func() error { return b.setHubTemplate(ctx, display) }, distNames, display, func(t0 time.Time) error {
			at, err := b.waitDistStatus(ctx, hubNamespace, hubDistName, n, time.Minute)
			statusLag = append(statusLag, at.Sub(t0))
			return err
		}) {
			return false
		}
		if !measure(&serial, func() error { return applyPlain(display, 1) }, plainNames, display, nil) {
			return false
		}
		if !measure(&parallel, func() error { return applyPlain(display+"-p", b.concurrency) }, plainNames, display+"-p", nil) {
			return false
		}
	}
	p50, p99 := quantile(hubW.took, 0.5), quantile(hubW.took, 0.99)
	s50, s99 := quantile(serial.took, 0.5), quantile(serial.took, 0.99)
	q50, q99 := quantile(parallel.took, 0.5), quantile(parallel.took, 0.99)
	ratio50, ratio99 := p50.Seconds()/s50.Seconds(), p99.Seconds()/s99.Seconds()
	b.r.add(fmt.Sprintf("hub: a template change until all %d regions' objects are current on management, p50 / p99 over %d changes", n, b.p.HubChanges),
		fmt.Sprintf("%s / %s", ms(p50), ms(p99)),
		fmt.Sprintf("plain client, one request at a time: %s / %s", ms(s50), ms(s99)),
		fmt.Sprintf("%.2f / %.2f", ratio50, ratio99), target("hub-template-change").RowText(), verdict(target("hub-template-change").Met(ratio50) && target("hub-template-change").Met(ratio99)))
	b.r.note("hub: the same changes by the plain client with %d workers: p50 / p99 %s / %s (the hub's ratio to it %.2f / %.2f); the Distribution's status reporting all %d current (observedGeneration, counts.current): p50 / p99 %s / %s after the change",
		b.concurrency, ms(q50), ms(q99), p50.Seconds()/q50.Seconds(), p99.Seconds()/q99.Seconds(), n, ms(quantile(statusLag, 0.5)), ms(quantile(statusLag, 0.99)))
	tenantW := func(k reqKey) bool { return isWrite(k) && k.Resource == "tenants" }
	distW := func(k reqKey) bool { return isWrite(k) && k.Resource == "distributions" }
	revW := func(k reqKey) bool { return isWrite(k) && k.Resource == "controllerrevisions" }
	statusW := func(k reqKey) bool { return distW(k) && k.Subresource == "status" }
	ht, hs, hr := hubW.writes(tenantW), hubW.writes(statusW), hubW.writes(revW)
	pt := serial.writes(tenantW)
	b.r.add(fmt.Sprintf("hub: management writes per template change, %d regions: Tenants (the writer's and the agents'); Distribution status; ControllerRevisions", n),
		fmt.Sprintf("%.2f; %.2f; %.2f", ht, hs, hr), fmt.Sprintf("plain client: Tenants %.2f", pt), fmt.Sprintf("%.2f (Tenants)", ht/pt),
		fmt.Sprintf("Tenants %s the plain client's (%d by the writer, 1 per region, + %d by the agents); status and revisions reported", target("hub-writes-per-change").RowText(), n, n), verdict(target("hub-writes-per-change").MetAgainst(ht, pt)))
	b.r.note("hub: management writes per change, by series: hub %s; plain client (one at a time) %s; plain client (%d workers) %s",
		hubW.summary(), serial.summary(), b.concurrency, parallel.summary())
	b.r.note("hub: management's etcd database file (apiserver_storage_size_bytes; it grows in steps, so a coarse figure) grew %s per template change by the hub, %s per change by the plain client",
		kbText(hubW.dbGrowth()), kbText((serial.dbGrowth()+parallel.dbGrowth())/2))
	// At rest: the Distribution, its objects and the plain client's are current; nothing changes.
	time.Sleep(5 * time.Second)
	quiet, err := b.mgmtWindow(b.p.Rest)
	if err != nil {
		b.errorf("hub: %v", err)
		return false
	}
	hubKinds := func(k reqKey) bool { return tenantW(k) || distW(k) || revW(k) }
	atRest := quiet.count(hubKinds)
	b.r.add(fmt.Sprintf("hub at rest, %d regions, %.0f s: management writes to Tenants, Distributions and ControllerRevisions", n, quiet.seconds),
		fmt.Sprintf("%.0f", atRest), "-", "-", target("hub-at-rest").RowText(), verdict(target("hub-at-rest").Met(atRest)))
	b.r.note("hub at rest: every management write over the window: %s (Leases: the hub's leader election and the regions' claims)", quiet.writesSummary())
	return true
}

// setHubTemplate changes the display name of the hub Distribution's template.
func (b *suite) setHubTemplate(ctx context.Context, display string) error {
	return retryOnConflict(ctx, func() error {
		d := &regionsyncv1alpha1.Distribution{}
		if err := b.mgmtAdmin.Get(ctx, types.NamespacedName{Namespace: hubNamespace, Name: hubDistName}, d); err != nil {
			return err
		}
		d.Spec.Template = hubTemplate(display)
		return b.mgmtAdmin.Update(ctx, d)
	})
}

// waitDistStatus waits until the Distribution's status describes its generation with n regions
// current and returns when it saw that.
func (b *suite) waitDistStatus(ctx context.Context, ns, name string, n int, timeout time.Duration) (time.Time, error) {
	d := &regionsyncv1alpha1.Distribution{}
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if err := b.mgmtAdmin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return false, nil
		}
		at = time.Now()
		return d.Status.ObservedGeneration == d.Generation && int(d.Status.Counts.Current) == n, nil
	})
	if err != nil {
		return at, fmt.Errorf("Distribution %s/%s: status not at generation %d with %d current within %s (observed %d, current %d)",
			ns, name, d.Generation, n, timeout, d.Status.ObservedGeneration, d.Status.Counts.Current)
	}
	return at, nil
}

// hubScale creates BENCH_HUB_DISTRIBUTIONS Distributions over the regions (whose agents are
// stopped) and measures the time until every one is Applied and the hub's live heap per
// per-region object.
func (b *suite) hubScale(ctx context.Context, regions []string, hubs []*fleet.Replica) {
	k, n := b.p.HubDistributions, len(regions)
	objects := k * n
	heaps := func() ([]uint64, error) {
		out := make([]uint64, 0, len(hubs))
		for _, h := range hubs {
			v, err := liveHeap(ctx, h.Pprof)
			if err != nil {
				return nil, fmt.Errorf("the live heap of %s: %w", h.Name, err)
			}
			out = append(out, v)
		}
		return out, nil
	}
	h0, err := heaps()
	if err != nil {
		b.errorf("hub scale: %v", err)
		return
	}
	m0, err := b.mgmtM.read(ctx)
	if err != nil {
		b.errorf("hub scale: %v", err)
		return
	}
	t0 := time.Now()
	if err := forEach(k, 8, func(i int) error {
		return b.mgmtAdmin.Create(ctx, hubDistribution(hubScaleNamespace, fmt.Sprintf("scale-%04d", i), fmt.Sprintf("scale %d", i)))
	}); err != nil {
		b.errorf("hub scale: creating the Distributions: %v", err)
		return
	}
	created := time.Since(t0)
	timeout := 5*time.Minute + time.Duration(objects)*20*time.Millisecond
	var applied int
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		list := &regionsyncv1alpha1.DistributionList{}
		if err := b.mgmtAdmin.List(ctx, list, client.InNamespace(hubScaleNamespace)); err != nil {
			return false, nil
		}
		applied = 0
		for _, d := range list.Items {
			c := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied)
			if d.Status.ObservedGeneration == d.Generation && c != nil && c.Status == metav1.ConditionTrue && int(d.Status.Counts.Placed) == n {
				applied++
			}
		}
		return applied == k, nil
	})
	converged := time.Since(t0)
	if err != nil {
		b.errorf("hub scale: %d of %d Distributions Applied with %d regions placed after %s", applied, k, n, timeout)
		return
	}
	time.Sleep(5 * time.Second) // the status writes in flight land
	m1, _ := b.mgmtM.read(ctx)
	h1, err := heaps()
	if err != nil {
		b.errorf("hub scale: %v", err)
		return
	}
	// Both replicas cache the per-region objects (the standby is warm); the larger growth is the
	// leader's, which also keeps what it applied.
	lead, growth := 0, int64(0)
	for i := range hubs {
		if g := int64(h1[i]) - int64(h0[i]); g > growth || i == 0 {
			lead, growth = i, g
		}
	}
	_ = saveHeapProfile(ctx, hubs[lead].Pprof, filepath.Join(b.dir, fmt.Sprintf("heap-hub-%d.pb.gz", objects)))
	per := float64(growth) / float64(objects)
	parts := make([]string, 0, len(hubs))
	for i, h := range hubs {
		parts = append(parts, fmt.Sprintf("%s %s → %s", h.Name, mb(float64(h0[i])), mb(float64(h1[i]))))
	}
	b.r.add(fmt.Sprintf("hub: live heap per per-region object, %d Distributions × %d regions (%d objects)", k, n, objects),
		kbText(per), "-", "-", target("hub-heap-per-object").RowText(), verdict(target("hub-heap-per-object").Met(per/1024)))
	b.r.add(fmt.Sprintf("hub: %d Distributions × %d regions created until all Applied (every region placed)", k, n),
		fmt.Sprintf("%.1f s (%.0f objects/s; creating the Distributions took %.1f s)", converged.Seconds(), float64(objects)/converged.Seconds(), created.Seconds()),
		"-", "-", target("hub-converge").RowText(), "")
	b.r.note("hub scale: the regions' agents stopped (only the per-region objects are written, their currentness is not part of these figures); live heap after GC %s; management answered %s, writes %s; etcd database %s → %s",
		strings.Join(parts, ", "), requestsSince(m0, m1), diff(m0, m1).writesSummary(), mb(m0.db), mb(m1.db))
}
