//go:build integration

package syncer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

var (
	cloneOnce sync.Once
	clone     *testenv.Cluster
	cloneErr  error
)

// needClone starts a third API server, a management "clone" (a staging copy or a rebuilt
// cluster: same names, another identity), once for the tests that need it.
func needClone(t *testing.T) *testenv.Cluster {
	t.Helper()
	needFleet(t)
	cloneOnce.Do(func() {
		f, err := testenv.Start([]string{"clone"}, testenv.Options{})
		if err != nil {
			cloneErr = err
			return
		}
		prev := stopFleet
		stopFleet = func() {
			prev()
			_ = f.Stop()
		}
		clone = f.Cluster("clone")
		cloneErr = clone.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultManagementNamespace}})
	})
	if cloneErr != nil {
		t.Fatalf("starting the clone management cluster: %v", cloneErr)
	}
	return clone
}

func kubeSystemUID(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
		t.Fatal(err)
	}
	return string(ns.UID)
}

// TestManagementIdentityPinned: management re-pointed to a cluster holding the same names with
// other specs (a staging clone) → no copy changes, no write by the agent on that cluster, no
// deletion, and the refusal is reported; confirmed with management.clusterID → syncs from it.
func TestManagementIdentityPinned(t *testing.T) {
	t.Parallel()
	cl := needClone(t)
	e := newEnv(t)
	ns := e.remoteNamespace("identity")
	e.tenant(ns, "acme", "Acme")
	e.tenant(ns, "beta", "Beta")
	for _, name := range []string{"acme", "beta"} {
		e.eventually("copy of "+name, func() error { _, err := e.getLocal(ns, name); return err })
	}
	realID := kubeSystemUID(t, e.mgmt)
	record := &corev1.ConfigMap{}
	recordKey := client.ObjectKey{Namespace: e.opts.Claim.FleetNamespace, Name: syncer.IdentityRecordName(e.opts.Region)}
	e.eventually("the identity recorded", func() error {
		if err := e.local.Get(e.ctx, recordKey, record); err != nil {
			return err
		}
		if record.Data["clusterID"] != realID {
			return fmt.Errorf("recorded %q, management is %s", record.Data["clusterID"], realID)
		}
		return nil
	})

	// The clone holds acme (other spec), not beta.
	if err := cl.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	impostor := &demov1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme" + e.suffix},
		Spec:       demov1alpha1.TenantSpec{DisplayName: "Impostor", Plan: "team", Replicas: 9},
	}
	if err := cl.Client.Create(e.ctx, impostor); err != nil {
		t.Fatal(err)
	}
	cloneID := kubeSystemUID(t, cl.Client)

	e.stop()
	e.opts.Management.Config = cl.Config
	e.start()
	e.eventually("the refusal in /readyz", func() error {
		err := e.syncer.Readyz()(&http.Request{})
		if !errors.Is(err, regionsync.ErrManagementIdentity) {
			return fmt.Errorf("readyz: %v", err)
		}
		return nil
	})
	if c := e.syncer.Claim(); c.Reason != syncer.ReasonManagementIdentityMismatch {
		t.Errorf("claim state %+v, want reason %s", c, syncer.ReasonManagementIdentityMismatch)
	}
	e.waitEvent(e.local, recordKey.Namespace, recordKey.Name, syncer.ReasonManagementIdentityMismatch)
	e.never("a copy changed or deleted, or a write on the clone", 8*time.Second, func() bool {
		acme, err := e.getLocal(ns, "acme")
		if err != nil || acme.Spec.DisplayName != "Acme" {
			t.Logf("acme copy: %v %+v", err, acme.Spec)
			return true
		}
		if _, err := e.getLocal(ns, "beta"); err != nil {
			t.Logf("beta copy: %v", err)
			return true
		}
		r := &demov1alpha1.Tenant{}
		if err := cl.Client.Get(e.ctx, client.ObjectKeyFromObject(impostor), r); err != nil || len(r.Finalizers) > 0 || r.Status.Phase != "" || len(r.Annotations) > 0 {
			t.Logf("clone's acme: %v finalizers=%v status=%+v annotations=%v", err, r.Finalizers, r.Status, r.Annotations)
			return true
		}
		err = cl.Client.Get(e.ctx, client.ObjectKey{Namespace: fleetspec.DefaultManagementNamespace, Name: claim.LeaseName(e.opts.Region)}, &coordinationv1.Lease{})
		if !apierrors.IsNotFound(err) {
			t.Logf("shard Lease on the clone: %v", err)
			return true
		}
		return false
	})
	if err := e.local.Get(e.ctx, recordKey, record); err != nil || record.Data["clusterID"] != realID {
		t.Errorf("the record changed while refused: %v %v", err, record.Data)
	}

	// The operator confirms the new identity: the agent syncs from it.
	e.stop()
	e.opts.Management.ClusterID = cloneID
	e.start()
	e.eventually("the copy synced from the confirmed cluster", func() error {
		acme, err := e.getLocal(ns, "acme")
		if err != nil {
			return err
		}
		if acme.Spec.DisplayName != "Impostor" || acme.Annotations[e.keys.RemoteUID] != string(impostor.UID) {
			return fmt.Errorf("copy %q from %s", acme.Spec.DisplayName, acme.Annotations[e.keys.RemoteUID])
		}
		return nil
	})
	e.eventually("the record follows the confirmation", func() error {
		if err := e.local.Get(e.ctx, recordKey, record); err != nil {
			return err
		}
		if record.Data["clusterID"] != cloneID {
			return fmt.Errorf("recorded %q", record.Data["clusterID"])
		}
		return nil
	})
	if err := e.syncer.Readyz()(&http.Request{}); err != nil {
		t.Errorf("readyz after the confirmation: %v", err)
	}
}

