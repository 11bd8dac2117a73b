//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The rollout figure: bin/hub (the shipped hub overlay's configuration and identity, as many
// processes as its Deployment has replicas) rolls a Distribution's revisions out progressively
// over BENCH_ROLLOUT_REGIONS simulated regions (the fleet harness: each region's syncer in this
// process, one shared regional API server), whose copies the demo tenant operator serves. A good
// spec measures what each wave costs beyond its soak; a bad one (an unknown plan, which the
// operator reports Stalled) how far it gets, how soon the hub halts it, and how soon Rollback puts
// the updated regions back.

// The rollout figure's Distribution and its namespace on management.
const (
	rolloutNamespace = "tenant-rollout"
	rolloutName      = "storefront"
	rolloutSA        = "placer"
	// The plans: the first rollout's, the good change's, and the bad change's (no plan the demo
	// operator serves: it reports the copy Stalled).
	planFirst, planGood, planBad = "free", "team", "diamond"
)

// rolloutRegionName names the i-th region of the rollout figure (fixed width: no suffix ends
// another; other names than the simulated fleet's, whose Regions register no local namespace
// suffix).
func rolloutRegionName(i int) string { return fmt.Sprintf("roll-%02d", i) }

// rolloutLocalNamespace is where region's copy of the Distribution's object lives in the shared
// regional API server: each region's shard ends its local namespaces with the region's name, so
// the 20 copies of one management namespace do not meet.
func rolloutLocalNamespace(region string) string { return rolloutNamespace + "-" + region }

// rolloutRecorder keeps what the figure's watches saw, each stamped on arrival.
type rolloutRecorder struct {
	keys  shard.Keys
	mu    sync.Mutex
	mgmt  []copyObs // per-region objects on management
	local []copyObs // copies in the region
	dist  []distObs
}

func stalledFor(t *demov1alpha1.Tenant) bool {
	c := meta.FindStatusCondition(t.Status.Conditions, tenantoperator.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue
}

func (r *rolloutRecorder) onMgmt(obj any) {
	t, ok := obj.(*demov1alpha1.Tenant)
	if !ok || t.Labels[r.keys.Distribution] != rolloutName {
		return
	}
	o := copyObs{at: time.Now(), region: t.Labels["regionsync.dev/region"], plan: t.Spec.Plan, revision: t.Annotations[r.keys.Revision], stalled: stalledFor(t)}
	r.mu.Lock()
	r.mgmt = append(r.mgmt, o)
	r.mu.Unlock()
}

func (r *rolloutRecorder) onLocal(obj any) {
	t, ok := obj.(*demov1alpha1.Tenant)
	if !ok || t.Name != rolloutName {
		return
	}
	region, ok := strings.CutPrefix(t.Namespace, rolloutNamespace+"-")
	if !ok {
		return
	}
	o := copyObs{at: time.Now(), region: region, plan: t.Spec.Plan, stalled: stalledFor(t) && t.Status.ObservedGeneration == t.Generation}
	r.mu.Lock()
	r.local = append(r.local, o)
	r.mu.Unlock()
}

func (r *rolloutRecorder) onDist(obj any) {
	d, ok := obj.(*regionsyncv1alpha1.Distribution)
	if !ok || d.Name != rolloutName {
		return
	}
	o := distObs{at: time.Now(), halted: meta.IsStatusConditionTrue(d.Status.Conditions, regionsyncv1alpha1.DistributionHalted),
		degraded: meta.IsStatusConditionTrue(d.Status.Conditions, regionsyncv1alpha1.DistributionDegraded)}
	if c := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionProgressing); c != nil {
		o.progressing = c.Reason
	}
	if ro := d.Status.Rollout; ro != nil {
		o.update, o.current, o.wave, o.updated, o.healthy = ro.UpdateRevision, ro.CurrentRevision, ro.Wave, ro.Updated, ro.Healthy
		if ro.Halt != nil {
			o.haltedRevision, o.rolledBack = ro.Halt.Revision, ro.Halt.RolledBack
		}
	}
	r.mu.Lock()
	r.dist = append(r.dist, o)
	r.mu.Unlock()
}

