//go:build integration

package tenantoperator_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.SetProcessLoggers()
	os.Exit(m.Run())
}

// TestTenantConditions: on a real API server, the operator reports the standard conditions
// kstatus reads. A served plan is Ready=True (kstatus Current) with its token Secret; an unknown
// plan, which the API server accepts, is Stalled=True and Ready=False for that generation
// (kstatus Failed, phase Failed, no endpoint), and no status is written again while nothing
// changes; a served plan again clears Stalled and is Ready.
func TestTenantConditions(t *testing.T) {
	bg := context.Background()
	f := testenv.StartT(t, "region")
	c := f.Cluster("region").Client
	ctx, cancel := context.WithCancel(bg)
	t.Cleanup(cancel)
	if err := testenv.StartTenantOperator(ctx, f.Cluster("region").Config, "us-east-1", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-acme"}}); err != nil {
		t.Fatal(err)
	}
	tenant := testenv.Tenant("tenant-acme", "acme", "Acme Corp", func(o *demov1alpha1.Tenant) { o.Spec.Plan = "team" })
	if err := c.Create(bg, tenant); err != nil {
		t.Fatal(err)
	}
	// judged waits until the operator has acted on the current generation and kstatus says want.
	judged := func(want kstatus.Status, check func(*demov1alpha1.Tenant) error) *demov1alpha1.Tenant {
		t.Helper()
		got := &demov1alpha1.Tenant{}
		testenv.Eventually(t, "the Tenant judged "+string(want), 20*time.Second, func() error {
			if err := c.Get(bg, client.ObjectKeyFromObject(tenant), got); err != nil {
				return err
			}
			if got.Status.ObservedGeneration != got.Generation {
				return fmt.Errorf("status of generation %d, the Tenant's is %d", got.Status.ObservedGeneration, got.Generation)
			}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(got)
			if err != nil {
				return err
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
			if err != nil {
				return err
			}
			if res.Status != want {
				return fmt.Errorf("kstatus %s (%s), conditions %+v", res.Status, res.Message, got.Status.Conditions)
			}
			return check(got)
		})
		return got
	}
	condition := func(tn *demov1alpha1.Tenant, typ string, status metav1.ConditionStatus, reason string) error {
		cond := meta.FindStatusCondition(tn.Status.Conditions, typ)
		if cond == nil || cond.Status != status || cond.Reason != reason || cond.ObservedGeneration != tn.Generation {
			return fmt.Errorf("%s %+v, want %s %s of generation %d", typ, cond, status, reason, tn.Generation)
		}
		return nil
	}
	served := func(tn *demov1alpha1.Tenant) error {
		if err := condition(tn, tenantoperator.ConditionReady, metav1.ConditionTrue, tenantoperator.ReasonProvisioned); err != nil {
			return err
		}
		if s := meta.FindStatusCondition(tn.Status.Conditions, tenantoperator.ConditionStalled); s != nil {
			return fmt.Errorf("still Stalled: %+v", s)
		}
		if tn.Status.Phase != tenantoperator.PhaseReady || tn.Status.Endpoint != tenantoperator.Endpoint(tn, "us-east-1") || tn.Status.TokenSecret != tenantoperator.TokenSecretName {
			return fmt.Errorf("status %+v", tn.Status)
		}
		return nil
	}
	judged(kstatus.CurrentStatus, served)
	token := &corev1.Secret{}
	if err := c.Get(bg, client.ObjectKey{Namespace: "tenant-acme", Name: tenantoperator.TokenSecretName}, token); err != nil {
		t.Fatalf("the token Secret: %v", err)
	}

	setPlan := func(plan string) {
		t.Helper()
		tn := &demov1alpha1.Tenant{}
		if err := c.Get(bg, client.ObjectKeyFromObject(tenant), tn); err != nil {
			t.Fatal(err)
		}
		tn.Spec.Plan = plan
		if err := c.Update(bg, tn); err != nil {
			t.Fatalf("setting plan %q: %v", plan, err)
		}
	}
	setPlan("gold")
	stalled := judged(kstatus.FailedStatus, func(tn *demov1alpha1.Tenant) error {
		if err := condition(tn, tenantoperator.ConditionStalled, metav1.ConditionTrue, tenantoperator.ReasonUnknownPlan); err != nil {
			return err
		}
		if err := condition(tn, tenantoperator.ConditionReady, metav1.ConditionFalse, tenantoperator.ReasonUnknownPlan); err != nil {
			return err
		}
		if tn.Status.Phase != tenantoperator.PhaseFailed || tn.Status.Endpoint != "" {
			return fmt.Errorf("status %+v", tn.Status)
		}
		return nil
	})
	if msg := meta.FindStatusCondition(stalled.Status.Conditions, tenantoperator.ConditionStalled).Message; msg != `spec.plan "gold" is not a plan this region serves (free, team, enterprise)` {
		t.Errorf("Stalled message %q", msg)
	}
	testenv.Consistently(t, "no status write while the stalled spec stays", 3*time.Second, func() error {
		now := &demov1alpha1.Tenant{}
		if err := c.Get(bg, client.ObjectKeyFromObject(tenant), now); err != nil {
			return err
		}
		if now.ResourceVersion != stalled.ResourceVersion {
			return fmt.Errorf("written again: resourceVersion %s, was %s", now.ResourceVersion, stalled.ResourceVersion)
		}
		return nil
	})

	setPlan("enterprise")
	judged(kstatus.CurrentStatus, served)
}
