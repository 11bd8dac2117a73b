//go:build integration

package hub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// hubReads gives the hub's ServiceAccount read access to more kinds (what an operator adds to
// deploy/kustomize/hub/rbac.yaml for the kinds Distributions place and take as sources).
func hubReads(t *testing.T, c client.Client, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	create(t, c,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "regionsync-system", Name: "regionsync-hub"}}})
}

func configMap(name string, lbls map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}, Data: data}
}

func getConfigMap(c client.Client, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, cm)
}

func condition(t *testing.T, c client.Client, name, typ string) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(getDist(t, c, name).Status.Conditions, typ)
}

// TestHubDistributionSource: spec.source selecting ConfigMaps by label places each in every
// placed region as "<source><suffix>"; a source labelled later follows, a changed source's data
// follows, a deleted source is removed from every region through the shrink guard (held, then
// confirmed); objects the hub or an agent wrote and names inside a region's shard are never
// sources; a source named that does not exist yet is reported (SourceNotFound), placed when it
// appears and removed when it is deleted; a Secret is refused without allowSecrets (the
// condition names it).
func TestHubDistributionSource(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	prod := map[string]string{"tier": "prod"}
	web := map[string]string{"distribute": "web"}
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		region("r-a", prod, tenantShard("-ra", "r-a", "ConfigMap")),
		region("r-b", prod, tenantShard("-rb", "r-b", "ConfigMap")),
		region("r-c", prod, tenantShard("-rc", "r-c", "ConfigMap")),
		configMap("web-a", web, map[string]string{"color": "blue"}),
		configMap("web-b", web, map[string]string{"color": "green"}),
		// Never sources although selected: a per-region object written by hand for r-a (the
		// region label), one an agent syncs (its finalizer), and a name inside r-b's shard.
		configMap("manual-ra", map[string]string{"distribute": "web", "regionsync.dev/region": "r-a"}, nil),
		configMap("other-rb", web, nil),
	)
	synced := configMap("synced", web, nil)
	synced.Finalizers = []string{keys.Finalizer}
	create(t, c, synced)
	tenantWriter(t, c, ns, "placer", writeConfigMaps, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}})
	hubReads(t, c, "hub-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	startHub(t, mgmt, hub.Options{ShrinkWindow: time.Hour, DefaultServiceAccountName: "placer"})

	source := func(name string, s regionsyncv1alpha1.DistributionSource, regions ...string) *regionsyncv1alpha1.Distribution {
		d := &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       regionsyncv1alpha1.DistributionSpec{Source: &s, Placement: regionsyncv1alpha1.Placement{Regions: regions}},
		}
		if len(regions) == 0 {
			d.Spec.Placement.RegionSelector = &metav1.LabelSelector{MatchLabels: prod}
		}
		return d
	}
	create(t, c, source("web", regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{MatchLabels: web}}))

	suffixes := []string{"-ra", "-rb", "-rc"}
	placedEverywhere := func(src, color string) error {
		for i, sfx := range suffixes {
			cm, err := getConfigMap(c, src+sfx)
			if err != nil {
				return err
			}
			if cm.Data["color"] != color || cm.Labels[keys.Distribution] != "web" || cm.Labels["regionsync.dev/region"] != "r-"+string(rune('a'+i)) || cm.Labels["distribute"] != "web" {
				return fmt.Errorf("%s: data %v labels %v", cm.Name, cm.Data, cm.Labels)
			}
		}
		return nil
	}
	testenv.Eventually(t, "web-a and web-b in r-a, r-b and r-c", 30*time.Second, func() error {
		for src, color := range map[string]string{"web-a": "blue", "web-b": "green"} {
			if err := placedEverywhere(src, color); err != nil {
				return err
			}
		}
		d := getDist(t, c, "web")
		if d.Status.Counts.Placed != 3 || !meta.IsStatusConditionTrue(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied) {
			return fmt.Errorf("counts %+v conditions %+v", d.Status.Counts, d.Status.Conditions)
		}
		if e := entry(d, "r-a"); e == nil || e.Name != "web-a-ra, web-b-ra" {
			return fmt.Errorf("r-a entry %+v", e)
		}
		return nil
	})
	for _, n := range []string{"manual-ra-ra", "other-rb-ra", "synced-ra", "web-a-ra-ra"} {
		if _, err := getConfigMap(c, n); !apierrors.IsNotFound(err) {
			t.Errorf("%s: %v, want NotFound (not a source)", n, err)
		}
	}

	// A third source labelled later follows; a source's change follows.
	create(t, c, configMap("web-c", web, map[string]string{"color": "red"}))
	a, err := getConfigMap(c, "web-a")
	if err != nil {
		t.Fatal(err)
	}
	a.Data["color"] = "navy"
	if err := c.Update(bg, a); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "web-c placed everywhere, web-a's change too", 30*time.Second, func() error {
		if err := placedEverywhere("web-c", "red"); err != nil {
			return err
		}
		return placedEverywhere("web-a", "navy")
	})

	// A source deleted: its three objects (of nine) are over the shrink guard: held, then confirmed
	// and removed from every region.
	if err := c.Delete(bg, configMap("web-b", nil, nil)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the removal of web-b's objects held", 30*time.Second, func() error {
		cond := condition(t, c, "web", regionsyncv1alpha1.DistributionRemovalHeld)
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "removing 3 per-region objects") || !strings.Contains(cond.Message, keys.ConfirmRemovalsBefore) {
			return fmt.Errorf("RemovalHeld %+v", cond)
		}
		return nil
	})
	if err := placedEverywhere("web-b", "green"); err != nil {
		t.Fatalf("held objects: %v", err)
	}
	updateDist(t, c, "web", func(d *regionsyncv1alpha1.Distribution) {
		d.Annotations = map[string]string{keys.ConfirmRemovalsBefore: time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)}
	})
	testenv.Eventually(t, "web-b removed from every region, the others stay", 30*time.Second, func() error {
		for _, sfx := range suffixes {
			if _, err := getConfigMap(c, "web-b"+sfx); !apierrors.IsNotFound(err) {
				return fmt.Errorf("web-b%s: %v", sfx, err)
			}
		}
		if cond := condition(t, c, "web", regionsyncv1alpha1.DistributionRemovalHeld); cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("RemovalHeld %+v", cond)
		}
		if err := placedEverywhere("web-a", "navy"); err != nil {
			return err
		}
		return placedEverywhere("web-c", "red")
	})

	// A source named that does not exist yet: reported, placed once it appears. A Secret without
	// allowSecrets: refused, naming the field; nothing written.
	create(t, c,
		source("later", regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: "later"}, "r-a"),
		source("creds", regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "Secret", Name: "creds"}, "r-a"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"password": []byte("s3cr3t")}},
	)
	testenv.Eventually(t, "later: SourceNotFound naming it", 30*time.Second, func() error {
		cond := condition(t, c, "later", regionsyncv1alpha1.DistributionApplied)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != regionsyncv1alpha1.ReasonSourceNotFound ||
			!strings.Contains(cond.Message, "spec.source.name: ConfigMap "+ns+"/later does not exist") {
			return fmt.Errorf("Applied %+v", cond)
		}
		return nil
	})
	appliedFalse(t, c, ns, "creds", "spec.source.kind", "allowSecrets")
	create(t, c, configMap("later", nil, map[string]string{"k": "v"}))
	testenv.Eventually(t, "later placed once it exists", 30*time.Second, func() error {
		cm, err := getConfigMap(c, "later-ra")
		if err != nil {
			return err
		}
		if cm.Data["k"] != "v" || !meta.IsStatusConditionTrue(getDist(t, c, "later").Status.Conditions, regionsyncv1alpha1.DistributionApplied) {
			return fmt.Errorf("later-ra %v, conditions %+v", cm.Data, getDist(t, c, "later").Status.Conditions)
		}
		return nil
	})
	if err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: "creds-ra"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("creds-ra: %v, want NotFound", err)
	}
	// The source named is deleted: its one object is removed (within the guard: 1 of 1), and
	// the Distribution says the source does not exist.
	if err := c.Delete(bg, configMap("later", nil, nil)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "later-ra removed with its source", 30*time.Second, func() error {
		if _, err := getConfigMap(c, "later-ra"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("later-ra: %v", err)
		}
		if cond := condition(t, c, "later", regionsyncv1alpha1.DistributionApplied); cond == nil || cond.Reason != regionsyncv1alpha1.ReasonSourceNotFound {
			return fmt.Errorf("Applied %+v", cond)
		}
		return nil
	})
}