// snapshot copies what was seen so far.
func (r *rolloutRecorder) snapshot() (mgmt, local []copyObs, dist []distObs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]copyObs(nil), r.mgmt...), append([]copyObs(nil), r.local...), append([]distObs(nil), r.dist...)
}

// lastDist is the latest observation of the Distribution (zero before any).
func (r *rolloutRecorder) lastDist() distObs {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.dist) == 0 {
		return distObs{}
	}
	return r.dist[len(r.dist)-1]
}

// handler records an informer's adds and updates.
func handler(record func(any)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{AddFunc: func(o any) { record(o) }, UpdateFunc: func(_, o any) { record(o) }}
}

// rollout is the rollout figure.
func (b *suite) rollout() {
	for _, a := range b.agents { // the main region's agents have nothing to do here
		a.Stop(syscall.SIGTERM)
	}
	n, soak := b.p.RolloutRegions, b.p.RolloutSoak
	names := make([]string, n)
	for i := range names {
		names[i] = rolloutRegionName(i)
	}
	waves := rolloutWaves(names)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	// The regions' logs (controller-runtime's and client-go's too) go to a file, as the fleet's.
	log, err := fleetLogger(filepath.Join(b.dir, "fleet.log"))
	if err != nil {
		b.errorf("rollout: %v", err)
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
		mu.Lock()
		cfgs[names[i]] = cfg
		mu.Unlock()
		return nil
	})
	if err == nil {
		err = b.rolloutNamespace(ctx, names)
	}
	if err != nil {
		b.errorf("rollout: %v", err)
		return
	}
	rec := &rolloutRecorder{keys: shard.NewKeys(agentconfig.Effective(b.e.mainConfig).AnnotationDomain)}
	if err := b.startRolloutOperator(ctx, names, rec); err != nil {
		b.errorf("rollout: the tenant operator: %v", err)
		return
	}
	if err := b.watchRolloutManagement(ctx, rec); err != nil {
		b.errorf("rollout: watching management: %v", err)
		return
	}
	f, err := b.startSimFleet(names, cfgs, log.WithName("rollout"))
	if err != nil {
		b.errorf("rollout: %v", err)
		return
	}
	defer f.stop()
	if _, err := f.waitSynced(ctx, 0, 3*time.Minute); err != nil {
		b.errorf("rollout: %v", err)
		return
	}
	if err := b.waitRegionsLive(ctx, names, 2*time.Minute); err != nil {
		b.errorf("rollout: %v", err)
		return
	}
	hubs, err := b.startHubs(ctx, "rollout")
	defer func() {
		for _, h := range hubs {
			h.Stop(syscall.SIGTERM)
		}
	}()
	if err != nil {
		b.errorf("rollout: the hub: %v", err)
		return
	}
	b.r.note("rollout: %d regions registered (shard.localNamespaceSuffix -<region>: the copies share one regional API server), their syncers started, the demo tenant operator and bin/hub as %d process(es) with deploy/kustomize/hub's configuration, in %s",
		n, len(hubs), time.Since(start).Round(time.Second))

	// The first rollout places the Distribution (no stable revision yet: each wave waits for the
	// previous one).
	t0 := time.Now()
	if err := b.mgmtAdmin.Create(ctx, rolloutDistribution(names, waves, soak)); err != nil {
		b.errorf("rollout: creating the Distribution: %v", err)
		return
	}
	waveTimeout := time.Duration(len(waves)) * (soak + 2*time.Minute)
	first, err := b.waitDist(ctx, rec, t0, waveTimeout, "the first rollout complete", func(o distObs) bool {
		return o.update != "" && o.current == o.update && o.progressing == regionsyncv1alpha1.ReasonRolloutComplete
	})
	if err != nil {
		b.errorf("rollout: %v", err)
		return
	}
	b.r.note("rollout: the first rollout (creation, plan %s) complete in every region %.1f s after the Distribution was created", planFirst, first.at.Sub(t0).Seconds())
	if !b.goodRollout(ctx, rec, names, waves, soak, first.update) {
		return
	}
	b.badRollout(ctx, rec, n, soak)
}

