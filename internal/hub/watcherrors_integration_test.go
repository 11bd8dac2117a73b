//go:build integration

package hub_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestHubCannotWatchKind: a Distribution of a kind the hub's ClusterRole cannot list and watch
// (ConfigMaps, which the shipped rules do not cover) is Applied=False with reason CannotWatch,
// naming the kind, the API server's refusal and the rule to add, with a Warning Event; nothing
// is written for it, and a Distribution of Tenants beside it is placed as usual. Once the
// operator grants the hub the reads, the ConfigMap is placed and Applied turns True.
func TestHubCannotWatchKind(t *testing.T) {
	bg := context.Background()
	mgmt := testenv.StartT(t, "management").Cluster("management")
	c := mgmt.Client
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		region("r-a", nil, tenantShard("-ra", "r-a", tenantKind, "ConfigMap")),
	)
	tenantWriter(t, c, ns, "placer", writeTenants, writeConfigMaps)
	startHub(t, mgmt, hub.Options{DefaultServiceAccountName: "placer"})

	settings := runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"color":"blue"}}`)}
	create(t, c,
		&regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"},
			Spec: regionsyncv1alpha1.DistributionSpec{Template: settings, Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-a"}}}},
		&regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
			Spec: regionsyncv1alpha1.DistributionSpec{Template: tenantTemplate("team", ""), Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-a"}}}},
	)

	testenv.Eventually(t, "settings Applied=False CannotWatch, naming the kind, the refusal and the rule", 30*time.Second, func() error {
		d := getDist(t, c, "settings")
		cond := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != regionsyncv1alpha1.ReasonCannotWatch {
			return fmt.Errorf("Applied %+v", cond)
		}
		for _, s := range []string{"ConfigMap", "forbidden", "configmaps", "get, list and watch"} {
			if !strings.Contains(cond.Message, s) {
				return fmt.Errorf("Applied=False CannotWatch does not name %q: %s", s, cond.Message)
			}
		}
		return nil
	})
	testenv.Eventually(t, "a Warning CannotWatch Event on settings", 10*time.Second, func() error {
		evs := &eventsv1.EventList{}
		if err := c.List(bg, evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Name == "settings" && ev.Type == corev1.EventTypeWarning && ev.Reason == hub.EventCannotWatch && strings.Contains(ev.Note, "ConfigMap") {
				return nil
			}
		}
		return errors.New("no CannotWatch Event")
	})
	testenv.Eventually(t, "shop placed beside it", 30*time.Second, func() error {
		_, err := getTenant(c, "shop-ra")
		return err
	})
	if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: "settings-ra"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("settings-ra written while the hub cannot watch ConfigMaps: %v", err)
	}

	// The operator adds the rule: the cache syncs (client-go retries the list with a backoff of
	// up to 30 s), the ConfigMap is placed and Applied says so.
	hubReads(t, c, "hub-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	testenv.Eventually(t, "settings placed once the hub may watch ConfigMaps", 90*time.Second, func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: "settings-ra"}, cm); err != nil {
			return err
		}
		if cm.Data["color"] != "blue" {
			return fmt.Errorf("data %v", cm.Data)
		}
		if d := getDist(t, c, "settings"); !meta.IsStatusConditionTrue(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied) {
			return fmt.Errorf("conditions %+v", d.Status.Conditions)
		}
		return nil
	})
}
