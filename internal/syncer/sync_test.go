//go:build integration

package syncer_test

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
)

// Full sync of metadata, spec, status and secrets; the local namespace is created and owned.
func TestFullSync(t *testing.T) {
	e := newEnv(t)
	ns := e.remoteNamespace("full")
	e.remoteSecret(ns)
	e.tenant(ns, "acme", "Acme Corp")
	remote, local := e.waitSynced(ns, "acme")

	if local.Spec != remote.Spec {
		t.Errorf("local spec %+v, remote %+v", local.Spec, remote.Spec)
	}
	if local.Labels["tier"] != "gold" || local.Annotations["example.com/note"] != "hello" {
		t.Errorf("labels/annotations not copied: %v %v", local.Labels, local.Annotations)
	}
	if local.Labels[e.keys.Region] != e.opts.Region || local.Annotations[e.keys.RemoteUID] != string(remote.UID) {
		t.Errorf("local copy not marked: %v %v", local.Labels, local.Annotations)
	}
	if !controllerutil.ContainsFinalizer(remote, e.keys.Finalizer) {
		t.Errorf("remote not claimed: finalizers %v", remote.Finalizers)
	}
	if want := tenantoperator.Endpoint(local, "region"); remote.Status.Endpoint != want {
		t.Errorf("remote status endpoint %q, want %q", remote.Status.Endpoint, want)
	}
	// The namespace was created by the agent and says for whom.
	lns := &corev1.Namespace{}
	if err := e.local.Get(e.ctx, client.ObjectKey{Name: ns}, lns); err != nil {
		t.Fatal(err)
	}
	if lns.Annotations[e.keys.Owner] != "acme" || lns.Annotations[e.keys.OwnerKind] != "Tenant.demo.regionsync.dev" {
		t.Errorf("namespace owner annotations %v", lns.Annotations)
	}
	// The token comes back, controlled by the remote object, with the hash of what was sent.
	e.eventually("token uploaded", func() error {
		localTok, remoteTok := &corev1.Secret{}, &corev1.Secret{}
		if err := e.local.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "tenant-token"}, localTok); err != nil {
			return err
		}
		if err := e.mgmt.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "tenant-token" + e.suffix}, remoteTok); err != nil {
			return err
		}
		if !bytes.Equal(localTok.Data["token"], remoteTok.Data["token"]) || len(remoteTok.Data["token"]) == 0 {
			return fmt.Errorf("remote token differs from local")
		}
		if !metav1.IsControlledBy(remoteTok, remote) {
			return fmt.Errorf("remote token owners %v", remoteTok.OwnerReferences)
		}
		if remoteTok.Annotations[e.keys.LastUploadedHash] == "" {
			return fmt.Errorf("no %s annotation", e.keys.LastUploadedHash)
		}
		return nil
	})
	e.waitEvent(e.local, ns, "acme", syncer.ReasonCreated)
	e.waitEvent(e.mgmt, ns, "acme"+e.suffix, syncer.ReasonNamespaceCreated)
}

// A spec change on management reaches the region and both generation annotations follow.
func TestSpecUpdateBumpsGenerations(t *testing.T) {
	e := newEnv(t)
	ns := e.remoteNamespace("gen")
	e.tenant(ns, "acme", "Acme")
	remote, local := e.waitSynced(ns, "acme")
	remoteGen, localGen := remote.Generation, local.Generation
	remote.Spec.Replicas = 5
	if err := e.mgmt.Update(e.ctx, remote); err != nil {
		t.Fatal(err)
	}
	remote2, local2 := e.waitSynced(ns, "acme")
	if remote2.Generation != remoteGen+1 || local2.Generation != localGen+1 || local2.Spec.Replicas != 5 {
		t.Fatalf("generations remote %d→%d local %d→%d, replicas %d", remoteGen, remote2.Generation, localGen, local2.Generation, local2.Spec.Replicas)
	}
}