// goodRollout changes the plan to a good one and measures each wave's time beyond the soak.
func (b *suite) goodRollout(ctx context.Context, rec *rolloutRecorder, names []string, waves [][]string, soak time.Duration, prev string) bool {
	m0, l0, err := b.scrapeBoth()
	if err != nil {
		b.errorf("rollout: %v", err)
		return false
	}
	t0 := time.Now()
	if err := b.setPlan(ctx, planGood); err != nil {
		b.errorf("rollout: %v", err)
		return false
	}
	done, err := b.waitDist(ctx, rec, t0, time.Duration(len(waves))*(soak+2*time.Minute), "the good spec's rollout complete", func(o distObs) bool {
		return o.update != prev && o.current == o.update && o.progressing == regionsyncv1alpha1.ReasonRolloutComplete
	})
	if err != nil {
		b.errorf("rollout: %v", err)
		return false
	}
	mgmt, local, _ := rec.snapshot()
	starts, err := waveStarts(mgmt, waves, planGood, t0)
	if err != nil {
		b.errorf("rollout of the good spec: %v", err)
		return false
	}
	if missing := missingRegions(names, regionsEverWith(local, planGood, t0)); len(missing) > 0 {
		b.errorf("rollout of the good spec: complete, but no copy with plan %s seen in %v", planGood, missing)
	}
	over := waveOverheads(starts, done.at, soak)
	worst, parts := time.Duration(0), make([]string, 0, len(over))
	for i, d := range over {
		worst = max(worst, d)
		parts = append(parts, fmt.Sprintf("wave %d: %s", i+1, secs(d)))
	}
	total := done.at.Sub(t0)
	soaks := time.Duration(len(waves)) * soak
	b.r.add(fmt.Sprintf("rollout of a good spec, %d regions in %d waves (%s), soak %s: time per wave beyond the soak, p50 / max; total", len(names), len(waves), waveSizes(waves), soak),
		fmt.Sprintf("%s / %s (%s); total %s", secs(quantile(over, 0.5)), secs(worst), strings.Join(parts, ", "), secs(total)),
		fmt.Sprintf("the soaks alone: %s", secs(soaks)), fmt.Sprintf("%.2f (total)", total.Seconds()/soaks.Seconds()),
		target("rollout-good-wave").RowText()+" per wave", verdict(target("rollout-good-wave").MetDuration(worst)))
	offsets := make([]string, 0, len(starts))
	for i, s := range starts {
		offsets = append(offsets, fmt.Sprintf("wave %d +%.1f s", i+1, s.Sub(t0).Seconds()))
	}
	b.r.note("rollout of the good spec: the spec changed at 0; first region of each wave written with it on management at %s; RolloutComplete seen at +%.1f s",
		strings.Join(offsets, ", "), total.Seconds())
	if m1, l1, err := b.scrapeBoth(); err == nil {
		b.r.note("rollout of the good spec: management answered %s; all management writes %s; the region's writes %s",
			requestsSince(m0, m1), diff(m0, m1).writesSummary(), diff(l0, l1).writesSummary())
	}
	return true
}