// TestHubDistributionConflict: two Distributions wanting one per-region object. The one that
// controls it keeps it although another, older, wants it too; when none controls it, the older
// places it and the younger reports a Conflict naming the Distribution and the object; once the
// holder is gone, the other takes the object over.
func TestHubDistributionConflict(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		region("r-a", nil, tenantShard("-ra", "r-a", "ConfigMap")),
	)
	tenantWriter(t, c, ns, "placer", writeConfigMaps)
	hubReads(t, c, "hub-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	startHub(t, mgmt, hub.Options{DefaultServiceAccountName: "placer"})
	byName := func(name, src string) *regionsyncv1alpha1.Distribution {
		return &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: regionsyncv1alpha1.DistributionSpec{
				Source:    &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: src},
				Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-a"}},
			},
		}
	}
	holder := func(name string) (string, error) {
		cm, err := getConfigMap(c, name)
		if err != nil {
			return "", err
		}
		return cm.Labels[keys.Distribution], nil
	}
	conflictNaming := func(dist, holderName, object string) error {
		d := getDist(t, c, dist)
		e := entry(d, "r-a")
		if e == nil || e.State != regionsyncv1alpha1.PlacementConflict || !strings.Contains(e.Message, "ConfigMap "+ns+"/"+object) || !strings.Contains(e.Message, "Distribution "+holderName) {
			return fmt.Errorf("%s: r-a %+v", dist, e)
		}
		applied := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied)
		if applied == nil || applied.Status != metav1.ConditionFalse || applied.Reason != regionsyncv1alpha1.ReasonConflict ||
			!strings.Contains(applied.Message, object) || !strings.Contains(applied.Message, holderName) {
			return fmt.Errorf("%s: Applied %+v", dist, applied)
		}
		return nil
	}

	// The oldest wins when none controls it: zeta (older) and alpha (younger, although first by
	// name) both want shared-ra before the source exists.
	create(t, c, byName("zeta", "shared"))
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a resolution of one second
	create(t, c, byName("alpha", "shared"))
	testenv.Eventually(t, "both wait for the source", 30*time.Second, func() error {
		for _, n := range []string{"zeta", "alpha"} {
			if cond := condition(t, c, n, regionsyncv1alpha1.DistributionApplied); cond == nil || cond.Reason != regionsyncv1alpha1.ReasonSourceNotFound {
				return fmt.Errorf("%s: Applied %+v", n, cond)
			}
		}
		return nil
	})
	create(t, c, configMap("shared", nil, map[string]string{"k": "v"}))
	testenv.Eventually(t, "zeta holds shared-ra, alpha reports the conflict", 30*time.Second, func() error {
		if h, err := holder("shared-ra"); err != nil || h != "zeta" {
			return fmt.Errorf("shared-ra held by %q (%v)", h, err)
		}
		return conflictNaming("alpha", "zeta", "shared-ra")
	})
	testenv.Consistently(t, "zeta keeps shared-ra", 3*time.Second, func() error {
		if h, err := holder("shared-ra"); err != nil || h != "zeta" {
			return fmt.Errorf("shared-ra held by %q (%v)", h, err)
		}
		return nil
	})

	// The controller keeps it: younger "keeper" places mine-ra; "elder" is older but came to
	// want mine-ra only later (its source changed).
	create(t, c, configMap("mine", nil, map[string]string{"k": "mine"}), configMap("unrelated", nil, nil))
	create(t, c, byName("elder", "unrelated"))
	time.Sleep(1100 * time.Millisecond)
	create(t, c, byName("keeper", "mine"))
	testenv.Eventually(t, "keeper holds mine-ra", 30*time.Second, func() error {
		if h, err := holder("mine-ra"); err != nil || h != "keeper" {
			return fmt.Errorf("mine-ra held by %q (%v)", h, err)
		}
		return nil
	})
	updateDist(t, c, "elder", func(e *regionsyncv1alpha1.Distribution) {
		e.Spec.Source.Name = "mine"
	})
	testenv.Eventually(t, "elder reports keeper holding mine-ra", 30*time.Second, func() error {
		return conflictNaming("elder", "keeper", "mine-ra")
	})
	if h, err := holder("mine-ra"); err != nil || h != "keeper" {
		t.Fatalf("mine-ra held by %q (%v)", h, err)
	}

	// The holder goes: the other takes the object. Region r-a already lost an object within the
	// window (elder's unrelated-ra) and holds two: deleting zeta is past the region's budget and
	// held until confirmed.
	if err := c.Delete(bg, getDist(t, c, "zeta")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "zeta's deletion held by r-a's budget", 30*time.Second, func() error {
		if cond := condition(t, c, "zeta", regionsyncv1alpha1.DistributionRemovalHeld); cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "Region r-a") {
			return fmt.Errorf("zeta RemovalHeld %+v", cond)
		}
		return nil
	})
	confirm := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, keys.ConfirmRemovalsBefore, time.Now().Add(time.Second).UTC().Format(time.RFC3339))
	if err := c.Patch(bg, getDist(t, c, "zeta"), client.RawPatch(types.MergePatchType, []byte(confirm))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "alpha takes shared-ra once zeta is gone", 30*time.Second, func() error {
		if h, err := holder("shared-ra"); err != nil || h != "alpha" {
			return fmt.Errorf("shared-ra held by %q (%v)", h, err)
		}
		if cond := condition(t, c, "alpha", regionsyncv1alpha1.DistributionApplied); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("alpha Applied %+v", cond)
		}
		return nil
	})
}

