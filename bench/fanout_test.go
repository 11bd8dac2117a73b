//go:build bench

package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/fleet"
)

// fanOutRegion is the region of the fan-out figure's agent.
const fanOutRegion = "fanout"

// copyWatch records when each namespace first showed a ConfigMap matching a selector.
type copyWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// watchCopies watches ConfigMaps with labels in the region until ctx ends.
func (b *suite) watchCopies(ctx context.Context, labels map[string]string) (*copyWatch, error) {
	w, err := b.localAdmin.Watch(ctx, &corev1.ConfigMapList{}, client.MatchingLabels(labels))
	if err != nil {
		return nil, err
	}
	cw := &copyWatch{seen: map[string]time.Time{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			cw.mu.Lock()
			if _, ok := cw.seen[cm.Namespace]; !ok {
				cw.seen[cm.Namespace] = time.Now()
			}
			cw.mu.Unlock()
		}
	}()
	return cw, nil
}

// wait waits until n namespaces (or namespace ns, when set) have a copy and returns when the
// last of them got it.
func (cw *copyWatch) wait(n int, ns string, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		cw.mu.Lock()
		var last time.Time
		done := false
		if ns != "" {
			last, done = cw.seen[ns]
		} else if len(cw.seen) >= n {
			done = true
			for _, t := range cw.seen {
				if t.After(last) {
					last = t
				}
			}
		}
		cw.mu.Unlock()
		if done {
			return last, true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}, false
}

// fanOutRBAC is the region RBAC a kind that fans out needs (docs/operations/install.md#rbac-for-namespace-fan-out),
// granted to the agent's ServiceAccount: the figure's agent runs with exactly it.
func fanOutRBAC() []client.Object {
	const name = "regionsync-agent-fanout"
	return []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: fleet.AgentServiceAccount, Namespace: fleet.AgentNamespace}}},
	}
}

// writeFanOutConfig writes the fan-out agent's configuration file: on management it acts as an
// administrator (the figure measures the region side; the shipped management roles cover the
// shipped kinds only).
func (e *env) writeFanOutConfig(cfg *config.AgentConfig) (string, error) {
	kc, err := e.mgmt.WriteImpersonatingKubeconfig(cfg.Region+"-admin-kubeconfig", "regionsync-bench-"+cfg.Region, "system:masters")
	if err != nil {
		return "", err
	}
	return e.f.WriteAgentConfig(cfg, kc)
}