// badRollout changes the plan to one the operator cannot serve and measures how far it got, the
// halt after the first health failure, and the rollback.
func (b *suite) badRollout(ctx context.Context, rec *rolloutRecorder, n int, soak time.Duration) {
	prev := rec.lastDist().update
	m0, l0, err := b.scrapeBoth()
	if err != nil {
		b.errorf("rollout: %v", err)
		return
	}
	t0 := time.Now()
	if err := b.setPlan(ctx, planBad); err != nil {
		b.errorf("rollout: %v", err)
		return
	}
	halt, err := b.waitDist(ctx, rec, t0, 3*time.Minute, "Halted=True on the bad spec", func(o distObs) bool {
		return o.halted && o.update != prev && o.haltedRevision == o.update
	})
	if err != nil {
		b.errorf("rollout: %v", err)
		return
	}
	rolledBack, err := b.waitDist(ctx, rec, t0, 3*time.Minute, "the halt rolled back", func(o distObs) bool { return o.rolledBack && o.haltedRevision == halt.update })
	if err != nil {
		b.errorf("rollout: %v", err)
		return
	}
	var back time.Time
	var got []string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		_, local, _ := rec.snapshot()
		got = regionsEverWith(local, planBad, t0)
		if len(got) == 0 {
			return false, nil
		}
		var missing []string
		back, missing = backAfterBad(local, got, t0)
		return len(missing) == 0, nil
	})
	if err != nil {
		b.errorf("rollout of the bad spec: the updated regions %v not all back on plan %s within 3 min", got, planGood)
		return
	}
	time.Sleep(soak + 5*time.Second) // nothing more may reach a region: a later wave would show here
	mgmt, local, dist := rec.snapshot()
	got = regionsEverWith(local, planBad, t0)
	gotMgmt := regionsEverWith(mgmt, planBad, t0)
	failed, ok := firstStalled(mgmt, planBad, t0)
	if !ok {
		b.errorf("rollout of the bad spec: halted, but no Stalled status with plan %s was seen on management", planBad)
		return
	}
	back, missing := backAfterBad(local, got, t0)
	if len(missing) > 0 {
		b.errorf("rollout of the bad spec: %v back on plan %s, then not any more", missing, planGood)
	}
	b.r.add(fmt.Sprintf("rollout of a bad spec (unknown plan, Stalled), %d regions, first wave 1: regions whose copy ever had it (management objects written with it)", n),
		fmt.Sprintf("%d (%d)", len(got), len(gotMgmt)), "-", "-", target("rollout-bad-reach").RowText(), verdict(target("rollout-bad-reach").Met(float64(len(got))) && target("rollout-bad-reach").Met(float64(len(gotMgmt)))))
	toHalt := halt.at.Sub(failed)
	b.r.add("rollout of a bad spec: first health failure (the copy's Stalled status on management) → Halted=True",
		secs(toHalt), "-", "-", target("rollout-bad-halt").RowText(), verdict(target("rollout-bad-halt").MetDuration(toHalt)))
	toBack := back.Sub(halt.at)
	b.r.add("rollout of a bad spec, onFailure Rollback: Halted=True → every updated region's copy back on the previous spec",
		fmt.Sprintf("%s (%d region(s))", secs(toBack), len(got)), "-", "-", target("rollout-bad-rollback").RowText(), verdict(target("rollout-bad-rollback").MetDuration(toBack) && len(missing) == 0))
	degraded := "not seen"
	if o, ok := firstDist(dist, t0, func(o distObs) bool { return o.degraded }); ok {
		degraded = fmt.Sprintf("+%.1f s", o.at.Sub(t0).Seconds())
	}
	b.r.note("rollout of the bad spec: the spec changed at 0; the first copy with it in the region at %s, its Stalled status on management at +%.1f s, Degraded=True at %s, Halted=True at +%.1f s, the halt marked rolled back at +%.1f s, every updated copy back on plan %s at +%.1f s",
		offset(local, planBad, t0), failed.Sub(t0).Seconds(), degraded, halt.at.Sub(t0).Seconds(), rolledBack.at.Sub(t0).Seconds(), planGood, back.Sub(t0).Seconds())
	if m1, l1, err := b.scrapeBoth(); err == nil {
		b.r.note("rollout of the bad spec: management answered %s; all management writes %s; the region's writes %s",
			requestsSince(m0, m1), diff(m0, m1).writesSummary(), diff(l0, l1).writesSummary())
	}
}

// backAfterBad returns when the last of the regions was first seen with the good plan again after
// it had the bad one, and the regions not seen back.
func backAfterBad(local []copyObs, regions []string, from time.Time) (time.Time, []string) {
	var last time.Time
	var missing []string
	for _, r := range regions {
		bad, ok := firstWith(local, []string{r}, planBad, from)
		if !ok {
			missing = append(missing, r)
			continue
		}
		at, missed := allBack(local, []string{r}, planGood, bad)
		if len(missed) > 0 {
			missing = append(missing, r)
			continue
		}
		if at.After(last) {
			last = at
		}
	}
	return last, missing
}

