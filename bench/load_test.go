//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
)

// pair is a management object and the name of its copy in the region.
type pair struct{ remote, local types.NamespacedName }

// side of a watch.
type side string

const (
	sideMgmt  side = "m"
	sideLocal side = "l"
)

// probe is one expected observation: a value seen on an object by a watch.
type probe struct {
	t0      time.Time
	arrived time.Time
	done    chan struct{}
}

func (p *probe) latency() (time.Duration, bool) {
	select {
	case <-p.done:
		return p.arrived.Sub(p.t0), true
	default:
		return 0, false
	}
}

func (p *probe) wait(timeout time.Duration) (time.Duration, bool) {
	select {
	case <-p.done:
	case <-time.After(timeout):
	}
	return p.latency()
}

// relayItem is a change the plain relay (the latency baseline) copies to the other side.
type relayItem struct {
	spec  bool
	key   types.NamespacedName // the object where the change was seen
	value string
}

// tracker receives every Tenant event of both clusters (one watch each, admin) and timestamps
// them on arrival: initial-sync progress, probes, the plain relay.
type tracker struct {
	keys shard.Keys

	mu           sync.Mutex
	countRegion  string
	annotated    map[types.NamespacedName]bool
	count, total int
	countDone    chan struct{}
	countAt      time.Time
	milestones   []milestone
	localSeen    []types.NamespacedName
	localSeenSet map[types.NamespacedName]bool
	pending      map[string]map[string]*probe

	relayOn     atomic.Bool
	relayPrefix string
	relayed     map[string]string
	relayCh     chan relayItem
}

type milestone struct {
	at int
	fn func()
}

func newTracker() *tracker {
	return &tracker{keys: shard.NewKeys(fleetspec.DefaultAnnotationDomain), pending: map[string]map[string]*probe{},
		relayed: map[string]string{}, relayCh: make(chan relayItem, 100000)}
}

// startCount counts region's management objects that get generation annotations, until total;
// milestones run (in their own goroutine) when the count reaches them.
func (t *tracker) startCount(region string, total int, ms ...milestone) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.countRegion, t.total, t.count = region, total, 0
	t.annotated = map[types.NamespacedName]bool{}
	t.localSeen, t.localSeenSet = nil, map[types.NamespacedName]bool{}
	t.countDone, t.countAt, t.milestones = make(chan struct{}), time.Time{}, ms
	return t.countDone
}

func (t *tracker) progress() (int, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count, t.countAt
}

// randomSynced is a local copy (of the counted region) the region's watch has seen.
func (t *tracker) randomSynced() (types.NamespacedName, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.localSeen) == 0 {
		return types.NamespacedName{}, false
	}
	return t.localSeen[rand.IntN(len(t.localSeen))], true
}

func probeKey(s side, k types.NamespacedName) string { return string(s) + "/" + k.String() }

// expect registers a probe: value seen on the object k of side s (spec.displayName in the
// region, status.endpoint on management).
func (t *tracker) expect(s side, k types.NamespacedName, value string) *probe {
	p := &probe{t0: time.Now(), done: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.pending[probeKey(s, k)]
	if m == nil {
		m = map[string]*probe{}
		t.pending[probeKey(s, k)] = m
	}
	m[value] = p
	return p
}

func (t *tracker) cancel(s side, k types.NamespacedName, value string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending[probeKey(s, k)], value)
}

func (t *tracker) handle(s side, o *demov1alpha1.Tenant, at time.Time) {
	k := types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
	value := o.Status.Endpoint
	if s == sideLocal {
		value = o.Spec.DisplayName
	}
	var run []func()
	t.mu.Lock()
	if m := t.pending[probeKey(s, k)]; m != nil {
		if p := m[value]; p != nil {
			p.arrived = at
			close(p.done)
			delete(m, value)
		}
	}
	switch {
	case s == sideMgmt && t.countRegion != "" && o.Labels[regionsyncv1alpha1.RegionLabel] == t.countRegion &&
		o.Annotations[t.keys.LocalGeneration] != "" && !t.annotated[k]:
		t.annotated[k] = true
		t.count++
		for _, m := range t.milestones {
			if m.at == t.count {
				run = append(run, m.fn)
			}
		}
		if t.count == t.total {
			t.countAt = at
			close(t.countDone)
		}
	case s == sideLocal && t.countRegion != "" && o.Labels[t.keys.Region] == t.countRegion && !t.localSeenSet[k]:
		t.localSeenSet[k] = true
		t.localSeen = append(t.localSeen, k)
	}
	if t.relayOn.Load() {
		var item *relayItem
		if s == sideMgmt && strings.HasPrefix(o.Spec.DisplayName, t.relayPrefix) && t.relayed["s/"+k.String()] != o.Spec.DisplayName {
			t.relayed["s/"+k.String()] = o.Spec.DisplayName
			item = &relayItem{spec: true, key: k, value: o.Spec.DisplayName}
		}
		if s == sideLocal && strings.HasPrefix(o.Status.Endpoint, t.relayPrefix) && t.relayed["e/"+k.String()] != o.Status.Endpoint {
			t.relayed["e/"+k.String()] = o.Status.Endpoint
			item = &relayItem{key: k, value: o.Status.Endpoint}
		}
		if item != nil {
			t.relayCh <- *item
		}
	}
	t.mu.Unlock()
	for _, fn := range run {
		go fn()
	}
}