// TestHubShrinkGuardPerRegion: ten Distributions placed by selector in r-a and r-b lose r-b at
// once (its label dropped): one removal each is within each Distribution's budget, but one
// region's removals across all Distributions are bounded too, so one goes ahead and nine are held
// (RemovalHeld naming the region). A new hub process (a leader change) goes on with the written
// memory: the nine stay held, a confirmation given after the holds began but before the new
// process started releases one, and a further removal in r-b within the window is held although
// the new process removed nothing yet. A deleted Region's objects are all held.
func TestHubShrinkGuardPerRegion(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	prod := map[string]string{"tier": "prod"}
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		region("r-a", prod, tenantShard("-ra", "r-a")),
		region("r-b", prod, tenantShard("-rb", "r-b")),
	)
	tenantWriter(t, c, ns, "placer", writeTenants)
	opts := hub.Options{ShrinkWindow: time.Hour, DefaultServiceAccountName: "placer"}
	stop := startHubProcess(t, mgmt, opts)
	t.Cleanup(stop)

	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("d%d", i)
		create(t, c, &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i]},
			Spec: regionsyncv1alpha1.DistributionSpec{Template: tenantTemplate("team", ""),
				Placement: regionsyncv1alpha1.Placement{RegionSelector: &metav1.LabelSelector{MatchLabels: prod}}},
		})
	}
	testenv.Eventually(t, "ten Distributions in r-a and r-b", 60*time.Second, func() error {
		for _, n := range names {
			for _, sfx := range []string{"-ra", "-rb"} {
				if _, err := getTenant(c, n+sfx); err != nil {
					return err
				}
			}
		}
		return nil
	})
	rb := &regionsyncv1alpha1.Region{}
	if err := c.Get(bg, types.NamespacedName{Name: "r-b"}, rb); err != nil {
		t.Fatal(err)
	}
	rb.Labels = map[string]string{"tier": "dev"}
	if err := c.Update(bg, rb); err != nil {
		t.Fatal(err)
	}
	// held lists the Distributions whose r-b object is held, and those whose object is gone.
	held := func() (heldBy, gone []string, err error) {
		for _, n := range names {
			tn, err := getTenant(c, n+"-rb")
			switch {
			case apierrors.IsNotFound(err):
				gone = append(gone, n)
				continue
			case err != nil:
				return nil, nil, err
			case tn.DeletionTimestamp != nil:
				return nil, nil, fmt.Errorf("%s-rb terminating", n)
			}
			cond := condition(t, c, n, regionsyncv1alpha1.DistributionRemovalHeld)
			if cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, "Region r-b's") && strings.Contains(cond.Message, "across all Distributions") {
				heldBy = append(heldBy, n)
			}
		}
		return heldBy, gone, nil
	}
	var heldBy, gone []string
	testenv.Eventually(t, "one removal from r-b goes ahead, nine are held naming r-b", 60*time.Second, func() error {
		var err error
		heldBy, gone, err = held()
		if err != nil {
			return err
		}
		if len(gone) != 1 || len(heldBy) != 9 {
			return fmt.Errorf("gone %v, held %v", gone, heldBy)
		}
		return nil
	})
	testenv.Consistently(t, "nine stay held", 3*time.Second, func() error {
		h, g, err := held()
		if err != nil {
			return err
		}
		if len(g) != 1 || len(h) != 9 {
			return fmt.Errorf("gone %v, held %v", g, h)
		}
		return nil
	})
	cm := &corev1.ConfigMap{}
	if err := c.Get(bg, types.NamespacedName{Namespace: "regionsync-system", Name: hub.GuardConfigMapName}, cm); err != nil {
		t.Fatalf("the guard's memory: %v", err)
	}
	if !strings.Contains(cm.Data["region.r-b"], `"removed":1`) {
		t.Fatalf("the guard's memory of r-b: %v", cm.Data)
	}

	// A leader change: this hub ends, a confirmation of one held Distribution is written while none
	// runs (a time after its hold began), a new hub process starts.
	confirmed := heldBy[0]
	stop()
	updateDist(t, c, confirmed, func(d *regionsyncv1alpha1.Distribution) {
		d.Annotations = map[string]string{keys.ConfirmRemovalsBefore: time.Now().UTC().Format(time.RFC3339Nano)}
	})
	time.Sleep(1100 * time.Millisecond) // the new process starts strictly after the confirmation
	t.Cleanup(startHubProcess(t, mgmt, opts))
	testenv.Eventually(t, "the confirmed removal goes ahead under the new hub", 60*time.Second, func() error {
		if _, err := getTenant(c, confirmed+"-rb"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s-rb: %v", confirmed, err)
		}
		return nil
	})
	testenv.Consistently(t, "the eight others stay held under the new hub", 5*time.Second, func() error {
		h, g, err := held()
		if err != nil {
			return err
		}
		if len(g) != 2 || len(h) != 8 {
			return fmt.Errorf("gone %v, held %v", g, h)
		}
		return nil
	})

	// The window's count survived too: one more removal in r-b (another Distribution placed in
	// r-b by name, then not) is held although this hub process removed nothing by the budget yet.
	create(t, c, &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec: regionsyncv1alpha1.DistributionSpec{Template: tenantTemplate("team", ""),
			Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-a", "r-b"}}},
	})
	testenv.Eventually(t, "late placed in r-a and r-b", 30*time.Second, func() error {
		_, err := getTenant(c, "late-rb")
		return err
	})
	updateDist(t, c, "late", func(late *regionsyncv1alpha1.Distribution) {
		late.Spec.Placement.Regions = []string{"r-a"}
	})
	testenv.Eventually(t, "late's removal from r-b held by r-b's window", 30*time.Second, func() error {
		cond := condition(t, c, "late", regionsyncv1alpha1.DistributionRemovalHeld)
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "Region r-b's") {
			return fmt.Errorf("RemovalHeld %+v", cond)
		}
		return nil
	})
	if tn, err := getTenant(c, "late-rb"); err != nil || tn.DeletionTimestamp != nil {
		t.Fatalf("late-rb: %v (deleting %v)", err, tn.DeletionTimestamp)
	}

	// A deleted Region's objects go only through the guard: all held until confirmed, although
	// each Distribution selecting it by label loses one (late names it: its object stays, the
	// region listed RegionNotFound).
	if err := c.Delete(bg, &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "r-a"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "removals from the deleted r-a held", 30*time.Second, func() error {
		if e := entry(getDist(t, c, "late"), "r-a"); e == nil || e.Reason != regionsyncv1alpha1.ReasonRegionNotFound {
			return fmt.Errorf("late: r-a %+v", e)
		}
		for _, n := range names {
			cond := condition(t, c, n, regionsyncv1alpha1.DistributionRemovalHeld)
			if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "Region r-a was deleted") {
				return fmt.Errorf("%s: RemovalHeld %+v", n, cond)
			}
		}
		return nil
	})
	for _, n := range append([]string{"late"}, names...) {
		if tn, err := getTenant(c, n+"-ra"); err != nil || tn.DeletionTimestamp != nil {
			t.Fatalf("%s-ra: %v (deleting %v)", n, err, tn.DeletionTimestamp)
		}
	}
}

