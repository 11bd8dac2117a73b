//go:build integration

package hub_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// configMapAgents play every region's agent for the per-region ConfigMaps of one namespace: a
// synced region records the content it copied (the generation annotations and
// D/sync-applied-hash, as internal/syncer does for a kind without metadata.generation). A held
// region copies nothing (its copies never become current).
type configMapAgents struct {
	c    client.Client
	mu   sync.Mutex
	held map[string]bool
	// seen records every color each region's copy of each source was written with.
	seen map[string]map[string]bool
}

func (a *configMapAgents) hold(region string, held bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held[region] = held
}

// sawColor lists, sorted, the regions whose copies were ever written with color, but the ones given.
func (a *configMapAgents) sawColor(color string, except ...string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for region, colors := range a.seen {
		if colors[color] && !slices.Contains(except, region) {
			out = append(out, region)
		}
	}
	slices.Sort(out)
	return out
}

// watch records every version of every per-region ConfigMap written (a watch sees each one,
// however briefly it was there).
func (a *configMapAgents) watch(ctx context.Context, wc client.WithWatch) {
	for ctx.Err() == nil {
		w, err := wc.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns), client.HasLabels{keys.Distribution})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			region := cm.Labels["regionsync.dev/region"]
			a.mu.Lock()
			if a.seen[region] == nil {
				a.seen[region] = map[string]bool{}
			}
			a.seen[region][cm.Data["color"]] = true
			a.mu.Unlock()
		}
		w.Stop()
	}
}