// TestIdentityRecordRemovalConfirms: deleting the record is the other confirmation: a refused
// agent accepts the cluster it is connected to within seconds, without a restart.
func TestIdentityRecordRemovalConfirms(t *testing.T) {
	t.Parallel()
	cl := needClone(t)
	e := newEnv(t)
	ns := e.remoteNamespace("record")
	e.tenant(ns, "acme", "Acme")
	e.eventually("copy of acme", func() error { _, err := e.getLocal(ns, "acme"); return err })
	recordKey := client.ObjectKey{Namespace: e.opts.Claim.FleetNamespace, Name: syncer.IdentityRecordName(e.opts.Region)}
	e.eventually("the identity recorded", func() error { return e.local.Get(e.ctx, recordKey, &corev1.ConfigMap{}) })
	if err := cl.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	other := &demov1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme" + e.suffix},
		Spec:       demov1alpha1.TenantSpec{DisplayName: "Rebuilt", Plan: "team", Replicas: 1},
	}
	if err := cl.Client.Create(e.ctx, other); err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.opts.Management.Config = cl.Config
	e.start()
	e.eventually("refused", func() error {
		if c := e.syncer.Claim(); c.Reason != syncer.ReasonManagementIdentityMismatch {
			return fmt.Errorf("claim %+v", c)
		}
		return nil
	})
	if err := e.local.Delete(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: recordKey.Namespace, Name: recordKey.Name}}); err != nil {
		t.Fatal(err)
	}
	e.eventually("synced from the rebuilt cluster", func() error {
		acme, err := e.getLocal(ns, "acme")
		if err != nil {
			return err
		}
		if acme.Spec.DisplayName != "Rebuilt" {
			return fmt.Errorf("copy %q", acme.Spec.DisplayName)
		}
		return nil
	})
}

// TestManagementMovedWhileRunning: the address the agent reaches management by moves, while the
// agent runs, to another cluster its trust accepts (a disaster-recovery cluster restored with the
// same PKI, a VIP or DNS failover): from the first second, no copy changes and the agent writes
// nothing on that cluster (no claim, finalizer, annotation, status, Event or Lease release); the
// refusal is reported. Moved back, it syncs again without a restart.
func TestManagementMovedWhileRunning(t *testing.T) {
	t.Parallel()
	cl := needClone(t)
	sp, err := testenv.NewSwitchProxy(management.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Close)
	e := newEnv(t, withManagementConfig(sp.Config()))
	ns := e.remoteNamespace("moved")
	e.tenant(ns, "acme", "Acme")
	e.tenant(ns, "beta", "Beta")
	for _, name := range []string{"acme", "beta"} {
		e.eventually("copy of "+name+" and its generation annotation", func() error {
			if _, err := e.getLocal(ns, name); err != nil {
				return err
			}
			r, err := e.getRemote(ns, name)
			if err != nil {
				return err
			}
			if r.Annotations[e.keys.RemoteGeneration] == "" {
				return errors.New("no generation annotation yet")
			}
			return nil
		})
	}
	recordKey := client.ObjectKey{Namespace: e.opts.Claim.FleetNamespace, Name: syncer.IdentityRecordName(e.opts.Region)}
	e.eventually("the identity recorded", func() error { return e.local.Get(e.ctx, recordKey, &corev1.ConfigMap{}) })

	// The other cluster serves acme with another spec (and another UID), and no beta.
	if err := cl.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	impostor := &demov1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme" + e.suffix, Labels: map[string]string{}},
		Spec:       demov1alpha1.TenantSpec{DisplayName: "Impostor", Plan: "team", Replicas: 9},
	}
	if err := cl.Client.Create(e.ctx, impostor); err != nil {
		t.Fatal(err)
	}
	if err := sp.Switch(cl.Config); err != nil {
		t.Fatal(err)
	}
	e.never("a copy changed or deleted, or a write on the other cluster", 10*time.Second, func() bool {
		acme, err := e.getLocal(ns, "acme")
		if err != nil || acme.Spec.DisplayName != "Acme" {
			t.Logf("acme copy: %v %+v", err, acme.Spec)
			return true
		}
		if _, err := e.getLocal(ns, "beta"); err != nil {
			t.Logf("beta copy: %v", err)
			return true
		}
		if w := sp.Writes(cl.Config); len(w) > 0 {
			t.Logf("writes on the other cluster: %v", w)
			return true
		}
		return false
	})
	e.eventually("the refusal in /readyz", func() error {
		if err := e.syncer.Readyz()(&http.Request{}); !errors.Is(err, regionsync.ErrManagementIdentity) {
			return fmt.Errorf("readyz: %v", err)
		}
		return nil
	})

	// Moved back: the recorded identity again; syncing resumes.
	if err := sp.Switch(management.Config); err != nil {
		t.Fatal(err)
	}
	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.DisplayName = "Acme again" })
	testenv.Eventually(t, "the copy follows management again", 90*time.Second, func() error {
		acme, err := e.getLocal(ns, "acme")
		if err != nil {
			return err
		}
		if acme.Spec.DisplayName != "Acme again" {
			return fmt.Errorf("copy %q", acme.Spec.DisplayName)
		}
		return nil
	})
	if w := sp.Writes(cl.Config); len(w) > 0 {
		t.Errorf("writes on the other cluster: %v", w)
	}
}
