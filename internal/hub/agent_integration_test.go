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
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// writeConfigMaps lets a ServiceAccount write ConfigMaps.
var writeConfigMaps = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}

// liveAgent runs a real agent for region in-process (as cmd/agent builds it) until stop.
type liveAgent struct {
	t *testing.T
	// opts describe the agent (agentconfig.TenantOptions and the test's settings); each start gives
	// them to regionsync.New, which validates them.
	opts               regionsync.Options
	region, management *testenv.Cluster
	log                *testenv.TestLog
	starts             int
	cancel             context.CancelFunc
	stopped            chan error
}

func (a *liveAgent) start() {
	a.t.Helper()
	a.starts++
	opts := a.opts
	opts.Logger = a.log.Logger(fmt.Sprintf("agent-%d", a.starts)).WithName("regionsync")
	mgr, err := ctrl.NewManager(a.region.Config, ctrl.Options{
		Scheme: testenv.Scheme(), Logger: opts.Logger, Cache: regionsync.LocalCacheOptions(opts),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		a.t.Fatal(err)
	}
	if _, err := regionsync.New(mgr, opts); errors.Is(err, regionsync.ErrInvalidOptions) {
		a.t.Fatalf("the test's agent options: %v", err)
	} else if err != nil {
		a.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.stopped = cancel, make(chan error, 1)
	go func() { a.stopped <- mgr.Start(ctx) }()
}

func (a *liveAgent) stop() {
	a.t.Helper()
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.cancel = nil
	select {
	case err := <-a.stopped:
		if err != nil {
			a.t.Errorf("agent exited with error: %v", err)
		}
	case <-time.After(30 * time.Second):
		a.t.Error("agent did not stop within 30s")
	}
}

// TestHubWithAgent: the hub against a real region (its agent, the demo tenant operator):
//   - currentness of a ConfigMap (no metadata.generation) comes from the agent's applied-content
//     hash: a template change the agent has not copied (its copy paused) is not current, and is
//     once the agent copies it;
//   - health: kstatus by default (the operator's Stalled condition for an unknown plan is
//     Failed, Degraded=True), or the Distribution's CEL rule; a rule that does not compile is
//     Degraded naming its field, while the object is placed as usual; a rule that fails on the
//     copy makes its health Unknown with the error (HealthRuleError) and Degraded lists it;
//   - liveness: the Region goes Ready=Unknown (HeartbeatMissed) after its agent stops and Ready
//     again once it runs again.
func TestHubWithAgent(t *testing.T) {
	bg := context.Background()
	const name = "r-live"
	f := testenv.StartT(t, "management", name)
	mgmt, rc := f.Cluster("management"), f.Cluster(name)
	c := mgmt.Client
	// One Tenant per namespace (the demo operator's token Secret is per namespace): nsCEL holds
	// the Distribution with a CEL rule, nsBad the one whose rule does not compile.
	// nsErr the one whose rule fails on the copy.
	const nsCEL, nsBad, nsErr = "tenant-cel", "tenant-bad", "tenant-err"
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsCEL}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsBad}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsErr}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "regionsync-system"}},
		region(name, nil, tenantShard("-live", name, tenantKind, "ConfigMap")),
		// The hub reads every kind Distributions place (deploy/kustomize/hub/rbac.yaml: a rule per kind).
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "regionsync-hub-configmaps"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "regionsync-hub-configmaps"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "regionsync-hub-configmaps"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "regionsync-system", Name: "regionsync-hub"}}},
	)
	for _, n := range []string{ns, nsCEL, nsBad, nsErr} {
		tenantWriter(t, c, n, "placer", writeTenants, writeConfigMaps)
	}
	startHub(t, mgmt, hub.Options{LivenessGrace: time.Second, DefaultServiceAccountName: "placer"})
	opCtx, stopOperator := context.WithCancel(bg)
	t.Cleanup(stopOperator)
	if err := testenv.StartTenantOperator(opCtx, rc.Config, name, nil); err != nil {
		t.Fatal(err)
	}
	// The agent runs without leader election and without metrics or health servers (liveAgent's
	// manager): those are the agent process's, not the library's.
	opts := agentconfig.TenantOptions(name, "-live", mgmt.Config)
	opts.Shard.NamespacePrefix, opts.Shard.LabelSelector = "tenant-", "regionsync.dev/region="+name
	opts.Resources = append(opts.Resources, regionsync.Resource{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
	opts.Claim.LeaseDuration = 2 * time.Second
	opts.Claim.RenewDeadline = time.Second
	opts.Claim.RetryPeriod = 200 * time.Millisecond
	agent := &liveAgent{t: t, opts: opts, region: rc, management: mgmt, log: testenv.NewTestLog(t)}
	agent.start()
	t.Cleanup(agent.stop)

	dist := func(namespace, name string, template string, health *regionsyncv1alpha1.HealthRule) *regionsyncv1alpha1.Distribution {
		return &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: regionsyncv1alpha1.DistributionSpec{Template: runtime.RawExtension{Raw: []byte(template)},
				Placement: regionsyncv1alpha1.Placement{Regions: []string{"r-live"}}, Health: health},
		}
	}
	const tenantTmpl = `{"apiVersion":"demo.regionsync.dev/v1alpha1","kind":"Tenant","spec":{"displayName":"Acme","plan":%q}}`
	celRule := &regionsyncv1alpha1.HealthRule{
		Current: "object.?status.?phase.orValue('') == 'Ready'",
		Failed:  "object.?status.?conditions.orValue([]).exists(c, c.type == 'Stalled' && c.status == 'True')",
	}
	create(t, c,
		dist(ns, "acme", fmt.Sprintf(tenantTmpl, "team"), nil),
		dist(nsCEL, "acme", fmt.Sprintf(tenantTmpl, "team"), celRule),
		dist(ns, "settings", `{"apiVersion":"v1","kind":"ConfigMap","data":{"color":"blue"}}`, nil),
		dist(nsBad, "acme", fmt.Sprintf(tenantTmpl, "team"), &regionsyncv1alpha1.HealthRule{Current: "object.status.("}),
		dist(nsErr, "acme", fmt.Sprintf(tenantTmpl, "team"), &regionsyncv1alpha1.HealthRule{Current: "object.status.replicas > 0"}),
	)

	getDistIn := func(d string) *regionsyncv1alpha1.Distribution {
		t.Helper()
		got := &regionsyncv1alpha1.Distribution{}
		namespace, n, _ := strings.Cut(d, "/")
		if err := c.Get(bg, types.NamespacedName{Namespace: namespace, Name: n}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// regionEntry waits until Distribution d's (namespace/name) entry for the region satisfies check.
	regionEntry := func(d, what string, check func(e *regionsyncv1alpha1.DistributionRegionStatus, st *regionsyncv1alpha1.DistributionStatus) error) {
		t.Helper()
		testenv.Eventually(t, d+": "+what, 60*time.Second, func() error {
			got := getDistIn(d)
			e := entry(got, "r-live")
			if e == nil {
				return fmt.Errorf("no entry for r-live: %+v", got.Status)
			}
			return check(e, &got.Status)
		})
	}
	currentAnd := func(health string) func(e *regionsyncv1alpha1.DistributionRegionStatus, _ *regionsyncv1alpha1.DistributionStatus) error {
		return func(e *regionsyncv1alpha1.DistributionRegionStatus, _ *regionsyncv1alpha1.DistributionStatus) error {
			if !e.Current || e.Health != health {
				return fmt.Errorf("entry %+v, want current and %s", e, health)
			}
			return nil
		}
	}
	regionEntry(ns+"/acme", "current and healthy (kstatus: the operator's Ready)", currentAnd("Current"))
	regionEntry(nsCEL+"/acme", "current and healthy (its CEL rule)", currentAnd("Current"))
	regionEntry(ns+"/settings", "current (the agent's applied-content hash)", currentAnd("Current"))
	regionEntry(nsBad+"/acme", "placed and current; Degraded naming spec.health.current", func(e *regionsyncv1alpha1.DistributionRegionStatus, st *regionsyncv1alpha1.DistributionStatus) error {
		if !e.Current || e.Health != "Unknown" {
			return fmt.Errorf("entry %+v, want current with Unknown health", e)
		}
		deg := meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionDegraded)
		if deg == nil || deg.Status != metav1.ConditionTrue || deg.Reason != regionsyncv1alpha1.ReasonInvalidHealthRule || !strings.Contains(deg.Message, "spec.health.current does not compile") {
			return fmt.Errorf("Degraded %+v", deg)
		}
		if !meta.IsStatusConditionTrue(st.Conditions, regionsyncv1alpha1.DistributionApplied) {
			return fmt.Errorf("Applied is not True: %+v", st.Conditions)
		}
		return nil
	})

	regionEntry(nsErr+"/acme", "Unknown health naming the rule's error; Degraded listing the region", func(e *regionsyncv1alpha1.DistributionRegionStatus, st *regionsyncv1alpha1.DistributionStatus) error {
		if !e.Current || e.Health != "Unknown" || e.Reason != regionsyncv1alpha1.ReasonHealthRuleError || e.Message != "spec.health.current: no such key: replicas" {
			return fmt.Errorf("entry %+v, want current, Unknown, HealthRuleError naming spec.health.current", e)
		}
		deg := meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionDegraded)
		if deg == nil || deg.Status != metav1.ConditionTrue || deg.Reason != regionsyncv1alpha1.ReasonHealthRuleError || !strings.Contains(deg.Message, "r-live: spec.health.current: no such key: replicas") {
			return fmt.Errorf("Degraded %+v", deg)
		}
		return nil
	})

	// A ConfigMap change the agent does not copy (its copy is paused) is not current.
	localCM := func() *corev1.ConfigMap {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := rc.Client.Get(bg, types.NamespacedName{Namespace: ns, Name: "settings"}, cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	pause := func(paused bool) {
		t.Helper()
		cm := localCM()
		if paused {
			cm.Annotations[keys.Paused] = "true"
		} else {
			delete(cm.Annotations, keys.Paused)
		}
		if err := rc.Client.Update(bg, cm); err != nil {
			t.Fatal(err)
		}
	}
	setTemplate := func(d, template string) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := getDistIn(d)
			got.Spec.Template = runtime.RawExtension{Raw: []byte(template)}
			return c.Update(bg, got)
		}); err != nil {
			t.Fatal(err)
		}
	}
	pause(true)
	setTemplate(ns+"/settings", `{"apiVersion":"v1","kind":"ConfigMap","data":{"color":"green"}}`)
	regionEntry(ns+"/settings", "not current while the agent has not copied the change", func(e *regionsyncv1alpha1.DistributionRegionStatus, _ *regionsyncv1alpha1.DistributionStatus) error {
		if e.Current {
			return fmt.Errorf("entry %+v, want not current", e)
		}
		return nil
	})
	if color := localCM().Data["color"]; color != "blue" {
		t.Fatalf("the paused copy changed: color %q", color)
	}
	pause(false)
	regionEntry(ns+"/settings", "current once the agent copied the change", currentAnd("Current"))
	if color := localCM().Data["color"]; color != "green" {
		t.Fatalf("current, but the copy's color is %q", color)
	}

	// An unknown plan: the operator reports it Stalled; kstatus and the CEL rule say Failed.
	setTemplate(ns+"/acme", fmt.Sprintf(tenantTmpl, "gold"))
	setTemplate(nsCEL+"/acme", fmt.Sprintf(tenantTmpl, "gold"))
	failed := func(e *regionsyncv1alpha1.DistributionRegionStatus, st *regionsyncv1alpha1.DistributionStatus) error {
		if !e.Current || e.Health != "Failed" {
			return fmt.Errorf("entry %+v, want current and Failed", e)
		}
		deg := meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionDegraded)
		if deg == nil || deg.Status != metav1.ConditionTrue || deg.Reason != regionsyncv1alpha1.ReasonUnhealthy || !strings.Contains(deg.Message, "r-live") {
			return fmt.Errorf("Degraded %+v", deg)
		}
		return nil
	}
	regionEntry(ns+"/acme", "Failed by kstatus (Stalled), Degraded", failed)
	regionEntry(nsCEL+"/acme", "Failed by its CEL rule, Degraded", failed)

	// Liveness: the agent stops; its Region goes Unknown; it starts again; Ready again.
	readyCond := func() (*metav1.Condition, error) {
		r := &regionsyncv1alpha1.Region{}
		if err := c.Get(bg, types.NamespacedName{Name: name}, r); err != nil {
			return nil, err
		}
		if cond := meta.FindStatusCondition(r.Status.Conditions, regionsyncv1alpha1.ConditionReady); cond != nil {
			if cond.Status == metav1.ConditionFalse {
				cond.Message += fmt.Sprintf(" (conditions %+v, resources %+v)", r.Status.Conditions, r.Status.Resources)
			}
			return cond, nil
		}
		return nil, errors.New("no Ready condition")
	}
	testenv.Eventually(t, "the agent reports its Region Ready", 30*time.Second, func() error {
		cond, err := readyCond()
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	agent.stop()
	testenv.Eventually(t, "Ready=Unknown (HeartbeatMissed) once the agent is stopped", 60*time.Second, func() error {
		cond, err := readyCond()
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionUnknown || cond.Reason != regionsyncv1alpha1.ReasonHeartbeatMissed {
			return fmt.Errorf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	agent.start()
	testenv.Eventually(t, "Ready=True once the agent runs again", 60*time.Second, func() error {
		cond, err := readyCond()
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
}