func (a *configMapAgents) run(ctx context.Context) {
	for ctx.Err() == nil {
		var list corev1.ConfigMapList
		if err := a.c.List(ctx, &list, client.InNamespace(ns), client.HasLabels{keys.Distribution}); err == nil {
			for i := range list.Items {
				a.sync(ctx, &list.Items[i])
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *configMapAgents) sync(ctx context.Context, cm *corev1.ConfigMap) {
	a.mu.Lock()
	held := a.held[cm.Labels["regionsync.dev/region"]]
	a.mu.Unlock()
	raw, err := runtimeToUnstructured(cm)
	if err != nil || held {
		return
	}
	hash := keys.AppliedContentHash(raw)
	if cm.Annotations[keys.AppliedHash] == hash {
		return
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[keys.RemoteGeneration], cm.Annotations[keys.LocalGeneration], cm.Annotations[keys.AppliedHash] = "0", "0", hash
	_ = a.c.Update(ctx, cm)
}

func runtimeToUnstructured(cm *corev1.ConfigMap) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	return u, nil
}

// colors reads, per region suffix, the color and the revision of source src's per-region
// ConfigMap ("-" when it has none).
func colors(c client.Client, src string, suffixes ...string) (map[string]string, map[string]string) {
	col, rev := map[string]string{}, map[string]string{}
	for _, sfx := range suffixes {
		cm, err := getConfigMap(c, src+sfx)
		if err != nil {
			col[sfx], rev[sfx] = "-", "-"
			continue
		}
		col[sfx], rev[sfx] = cm.Data["color"], cm.Annotations[keys.Revision]
	}
	return col, rev
}

// wantColors checks, per source, the colors of its per-region ConfigMaps ("-": none).
func wantColors(c client.Client, want map[string]map[string]string) error {
	for _, src := range slices.Sorted(maps.Keys(want)) {
		got, _ := colors(c, src, slices.Collect(maps.Keys(want[src]))...)
		if !maps.Equal(got, want[src]) {
			return fmt.Errorf("%s: colors %v, want %v", src, got, want[src])
		}
	}
	return nil
}

func setColor(t *testing.T, c client.Client, name, color string) {
	t.Helper()
	testenv.Eventually(t, "setting "+name+" to "+color, 10*time.Second, func() error {
		cm, err := getConfigMap(c, name)
		if err != nil {
			return err
		}
		cm.Data["color"] = color
		return c.Update(context.Background(), cm)
	})
}

// TestHubSourceRollout: a Distribution with spec.source rolls its sources out progressively. A
// revision is the source objects' content as placed (a ControllerRevision); two labelled
// ConfigMaps go through three waves of one region each; a source changed to a bad value (the
// Distribution's CEL health rule judges it Failed) reaches only the first wave, the rollout
// halts and rolls the first wave back to the previous content although the source still holds
// the bad one, and it stays halted, never written again, over further reconciles and by a new
// hub process (failover); changing the
// source again is a new revision that starts at the first wave; a source labelled later joins
// through the waves, and one deleted is removed region by region.
func TestHubSourceRollout(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	prod := map[string]string{"tier": "prod"}
	web := map[string]string{"distribute": "web"}
	regions := []string{"r-a", "r-b", "r-c"}
	sfx := map[string]string{"r-a": "-ra", "r-b": "-rb", "r-c": "-rc"}
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		configMap("web-a", web, map[string]string{"color": "blue"}),
		configMap("web-b", web, map[string]string{"color": "green"}),
	)
	for _, r := range regions {
		create(t, c, region(r, prod, tenantShard(sfx[r], r, "ConfigMap")))
		regionReady(t, c, r, metav1.ConditionTrue)
	}
	tenantWriter(t, c, ns, "placer", writeConfigMaps)
	hubReads(t, c, "hub-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})

	agents := &configMapAgents{c: c, held: map[string]bool{}, seen: map[string]map[string]bool{}}
	wc, err := client.NewWithWatch(mgmt.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(bg)
	var wg sync.WaitGroup
	wg.Go(func() { agents.run(ctx) })
	wg.Go(func() { agents.watch(ctx, wc) })
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	// A long liveness grace: the test sets each Region's Ready itself (no shard Leases here).
	opts := hub.Options{DefaultServiceAccountName: "placer", LivenessGrace: time.Hour, ShrinkWindow: time.Hour}
	stopHub := startHubProcess(t, mgmt, opts)
	t.Cleanup(func() { stopHub() })

	create(t, c, &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Source:    &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{MatchLabels: web}},
			Placement: regionsyncv1alpha1.Placement{RegionSelector: &metav1.LabelSelector{MatchLabels: prod}},
			Health:    &regionsyncv1alpha1.HealthRule{Current: "true", Failed: "has(object.data) && has(object.data.color) && object.data.color == 'bad'"},
			Strategy: regionsyncv1alpha1.RolloutStrategy{
				Type:           regionsyncv1alpha1.RolloutProgressive,
				MaxConcurrency: ptrInt(intstr.FromInt32(1)), // r-a, then r-b, then r-c
				Soak:           &metav1.Duration{Duration: time.Second},
				OnFailure:      regionsyncv1alpha1.FailureRollback,
			},
		},
	})
	rollout := func() *regionsyncv1alpha1.RolloutStatus {
		d := getDist(t, c, "web")
		if d.Status.Rollout == nil {
			return &regionsyncv1alpha1.RolloutStatus{}
		}
		return d.Status.Rollout
	}
	every := func(color string) map[string]string {
		return map[string]string{"-ra": color, "-rb": color, "-rc": color}
	}
	complete := func(what string, want map[string]map[string]string) string {
		t.Helper()
		var rev string
		testenv.Eventually(t, what, 60*time.Second, func() error {
			if err := wantColors(c, want); err != nil {
				return err
			}
			d := getDist(t, c, "web")
			st, cond := d.Status.Rollout, meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionProgressing)
			if st == nil || st.CurrentRevision != st.UpdateRevision || st.Healthy != 3 || st.Halt != nil || cond == nil || cond.Reason != regionsyncv1alpha1.ReasonRolloutComplete {
				return fmt.Errorf("rollout %+v, Progressing %+v", st, cond)
			}
			rev = st.CurrentRevision
			return nil
		})
		for src, cols := range want {
			if cols["-ra"] == "-" {
				continue // not placed: no revision to carry
			}
			if _, revs := colors(c, src, "-ra", "-rb", "-rc"); revs["-ra"] != rev || revs["-rb"] != rev || revs["-rc"] != rev {
				t.Errorf("%s's per-region objects carry revisions %v, want %s", src, revs, rev)
			}
		}
		return rev
	}

	// The first rollout: both sources, wave by wave.
	rev1 := complete("the first rollout through three waves", map[string]map[string]string{"web-a": every("blue"), "web-b": every("green")})
	for _, w := range []string{"wave 1/3", "wave 2/3", "wave 3/3"} {
		if err := hasEventOn(c, "web", hub.EventWaveCompleted, w); err != nil {
			t.Error(err)
		}
	}
	cr := &appsv1.ControllerRevision{}
	if err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: rev1}, cr); err != nil || !strings.Contains(string(cr.Data.Raw), `"name":"web-a"`) ||
		!strings.Contains(string(cr.Data.Raw), `"name":"web-b"`) || !strings.Contains(string(cr.Data.Raw), `"color":"green"`) {
		t.Fatalf("ControllerRevision %s: %s, %v", rev1, cr.Data.Raw, err)
	}

	// A bad value in one source: only the first wave (r-a) gets it, its copy reports Failed, the
	// rollout halts and r-a gets rev1's content back, while the source still holds the bad value.
	setColor(t, c, "web-b", "bad")
	var halt *regionsyncv1alpha1.RolloutHalt
	testenv.Eventually(t, "halted and rolled back", 60*time.Second, func() error {
		d := getDist(t, c, "web")
		cond := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionHalted)
		st := d.Status.Rollout
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != regionsyncv1alpha1.ReasonRolledBack {
			return fmt.Errorf("Halted %+v", cond)
		}
		if st == nil || st.Halt == nil || !st.Halt.RolledBack || st.Halt.Reason != regionsyncv1alpha1.ReasonUnhealthy || !slices.Equal(st.Halt.Regions, []string{"r-a"}) ||
			st.CurrentRevision != rev1 || st.UpdateRevision == rev1 || st.Halt.Revision != st.UpdateRevision {
			return fmt.Errorf("rollout %+v", st)
		}
		halt = st.Halt
		if _, revs := colors(c, "web-b", "-ra"); revs["-ra"] != rev1 {
			return fmt.Errorf("web-b-ra on %s, want %s", revs["-ra"], rev1)
		}
		return wantColors(c, map[string]map[string]string{"web-a": every("blue"), "web-b": every("green")})
	})
	if got := agents.sawColor("bad", "r-a"); len(got) > 0 {
		t.Errorf("the bad value reached %v beyond the first wave", got)
	}
	if !slices.Equal(agents.sawColor("bad"), []string{"r-a"}) {
		t.Errorf("the bad value never reached the first wave: %v", agents.sawColor("bad"))
	}
	for _, reason := range []string{hub.EventRolloutHalted, hub.EventRolledBack} {
		if err := hasEventOn(c, "web", reason, ""); err != nil {
			t.Error(err)
		}
	}
	if src, err := getConfigMap(c, "web-b"); err != nil || src.Data["color"] != "bad" {
		t.Fatalf("the source web-b: %v, %v; want it to hold the bad value still", src, err)
	}
	// Halted on the revision the source holds: reconciles (each annotation change is one) never
	// write it again by themselves.
	for i := range 4 {
		testenv.Eventually(t, "touching Distribution web", 10*time.Second, func() error {
			d := getDist(t, c, "web")
			if d.Annotations == nil {
				d.Annotations = map[string]string{}
			}
			d.Annotations["example.com/touched"] = fmt.Sprint(i)
			return c.Update(bg, d)
		})
		testenv.Consistently(t, "the rolled back revision stays out of every region", time.Second, func() error {
			if _, revs := colors(c, "web-b", "-ra", "-rb", "-rc"); revs["-ra"] != rev1 || revs["-rb"] != rev1 || revs["-rc"] != rev1 {
				return fmt.Errorf("web-b's revisions %v, want %s", revs, rev1)
			}
			if st := rollout(); st.Halt == nil || !st.Halt.Since.Equal(&halt.Since) || st.CurrentRevision != rev1 {
				return fmt.Errorf("rollout %+v", st)
			}
			return wantColors(c, map[string]map[string]string{"web-b": every("green")})
		})
	}

	// A new hub process (a failover) rebuilds the halt from what is written and keeps it.
	stopHub()
	stopHub = runHub(t, mgmt, opts)
	testenv.Consistently(t, "the new hub keeps the rollout halted", 3*time.Second, func() error {
		if _, revs := colors(c, "web-b", "-ra", "-rb", "-rc"); revs["-ra"] != rev1 || revs["-rb"] != rev1 || revs["-rc"] != rev1 {
			return fmt.Errorf("web-b's revisions %v, want %s", revs, rev1)
		}
		if st := rollout(); st.Halt == nil || !st.Halt.Since.Equal(&halt.Since) || st.CurrentRevision != rev1 {
			return fmt.Errorf("rollout %+v", st)
		}
		return wantColors(c, map[string]map[string]string{"web-b": every("green")})
	})
	if got := agents.sawColor("bad"); !slices.Equal(got, []string{"r-a"}) {
		t.Errorf("the bad value was written to %v, want the first wave (r-a) only", got)
	}

	// The source changes again: a new revision, from the first wave (held there while r-a's
	// copies are not current), rev1 still the stable one.
	agents.hold("r-a", true)
	setColor(t, c, "web-b", "yellow")
	testenv.Eventually(t, "the new revision in the first wave only", 30*time.Second, func() error {
		st := rollout()
		if st.Halt != nil || st.Wave != 1 || st.CurrentRevision != rev1 || st.UpdateRevision == halt.Revision {
			return fmt.Errorf("rollout %+v", st)
		}
		return wantColors(c, map[string]map[string]string{"web-b": {"-ra": "yellow", "-rb": "green", "-rc": "green"}})
	})
	testenv.Consistently(t, "no later wave while r-a is not current", 2*time.Second, func() error {
		return wantColors(c, map[string]map[string]string{"web-b": {"-ra": "yellow", "-rb": "green", "-rc": "green"}})
	})
	if got := agents.sawColor("yellow"); !slices.Equal(got, []string{"r-a"}) {
		t.Errorf("the new revision was written to %v while the first wave was not current, want r-a only", got)
	}
	agents.hold("r-a", false)
	rev2 := complete("the yellow revision everywhere", map[string]map[string]string{"web-a": every("blue"), "web-b": every("yellow")})
	if rev2 == rev1 || rev2 == halt.Revision {
		t.Fatalf("the yellow revision %s is not a new one (rev1 %s, halted %s)", rev2, rev1, halt.Revision)
	}

	// A source labelled later joins through the waves: held in the second (r-b not current).
	agents.hold("r-b", true)
	create(t, c, configMap("web-c", web, map[string]string{"color": "red"}))
	testenv.Eventually(t, "web-c in the first two waves", 30*time.Second, func() error {
		if st := rollout(); st.Wave != 2 {
			return fmt.Errorf("rollout %+v", st)
		}
		return wantColors(c, map[string]map[string]string{"web-c": {"-ra": "red", "-rb": "red", "-rc": "-"}})
	})
	testenv.Consistently(t, "web-c held in the second wave", 2*time.Second, func() error {
		return wantColors(c, map[string]map[string]string{"web-c": {"-ra": "red", "-rb": "red", "-rc": "-"}})
	})
	agents.hold("r-b", false)
	complete("web-c everywhere", map[string]map[string]string{"web-a": every("blue"), "web-b": every("yellow"), "web-c": every("red")})

	// A source deleted is removed region by region, through the shrink guard (confirmed here:
	// its budget is one of these nine objects within the window).
	agents.hold("r-a", true)
	if err := c.Delete(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-c"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "web-c removed from the first wave only", 30*time.Second, func() error {
		return wantColors(c, map[string]map[string]string{"web-c": {"-ra": "-", "-rb": "red", "-rc": "red"}, "web-a": every("blue")})
	})
	testenv.Consistently(t, "web-c kept in the later waves while r-a is not current", 2*time.Second, func() error {
		return wantColors(c, map[string]map[string]string{"web-c": {"-ra": "-", "-rb": "red", "-rc": "red"}, "web-a": every("blue")})
	})
	testenv.Eventually(t, "confirming the removals", 10*time.Second, func() error {
		d := getDist(t, c, "web")
		d.Annotations[keys.ConfirmRemovalsBefore] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		return c.Update(bg, d)
	})
	agents.hold("r-a", false)
	complete("web-c removed everywhere", map[string]map[string]string{"web-a": every("blue"), "web-b": every("yellow"), "web-c": every("-")})
}

// hasEventOn finds an Event on Distribution name (namespace ns) with reason and a note holding
// substring.
func hasEventOn(c client.Client, name, reason, substring string) error {
	var evs eventsv1.EventList
	if err := c.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, ev := range evs.Items {
		if ev.Regarding.Name == name && ev.Reason == reason && strings.Contains(ev.Note, substring) {
			return nil
		}
	}
	return fmt.Errorf("no %s event on %s with %q", reason, name, substring)
}