// offset is when the plan was first seen from t0, as "+x s".
func offset(obs []copyObs, plan string, t0 time.Time) string {
	regions := make([]string, 0, len(obs))
	for _, o := range obs {
		regions = append(regions, o.region)
	}
	if at, ok := firstWith(obs, regions, plan, t0); ok {
		return fmt.Sprintf("+%.1f s", at.Sub(t0).Seconds())
	}
	return "never"
}

func missingRegions(want, got []string) []string {
	var out []string
	for _, r := range want {
		found := false
		for _, g := range got {
			found = found || g == r
		}
		if !found {
			out = append(out, r)
		}
	}
	return out
}

func waveSizes(waves [][]string) string {
	parts := make([]string, 0, len(waves))
	for _, w := range waves {
		parts = append(parts, fmt.Sprint(len(w)))
	}
	return strings.Join(parts, "+")
}

// waitDist waits until an observation of the Distribution from from on satisfies ok.
func (b *suite) waitDist(ctx context.Context, rec *rolloutRecorder, from time.Time, timeout time.Duration, what string, ok func(distObs) bool) (distObs, error) {
	var found distObs
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		_, _, dist := rec.snapshot()
		var hit bool
		found, hit = firstDist(dist, from, ok)
		return hit, nil
	})
	if err != nil {
		last := rec.lastDist()
		return found, fmt.Errorf("%s not seen within %s (last status: update %s, current %s, wave %d, progressing %s, halted %v, updated %d, healthy %d)",
			what, timeout, last.update, last.current, last.wave, last.progressing, last.halted, last.updated, last.healthy)
	}
	return found, nil
}

// rolloutDistribution is the figure's Distribution: one Tenant in every region, progressive:
// the named waves but the last (the regions no wave selects are the last), the soak, Rollback.
func rolloutDistribution(regions []string, waves [][]string, soak time.Duration) *regionsyncv1alpha1.Distribution {
	named := make([]regionsyncv1alpha1.RolloutWave, 0, len(waves)-1)
	for i, w := range waves[:len(waves)-1] {
		named = append(named, regionsyncv1alpha1.RolloutWave{Name: []string{"canary", "early"}[min(i, 1)], Regions: w})
	}
	return &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: rolloutNamespace, Name: rolloutName},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template:           tenantTemplate(planFirst),
			Placement:          regionsyncv1alpha1.Placement{Regions: regions},
			ServiceAccountName: rolloutSA,
			Strategy: regionsyncv1alpha1.RolloutStrategy{
				Type: regionsyncv1alpha1.RolloutProgressive, Waves: named,
				Soak: &metav1.Duration{Duration: soak}, OnFailure: regionsyncv1alpha1.FailureRollback,
			},
		},
	}
}

func tenantTemplate(plan string) runtime.RawExtension {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": demov1alpha1.GroupVersion.String(), "kind": "Tenant",
		"spec": map[string]any{"displayName": "Storefront", "plan": plan},
	})
	return runtime.RawExtension{Raw: raw}
}

// setPlan changes the plan of the Distribution's template (a new revision).
func (b *suite) setPlan(ctx context.Context, plan string) error {
	return retryOnConflict(ctx, func() error {
		d := &regionsyncv1alpha1.Distribution{}
		if err := b.mgmtAdmin.Get(ctx, types.NamespacedName{Namespace: rolloutNamespace, Name: rolloutName}, d); err != nil {
			return err
		}
		d.Spec.Template = tenantTemplate(plan)
		return b.mgmtAdmin.Update(ctx, d)
	})
}

func retryOnConflict(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if !apierrors.IsConflict(err) || ctx.Err() != nil {
			return err
		}
	}
}