// watchTenants lists then watches every Tenant of a cluster until ctx ends, re-watching from the
// last resource version (relisting when it expired); ready is closed after the first list.
func watchTenants(ctx context.Context, c client.WithWatch, s side, t *tracker, ready chan struct{}) {
	var rv string
	var once sync.Once
	for ctx.Err() == nil {
		if rv == "" {
			list := &demov1alpha1.TenantList{}
			if err := c.List(ctx, list); err != nil {
				time.Sleep(time.Second)
				continue
			}
			now := time.Now()
			for i := range list.Items {
				t.handle(s, &list.Items[i], now)
			}
			rv = list.ResourceVersion
			once.Do(func() { close(ready) })
		}
		w, err := c.Watch(ctx, &demov1alpha1.TenantList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			switch ev.Type {
			case watch.Added, watch.Modified:
				o := ev.Object.(*demov1alpha1.Tenant)
				rv = o.ResourceVersion
				t.handle(s, o, now)
			case watch.Deleted, watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
			case watch.Error:
				if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					rv = ""
				}
			}
		}
		w.Stop()
	}
}

// parallel runs fn(i) for i in [0, n) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var first error
	var once sync.Once
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}

// setLabel marks every object of one seeded set with the set's name (its namespace prefix).
const setLabel = "bench.regionsync.dev/set"

// seed creates n Tenants for region on management (as management's users would: admin, 16 at
// a time), perNS to a namespace "<nsPrefix>-NNN", named "tNNNNN-<region>" (copy: "tNNNNN"),
// labelled for the region and with setLabel=nsPrefix.
func seed(ctx context.Context, c client.Client, region, nsPrefix string, n, perNS int) ([]pair, error) {
	nss := (n + perNS - 1) / perNS
	if err := parallel(nss, 16, func(i int) error {
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", nsPrefix, i)}})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return nil, err
	}
	pairs := make([]pair, n)
	err := parallel(n, 16, func(i int) error {
		ns := fmt.Sprintf("%s-%03d", nsPrefix, i/perNS)
		local := fmt.Sprintf("t%05d", i)
		pairs[i] = pair{remote: types.NamespacedName{Namespace: ns, Name: local + "-" + region}, local: types.NamespacedName{Namespace: ns, Name: local}}
		return c.Create(ctx, &demov1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pairs[i].remote.Name, Labels: map[string]string{regionsyncv1alpha1.RegionLabel: region, setLabel: nsPrefix}},
			Spec:       demov1alpha1.TenantSpec{DisplayName: "Tenant " + local, Plan: "team", Replicas: 1},
		})
	})
	return pairs, err
}

// plainManager is the plain client's field manager: a program of its own, as the agent is, so its
// writes get an entry of their own in managedFields beside the seeder's, as the agent's do (with
// the seeder's name, its entry merged into the seeder's and every object it wrote was smaller
// than the agent's: cheaper for the API server to patch, store and send).
const plainManager = "plain-sync"

// plainSync is the initial-sync baseline: a plain client, acting as the same identities as the
// agent and without client-side limit, performs the minimal writes per object (claim with the
// finalizer on management, create the copy in the region (and its namespace once), generation
// annotations on management) at the agent's concurrency after one list. It returns the elapsed time.
func plainSync(ctx context.Context, mgmt, local client.Client, keys shard.Keys, region, set string, pairs []pair, concurrency int) (time.Duration, error) {
	start := time.Now()
	list := &demov1alpha1.TenantList{}
	if err := mgmt.List(ctx, list, client.MatchingLabels{regionsyncv1alpha1.RegionLabel: region, setLabel: set}); err != nil {
		return 0, err
	}
	byKey := map[types.NamespacedName]*demov1alpha1.Tenant{}
	for i := range list.Items {
		byKey[types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}] = &list.Items[i]
	}
	var namespaces sync.Map
	err := parallel(len(pairs), concurrency, func(i int) error {
		p := pairs[i]
		remote := byKey[p.remote]
		if remote == nil {
			return fmt.Errorf("%s not listed", p.remote)
		}
		claim, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": []string{keys.Finalizer}, "resourceVersion": remote.ResourceVersion}})
		if err := mgmt.Patch(ctx, remote, client.RawPatch(types.MergePatchType, claim), client.FieldOwner(plainManager)); err != nil {
			return err
		}
		once, _ := namespaces.LoadOrStore(p.local.Namespace, &sync.Once{})
		var nsErr error
		once.(*sync.Once).Do(func() {
			nsErr = local.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.local.Namespace, Labels: map[string]string{keys.Region: region},
				Annotations: map[string]string{keys.Owner: p.local.Name, keys.OwnerKind: "Tenant.demo.regionsync.dev"}}})
			if apierrors.IsAlreadyExists(nsErr) {
				nsErr = nil
			}
		})
		if nsErr != nil {
			return nsErr
		}
		cp := &demov1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.local.Namespace, Name: p.local.Name,
				Labels:      map[string]string{regionsyncv1alpha1.RegionLabel: region, setLabel: set, keys.Region: region},
				Annotations: map[string]string{keys.RemoteUID: string(remote.UID), keys.CopiedKeys: "label:" + regionsyncv1alpha1.RegionLabel + ",label:" + setLabel}},
			Spec: remote.Spec,
		}
		if err := local.Create(ctx, cp, client.FieldOwner(plainManager)); err != nil {
			return err
		}
		gens, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": remote.UID, "annotations": map[string]string{
			keys.RemoteGeneration: fmt.Sprint(remote.Generation), keys.LocalGeneration: fmt.Sprint(cp.Generation)}}})
		return mgmt.Patch(ctx, remote, client.RawPatch(types.MergePatchType, gens), client.FieldOwner(plainManager))
	})
	return time.Since(start), err
}