// fanOut measures namespace fan-out: one ConfigMap into n namespaces by one agent (its own
// process, the agent's ServiceAccount with the fan-out RBAC), against the plain client writing the
// n copies itself: time until every copy exists, writes per namespace, time until a namespace
// created later has its copy, writes at rest, and the agent's heap per copy.
func (b *suite) fanOut() {
	n := b.p.Sizes[len(b.p.Sizes)-1]
	const label = "bench-fanout"
	keys := shard.NewKeys(agentconfig.Effective(b.e.mainConfig).AnnotationDomain)
	for _, o := range fanOutRBAC() {
		if err := b.localAdmin.Create(b.ctx, o); err != nil {
			b.errorf("fan-out: RBAC: %v", err)
			return
		}
	}
	nss := make([]string, n)
	for i := range nss {
		nss[i] = fmt.Sprintf("fan-%04d", i)
	}
	if err := parallel(n, 8, func(i int) error {
		return b.localAdmin.Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nss[i], Labels: map[string]string{label: "yes"}}})
	}); err != nil {
		b.errorf("fan-out: namespaces: %v", err)
		return
	}
	// Baseline: the plain client writes the n copies itself.
	l0, err := b.localM.read(b.ctx)
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	start := time.Now()
	if err := parallel(n, b.concurrency, func(i int) error {
		return b.plainLocal.Create(b.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nss[i], Name: "plain"}, Data: fanOutData()})
	}); err != nil {
		b.errorf("fan-out: plain client: %v", err)
		return
	}
	plain := time.Since(start)
	l1, err := b.localM.read(b.ctx)
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	plainWrites := diff(l0, l1).count(configMapWrites) / float64(n)

	// The agent: ConfigMaps of the wide source namespace fan out to every namespace.
	src := "fan-source"
	if err := b.mgmtAdmin.Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: src}}); err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	cfg, err := cloneConfig(b.e.mainConfig)
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	cfg.Region = fanOutRegion
	cfg.Shard = fleetspec.Shard{RemoteResourceSuffix: "-" + fanOutRegion, NamespacePrefix: "fan-"}
	cfg.Resources = []fleetspec.Resource{{Version: "v1", Kind: "ConfigMap", Concurrency: b.concurrency,
		FanOut: &fleetspec.FanOut{Enabled: true, WideSourceNamespaces: []string{src}}}}
	cfgPath, err := b.e.writeFanOutConfig(cfg)
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	agent, err := b.e.startAgent(fanOutRegion+"-replica-0", cfgPath)
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	defer agent.Stop(syscall.SIGTERM)
	if err := waitPprof(b.ctx, agent, time.Minute); err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	for deadline := time.Now().Add(2 * time.Minute); b.e.holder(b.ctx, fanOutRegion) == ""; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) || !agent.Alive() {
			b.errorf("fan-out: the agent never claimed its shard (log %s)", agent.Log)
			return
		}
	}
	time.Sleep(5 * time.Second) // caches warm, the claim's first pass over (nothing to do)
	h0, err := liveHeap(b.ctx, agent.Pprof)
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	cw, err := b.watchCopies(ctx, map[string]string{keys.Region: fanOutRegion})
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	l0, err = b.localM.read(b.ctx)
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	start = time.Now()
	source := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "ca-" + fanOutRegion,
		Annotations: map[string]string{keys.FanOutNamespaces: label + "=yes"}}, Data: fanOutData()}
	if err := b.mgmtAdmin.Create(b.ctx, source); err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	last, ok := cw.wait(n, "", 10*time.Minute)
	if !ok {
		b.errorf("fan-out: not every namespace got its copy within 10 minutes (log %s)", agent.Log)
		return
	}
	all := last.Sub(start)
	time.Sleep(5 * time.Second) // the pass's last writes and events
	l1, err = b.localM.read(b.ctx)
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	writes := diff(l0, l1).count(configMapWrites) / float64(n)
	b.r.add(fmt.Sprintf("fan-out: one object into %d namespaces, until every copy exists", n), ms(all), ms(plain)+" (plain client writing the copies)",
		fmt.Sprintf("%.1f×", all.Seconds()/plain.Seconds()), target("fanout-time").RowText(), "")
	b.r.add("fan-out: region writes per namespace (ConfigMap creates/updates/deletes)", fmt.Sprintf("%.2f", writes), fmt.Sprintf("%.2f", plainWrites),
		fmt.Sprintf("%.2f", writes/plainWrites), target("fanout-writes-per-namespace").RowText(), verdict(target("fanout-writes-per-namespace").Met(round2(writes))))
	if h1, err := liveHeap(b.ctx, agent.Pprof); err == nil {
		b.r.add(fmt.Sprintf("fan-out: agent heap per copy (live heap after GC, %d copies)", n), kb(float64(int64(h1)-int64(h0))/float64(n)), "-", "-", target("fanout-heap-per-copy").RowText(), "")
	}

	// A namespace created later gets its copy: five in turn, against the plain client's one create.
	var later, one []time.Duration
	for i := range 5 {
		ns := fmt.Sprintf("fan-later-%d", i)
		start := time.Now()
		if err := b.localAdmin.Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{label: "yes"}}}); err != nil {
			b.errorf("fan-out: %v", err)
			return
		}
		at, ok := cw.wait(0, ns, time.Minute)
		if !ok {
			b.errorf("fan-out: namespace %s got no copy within a minute", ns)
			return
		}
		later = append(later, at.Sub(start))
		start = time.Now()
		if err := b.plainLocal.Create(b.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}, Data: fanOutData()}); err != nil {
			b.errorf("fan-out: %v", err)
			return
		}
		one = append(one, time.Since(start))
	}
	b.r.add("fan-out: a namespace created later, until its copy exists (median of 5)", ms(median(later)), ms(median(one))+" (plain client: one create)",
		fmt.Sprintf("%.1f×", median(later).Seconds()/median(one).Seconds()), target("fanout-namespace-later").RowText(), "")

	// At rest: no write on either cluster for the fanned-out object, once the report of the
	// namespaces created later is on management (the agent writes a fan-out report at most once
	// per FanOutReportInterval, a change within it when it ends).
	time.Sleep(syncer.FanOutReportInterval + 5*time.Second)
	m0, l0, err := b.scrapeBoth()
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	time.Sleep(b.p.Rest)
	m1, l1, err := b.scrapeBoth()
	if err != nil {
		b.errorf("fan-out: %v", err)
		return
	}
	wm, wl := diff(m0, m1).count(configMapWrites), diff(l0, l1).count(configMapWrites)
	b.r.add(fmt.Sprintf("fan-out: writes at rest, %d copies, %s (ConfigMap writes management / region)", n+5, b.p.Rest),
		fmt.Sprintf("%.0f / %.0f", wm, wl), "0", "-", target("fanout-writes-at-rest").RowText(), verdict(target("fanout-writes-at-rest").Met(wm) && target("fanout-writes-at-rest").Met(wl)))
	b.r.note("fan-out: the agent (region %s) runs as the agent's ServiceAccount with the fan-out RBAC of docs/operations/install.md, local client at its default rate limit; the plain client has none, %d workers", fanOutRegion, b.concurrency)
}

// configMapWrites matches writes to ConfigMaps.
func configMapWrites(k reqKey) bool { return isWrite(k) && k.Resource == "configmaps" && k.Group == "" }

// fanOutData is the fanned-out ConfigMap's data: a CA bundle's size.
func fanOutData() map[string]string {
	b := make([]byte, 2048)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return map[string]string{"ca.crt": string(b)}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