// Objects outside the shard are ignored: other suffix, no suffix, other namespace prefix.
func TestOutsideShardIgnored(t *testing.T) {
	e := newEnv(t, withOptions(func(o *regionsync.Options) { o.Shard.NamespacePrefix = "t" }))
	ns := e.remoteNamespace("outside") // "tNN-outside": has the prefix
	other := "x" + ns                  // lacks the prefix
	if err := e.mgmt.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}); err != nil {
		t.Fatal(err)
	}
	outside := []client.ObjectKey{
		{Namespace: ns, Name: "other-region-x"},
		{Namespace: ns, Name: "nosuffix"},
		{Namespace: other, Name: "acme" + e.suffix},
	}
	for _, k := range outside {
		o := &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}, Spec: demov1alpha1.TenantSpec{DisplayName: "x"}}
		if err := e.mgmt.Create(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	e.tenant(ns, "inside", "In")
	e.waitSynced(ns, "inside")
	for _, k := range outside {
		o := &demov1alpha1.Tenant{}
		if err := e.mgmt.Get(e.ctx, k, o); err != nil {
			t.Fatal(err)
		}
		if len(o.Finalizers) != 0 || len(o.Annotations) != 0 {
			t.Errorf("%s outside the shard was touched: %v %v", k, o.Finalizers, o.Annotations)
		}
	}
	for _, k := range []client.ObjectKey{{Namespace: ns, Name: "other-region-x"}, {Namespace: ns, Name: "nosuffix"}, {Namespace: other, Name: "acme"}} {
		if _, err := e.getLocal(k.Namespace, k.Name); !apierrors.IsNotFound(err) {
			t.Errorf("%s outside the shard was copied: %v", k, err)
		}
	}
}

// Remote deletion: the namespace the agent created is deleted, then the finalizer released.
func TestRemoteDeletedDeletesOwnedNamespace(t *testing.T) {
	e := newEnv(t)
	ns := e.remoteNamespace("del-owned")
	e.tenant(ns, "acme", "Acme")
	remote, _ := e.waitSynced(ns, "acme")
	if err := e.mgmt.Delete(e.ctx, remote); err != nil {
		t.Fatal(err)
	}
	e.eventually("local namespace deleted", func() error {
		lns := &corev1.Namespace{}
		err := e.local.Get(e.ctx, client.ObjectKey{Name: ns}, lns)
		if apierrors.IsNotFound(err) || (err == nil && !lns.DeletionTimestamp.IsZero()) {
			return nil
		}
		return fmt.Errorf("namespace still there: %v", err)
	})
	e.eventually("remote released and gone", func() error {
		if _, err := e.getRemote(ns, "acme"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("remote still there: %v", err)
		}
		return nil
	})
	if _, err := e.getLocal(ns, "acme"); !apierrors.IsNotFound(err) {
		t.Fatalf("local copy still there after the finalizer was released: %v", err)
	}
}

// Remote deletion in a namespace the agent did not create: only the object is deleted.
func TestRemoteDeletedKeepsForeignNamespace(t *testing.T) {
	e := newEnv(t)
	ns := e.remoteNamespace("del-foreign")
	if err := e.local.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	e.tenant(ns, "acme", "Acme")
	remote, _ := e.waitSynced(ns, "acme")
	if err := e.mgmt.Delete(e.ctx, remote); err != nil {
		t.Fatal(err)
	}
	e.eventually("remote gone", func() error {
		if _, err := e.getRemote(ns, "acme"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("remote still there: %v", err)
		}
		return nil
	})
	if _, err := e.getLocal(ns, "acme"); !apierrors.IsNotFound(err) {
		t.Fatalf("local copy still there: %v", err)
	}
	lns := &corev1.Namespace{}
	if err := e.local.Get(e.ctx, client.ObjectKey{Name: ns}, lns); err != nil || !lns.DeletionTimestamp.IsZero() {
		t.Fatalf("foreign namespace was deleted: %v %v", err, lns.DeletionTimestamp)
	}
}