// TestHubDistributionSecrets: with allowSecrets a Secret source is placed in its region, and
// neither the Distribution (status included) nor any Event carries its data.
func TestHubDistributionSecrets(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	const secret = "s3cr3t-value"
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		region("r-a", nil, tenantShard("-ra", "r-a", "Secret")),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"password": []byte(secret)}},
	)
	tenantWriter(t, c, ns, "placer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	hubReads(t, c, "hub-secrets", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}})
	startHub(t, mgmt, hub.Options{DefaultServiceAccountName: "placer", AllowSecrets: true})
	create(t, c, &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Source:    &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "Secret", Name: "creds"},
			Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-a"}},
		},
	})
	testenv.Eventually(t, "creds-ra placed, Applied=True", 30*time.Second, func() error {
		s := &corev1.Secret{}
		if err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: "creds-ra"}, s); err != nil {
			return err
		}
		if string(s.Data["password"]) != secret || s.Labels[keys.Distribution] != "creds" {
			return fmt.Errorf("creds-ra labels %v, %d keys", s.Labels, len(s.Data))
		}
		if cond := condition(t, c, "creds", regionsyncv1alpha1.DistributionApplied); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Applied %+v", cond)
		}
		return nil
	})
	d := getDist(t, c, "creds")
	var evs corev1.EventList
	if err := c.List(bg, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{fmt.Sprintf("%+v", d), fmt.Sprintf("%+v", evs.Items)} {
		if strings.Contains(text, secret) || strings.Contains(text, "czNjcjN0LXZhbHVl") {
			t.Fatalf("the Secret's data is in the Distribution or an Event: %s", text)
		}
	}
}