// runRelay is the latency baseline: a plain relay that copies each change the watches see to the
// other side with one write (a spec change on management → the copy's spec; a status change in
// the region → the management object's status), concurrency workers, until ctx ends.
func runRelay(ctx context.Context, t *tracker, mgmt, local client.Client, suffix string, concurrency int) {
	for range concurrency {
		go func() {
			for {
				var it relayItem
				select {
				case <-ctx.Done():
					return
				case it = <-t.relayCh:
				}
				if it.spec {
					patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"displayName": it.value}})
					o := &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: it.key.Namespace, Name: strings.TrimSuffix(it.key.Name, suffix)}}
					_ = local.Patch(ctx, o, client.RawPatch(types.MergePatchType, patch))
				} else {
					patch, _ := json.Marshal(map[string]any{"status": map[string]any{"endpoint": it.value}})
					o := &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: it.key.Namespace, Name: it.key.Name + suffix}}
					_ = mgmt.Status().Patch(ctx, o, client.RawPatch(types.MergePatchType, patch))
				}
			}
		}()
	}
}

// churnResult are the latencies of one churn.
type churnResult struct {
	spec, status               []time.Duration
	writes                     []time.Duration // how long the suite's own writes took (API server load)
	specSent, statusSent       int
	specLate, statusLate, errs int
}

// churn makes changes at rate per second for dur over targets (cycling through a shuffled
// order): spec changes on management (seen in the region's copy) when withSpec, status changes
// in the region (seen on management) when withStatus, alternating when both. It waits grace for
// the last changes, then returns the latencies (changes not arrived by then are late).
func churn(ctx context.Context, t *tracker, mgmtAdmin, localAdmin client.Client, targets []pair, rate float64, dur, grace time.Duration, withSpec, withStatus bool, tag string) churnResult {
	order := rand.Perm(len(targets))
	type sent struct {
		p    *probe
		spec bool
	}
	var mu sync.Mutex
	var all []sent
	var writes []time.Duration
	var errs atomic.Int64
	sem := make(chan struct{}, 256)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	end := time.Now().Add(dur)
	for seq := 0; time.Now().Before(end); seq++ {
		<-tick.C
		spec := withSpec && (!withStatus || seq%2 == 0)
		target := targets[order[seq%len(order)]]
		value := fmt.Sprintf("%s-%d", tag, seq)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var p *probe
			var err error
			if spec {
				p = t.expect(sideLocal, target.local, value)
				patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"displayName": value}})
				err = mgmtAdmin.Patch(ctx, &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: target.remote.Namespace, Name: target.remote.Name}}, client.RawPatch(types.MergePatchType, patch))
				if err != nil {
					t.cancel(sideLocal, target.local, value)
				}
			} else {
				p = t.expect(sideMgmt, target.remote, value)
				patch, _ := json.Marshal(map[string]any{"status": map[string]any{"endpoint": value}})
				err = localAdmin.Status().Patch(ctx, &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: target.local.Namespace, Name: target.local.Name}}, client.RawPatch(types.MergePatchType, patch))
				if err != nil {
					t.cancel(sideMgmt, target.remote, value)
				}
			}
			took := time.Since(p.t0)
			if err != nil {
				errs.Add(1)
				return
			}
			mu.Lock()
			all = append(all, sent{p, spec})
			writes = append(writes, took)
			mu.Unlock()
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(grace)
	var r churnResult
	for _, s := range all {
		d, ok := s.p.wait(time.Until(deadline))
		switch {
		case s.spec && ok:
			r.spec = append(r.spec, d)
		case s.spec:
			r.specLate++
		case ok:
			r.status = append(r.status, d)
		default:
			r.statusLate++
		}
		if s.spec {
			r.specSent++
		} else {
			r.statusSent++
		}
	}
	r.errs = int(errs.Load())
	r.writes = writes
	return r
}

// quantile of sorted-in-place durations (nearest rank); 0 when empty.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}
