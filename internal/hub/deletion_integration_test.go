//go:build integration

package hub_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestHubDeletionShrinkGuard: deleting Distributions goes through the shrink guard's per-region
// budget. Five Distributions (and one with deletionPolicy Orphan) are placed in three regions;
// four deleted at once remove one region object each within max(1, 10 %) of a region's objects:
// one goes, the other three are held (RemovalHeld and an Event on each, every copy kept, the
// Distribution kept with its finalizer) until confirmed with the annotation. Orphan removes
// nothing and is not held. In a new window, one deletion within the limit goes through at once.
// The hub runs as its ServiceAccount with the shipped RBAC.
func TestHubDeletionShrinkGuard(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	regions := []string{"r-a", "r-b", "r-c"}
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	for _, r := range regions {
		create(t, c, region(r, map[string]string{"tier": "prod"}, tenantShard("-"+strings.TrimPrefix(r, "r-"), r)))
	}
	tenantWriter(t, c, ns, "placer", writeTenants)
	const window = 20 * time.Second
	startHub(t, mgmt, hub.Options{ShrinkWindow: window, DefaultServiceAccountName: "placer"})

	names := []string{"d1", "d2", "d3", "d4", "d5", "kept"}
	for _, n := range names {
		d := &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n},
			Spec: regionsyncv1alpha1.DistributionSpec{
				Template:  tenantTemplate("team", ""),
				Placement: regionsyncv1alpha1.Placement{RegionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}},
			},
		}
		if n == "kept" {
			d.Spec.DeletionPolicy = regionsyncv1alpha1.DeletionPolicyOrphan
		}
		create(t, c, d)
	}
	copies := func(n string) []string {
		out := make([]string, 0, len(regions))
		for _, r := range regions {
			out = append(out, n+"-"+strings.TrimPrefix(r, "r-"))
		}
		return out
	}
	present := func(n string) error {
		for _, name := range copies(n) {
			tn, err := getTenant(c, name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if tn.DeletionTimestamp != nil {
				return fmt.Errorf("%s is being deleted", name)
			}
		}
		return nil
	}
	gone := func(n string) error {
		for _, name := range copies(n) {
			if _, err := getTenant(c, name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: %v", name, err)
			}
		}
		if err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: n}, &regionsyncv1alpha1.Distribution{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Distribution %s: %v", n, err)
		}
		return nil
	}
	testenv.Eventually(t, "six Distributions placed in three regions", 30*time.Second, func() error {
		for _, n := range names {
			if err := present(n); err != nil {
				return err
			}
		}
		return nil
	})

	// Four deleted at once (and the Orphan one): each region may lose max(1, 10 % of 6) = 1.
	start := time.Now()
	for _, n := range []string{"d1", "d2", "d3", "d4", "kept"} {
		if err := c.Delete(bg, getDist(t, c, n)); err != nil {
			t.Fatal(err)
		}
	}
	var held []string
	testenv.Eventually(t, "one of the four deleted, three held, the Orphan one gone", 30*time.Second, func() error {
		held = held[:0]
		deleted := 0
		for _, n := range []string{"d1", "d2", "d3", "d4"} {
			if gone(n) == nil {
				deleted++
				continue
			}
			d := getDist(t, c, n)
			cond := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionRemovalHeld)
			if cond == nil || cond.Status != metav1.ConditionTrue {
				return fmt.Errorf("%s: RemovalHeld %+v", n, cond)
			}
			held = append(held, n)
		}
		if deleted != 1 || len(held) != 3 {
			return fmt.Errorf("%d deleted, held %v", deleted, held)
		}
		if err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: "kept"}, &regionsyncv1alpha1.Distribution{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Distribution kept: %v", err)
		}
		return nil
	})
	for _, name := range copies("kept") {
		tn, err := getTenant(c, name)
		if err != nil || tn.DeletionTimestamp != nil || tn.Labels[keys.Distribution] != "" {
			t.Fatalf("Orphan removed or kept its label on %s: %v %v", name, err, tn)
		}
	}
	for _, n := range held {
		d := getDist(t, c, n)
		if d.DeletionTimestamp == nil || !slices.Contains(d.Finalizers, keys.HubFinalizer) {
			t.Errorf("%s: deleting %v finalizers %v, want the hub's finalizer kept", n, d.DeletionTimestamp, d.Finalizers)
		}
		cond := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionRemovalHeld)
		// A person can act on it: whole seconds and the exact command.
		for _, want := range []string{"Region r-", "kubectl -n " + ns + " annotate distribution " + n + " " + keys.ConfirmRemovalsBefore + "="} {
			if !strings.Contains(cond.Message, want) {
				t.Errorf("%s: RemovalHeld message %q lacks %q", n, cond.Message, want)
			}
		}
		if fraction.MatchString(cond.Message) {
			t.Errorf("%s: RemovalHeld message %q gives fractions of a second", n, cond.Message)
		}
		if a := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied); a == nil || a.Status != metav1.ConditionFalse || a.Reason != regionsyncv1alpha1.ReasonHeld {
			t.Errorf("%s: Applied %+v, want False/Held", n, a)
		}
	}
	testenv.Eventually(t, "a RemovalHeld Event on each held Distribution", 20*time.Second, func() error {
		var evs eventsv1.EventList
		if err := c.List(bg, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, n := range held {
			found := false
			for _, e := range evs.Items {
				found = found || (e.Regarding.Name == n && e.Reason == hub.EventRemovalHeld)
			}
			if !found {
				return fmt.Errorf("no RemovalHeld Event on %s", n)
			}
		}
		return nil
	})
	testenv.Consistently(t, "the held Distributions' copies stay in every region", 3*time.Second, func() error {
		for _, n := range append(held, "d5") {
			if err := present(n); err != nil {
				return err
			}
		}
		return nil
	})

	// Confirmed: the held removals go ahead and the Distributions go.
	for _, n := range held {
		d := getDist(t, c, n)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, keys.ConfirmRemovalsBefore, time.Now().Add(time.Second).UTC().Format(time.RFC3339))
		if err := c.Patch(bg, d, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "confirmed deletions go ahead", 30*time.Second, func() error {
		for _, n := range held {
			if err := gone(n); err != nil {
				return err
			}
		}
		return nil
	})

	// A new window: one deletion within each region's budget goes at once.
	time.Sleep(time.Until(start.Add(window + 2*time.Second)))
	if err := c.Delete(bg, getDist(t, c, "d5")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "d5 deleted at once", 20*time.Second, func() error { return gone("d5") })
}

// fraction finds a time of day with fractions of a second.
var fraction = regexp.MustCompile(`\d{2}:\d{2}:\d{2}\.\d`)