// rolloutNamespace creates the Distribution's namespace on management: the ServiceAccount the hub
// writes as (allowed to write Tenants there), the hub's impersonation and revisions binding
// (docs/operations/hub.md), and the Secrets each region uploads its tenant token to.
func (b *suite) rolloutNamespace(ctx context.Context, regions []string) error {
	return b.placerNamespace(ctx, rolloutNamespace, regions)
}

// placerNamespace creates namespace ns on management as rolloutNamespace describes.
func (b *suite) placerNamespace(ctx context.Context, ns string, regions []string) error {
	objs := make([]client.Object, 0, 5+len(regions))
	objs = append(objs,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rolloutSA}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rolloutSA}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{demov1alpha1.GroupVersion.Group}, Resources: []string{"tenants"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rolloutSA},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: rolloutSA},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: rolloutSA}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regionsync-hub-impersonate"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "regionsync-hub-impersonate"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: fleet.AgentNamespace, Name: fleet.HubServiceAccount}}},
	)
	for _, r := range regions {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenantoperator.TokenSecretName + "-" + r}})
	}
	for _, o := range objs {
		if err := b.mgmtAdmin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// startRolloutOperator runs the demo tenant operator on the regional API server over the rollout
// regions' namespaces (the other figures' copies are not its business: their regions run no
// operator) until ctx ends, and records every copy it sees.
func (b *suite) startRolloutOperator(ctx context.Context, regions []string, rec *rolloutRecorder) error {
	namespaces := map[string]cache.Config{}
	for _, r := range regions {
		namespaces[rolloutLocalNamespace(r)] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(b.e.reg.Config, ctrl.Options{
		Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      cache.Options{DefaultNamespaces: namespaces},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	op := &tenantoperator.Reconciler{Client: mgr.GetClient(), Region: "bench"}
	if err := op.SetupWithManager(mgr); err != nil {
		return err
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &demov1alpha1.Tenant{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(handler(rec.onLocal)); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the operator's cache did not sync")
	}
	return nil
}

// watchRolloutManagement records the Distribution and its per-region objects as management
// holds them, until ctx ends.
func (b *suite) watchRolloutManagement(ctx context.Context, rec *rolloutRecorder) error {
	cfg := rest.CopyConfig(b.e.mgmt.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := cache.New(cfg, cache.Options{Scheme: testenv.Scheme(), DefaultNamespaces: map[string]cache.Config{rolloutNamespace: {}}})
	if err != nil {
		return err
	}
	for obj, record := range map[client.Object]func(any){&demov1alpha1.Tenant{}: rec.onMgmt, &regionsyncv1alpha1.Distribution{}: rec.onDist} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(handler(record)); err != nil {
			return err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the cache of management did not sync")
	}
	return nil
}

// waitRegionsLive waits until every region reported Ready (its agent's first pass; the hub's
// rollouts gate on it).
func (b *suite) waitRegionsLive(ctx context.Context, regions []string, timeout time.Duration) error {
	var notLive []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		notLive = nil
		for _, name := range regions {
			r := &regionsyncv1alpha1.Region{}
			if err := b.mgmtAdmin.Get(ctx, types.NamespacedName{Name: name}, r); err != nil || !hub.RegionLive(r) {
				notLive = append(notLive, name)
			}
		}
		return len(notLive) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("regions not Ready within %s: %v", timeout, notLive)
	}
	return nil
}

// startHubs builds bin/hub and starts the shipped hub overlay on management
// (fleet.LocalFleet.StartHub: its ServiceAccount, RBAC and admission policy applied, the
// Deployment left unscheduled, as many hub processes as it has replicas, each with the overlay's
// configuration, the hub ServiceAccount's own token and pprof on a local port). figure names the
// processes and their logs. The fleet stops them with the agents if the suite ends early.
func (b *suite) startHubs(ctx context.Context, figure string) ([]*fleet.Replica, error) {
	bin, err := testenv.BuildHub(b.dir)
	if err != nil {
		return nil, err
	}
	return b.e.f.StartHub(ctx, fleet.HubOptions{Binary: bin, Overlay: fleet.ShippedHub, Name: figure + "-hub"})
}
