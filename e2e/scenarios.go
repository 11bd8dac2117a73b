//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// RunScenarios runs every scenario against a deployed fleet. deployCopy is a writable copy of
// deploy/ (with scripts/new-region.sh beside it) for the add-a-region scenario.
func RunScenarios(t *testing.T, f fleet.Fleet, deployCopy string) {
	ctx := context.Background()
	keys := shard.NewKeys("regionsync.dev")
	t.Run("tenant per region flows down and its status and token come back", func(t *testing.T) {
		for _, r := range f.Regions() {
			createTenant(t, f, tenantNamespace, r)
		}
		for _, r := range f.Regions() {
			waitRoundTrip(t, f, keys, tenantNamespace, r)
		}
		// The agents' Events are written with their shipped RBAC: the copy's Created event in
		// the region, and on management the NamespaceCreated event of the remote object (the
		// namespace exists only on management until the agent creates it in the region).
		for _, r := range f.Regions() {
			waitEvent(t, f.Region(r), tenantNamespace, "acme", syncer.ReasonCreated)
			waitEvent(t, f.Management(), tenantNamespace, "acme-"+r, syncer.ReasonNamespaceCreated)
		}
	})
	t.Run("no secret data in logs or events", func(t *testing.T) {
		all, err := f.AgentLogs()
		if err != nil {
			t.Fatal(err)
		}
		if len(all) == 0 {
			t.Fatal("no agent logs to check")
		}
		for _, r := range f.Regions() {
			tok := &corev1.Secret{}
			if err := f.Region(r).Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: tenantoperator.TokenSecretName}, tok); err != nil {
				t.Fatal(err)
			}
			value := string(tok.Data["token"])
			if len(value) < 16 {
				t.Fatalf("%s: token too short to search for", r)
			}
			if strings.Contains(all, value) {
				t.Errorf("%s's token appears in the agents' logs", r)
			}
			for _, c := range []client.Client{f.Management(), f.Region(r)} {
				evs := &eventsv1.EventList{}
				if err := c.List(ctx, evs, client.InNamespace(tenantNamespace)); err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs.Items {
					if strings.Contains(ev.Note, value) {
						t.Errorf("%s's token appears in event %s: %s", r, ev.Name, ev.Reason)
					}
				}
			}
		}
	})
	t.Run("objects of one region never reach another", func(t *testing.T) {
		// Every region holds exactly one copy in namespace tenant-acme: its own (marked for it,
		// from its own remote object), never another region's.
		for _, r := range f.Regions() {
			list := &demov1alpha1.TenantList{}
			if err := f.Region(r).List(ctx, list, client.InNamespace(tenantNamespace)); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 {
				t.Fatalf("%s holds %d Tenants in %s, want its own only", r, len(list.Items), tenantNamespace)
			}
			tn := list.Items[0]
			if tn.Labels[keys.Region] != r || tn.Annotations[keys.RemoteUID] != string(remoteUID(t, f, tenantNamespace, r)) {
				t.Fatalf("%s's copy is marked for %q from %q", r, tn.Labels[keys.Region], tn.Annotations[keys.RemoteUID])
			}
		}
	})
	t.Run("leader killed, sync continues", func(t *testing.T) {
		r := f.Regions()[0]
		victim, err := f.KillLeader(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		createTenant(t, f, "tenant-after-kill", r)
		waitRoundTrip(t, f, keys, "tenant-after-kill", r)
		t.Logf("%s: leader %s killed; the next object completed its round trip %s later", r, victim, time.Since(start).Round(10*time.Millisecond))
	})
	t.Run("add a region with new-region.sh", func(t *testing.T) {
		name := "sa-east-1"
		out, err := exec.Command(filepath.Join(deployCopy, "..", "scripts", "new-region.sh"), name).CombinedOutput()
		if err != nil {
			t.Fatalf("new-region.sh: %v\n%s", err, out)
		}
		if out, err := exec.Command(filepath.Join(deployCopy, "..", "scripts", "new-region.sh"), name).CombinedOutput(); err == nil {
			t.Fatalf("new-region.sh accepted an existing region:\n%s", out)
		}
		if err := f.AddRegion(ctx, name, deployCopy); err != nil {
			t.Fatal(err)
		}
		createTenant(t, f, tenantNamespace, name)
		waitRoundTrip(t, f, keys, tenantNamespace, name)
	})
	t.Run("objects outside the shard's namespace prefix or region label are never claimed", func(t *testing.T) {
		outsideShard(t, f, keys)
	})
	t.Run("isolation on management: a region's identity writes only its own shard", func(t *testing.T) {
		isolation(t, f, keys)
	})
	t.Run("RBAC: the agent cannot read what its rules do not need", func(t *testing.T) {
		r := f.Regions()[0]
		local, mgmt, err := f.AgentIdentities(r)
		if err != nil {
			t.Fatal(err)
		}
		other := f.Regions()[1]
		forbidden := map[string]error{
			"list all secrets in the region":       local.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantNamespace)),
			"get a secret not named in the config": local.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "anything"}, &corev1.Secret{}),
			"list configmaps in the region":        local.List(ctx, &corev1.ConfigMapList{}),
			"list namespaces in the region":        local.List(ctx, &corev1.NamespaceList{}),
			"get another region's token":           mgmt.Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: tenantoperator.TokenSecretName + "-" + other}, &corev1.Secret{}),
			"list secrets on management":           mgmt.List(ctx, &corev1.SecretList{}),
			"list namespaces on management":        mgmt.List(ctx, &corev1.NamespaceList{}),
			"get another region's Region":          mgmt.Get(ctx, client.ObjectKey{Name: other}, &regionsyncv1alpha1.Region{}),
			"delete a Tenant on management":        mgmt.Delete(ctx, &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "acme-" + r}}),
			"create a Tenant on management":        mgmt.Create(ctx, &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "forged-" + r}, Spec: demov1alpha1.TenantSpec{DisplayName: "x"}}),
		}
		for what, err := range forbidden {
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: want Forbidden, got %v", what, err)
			}
		}
		// And what the rules are for is allowed.
		if err := mgmt.Get(ctx, client.ObjectKey{Name: r}, &regionsyncv1alpha1.Region{}); err != nil {
			t.Errorf("its own Region: %v", err)
		}
		if err := local.Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: tenantoperator.TokenSecretName}, &corev1.Secret{}); err != nil {
			t.Errorf("its configured secret: %v", err)
		}
		// Management's identity, pinned at the first sync in the region's record.
		ids := &corev1.NamespaceList{}
		if err := mgmt.List(ctx, ids, client.MatchingFields{"metadata.name": "kube-system"}); err != nil || len(ids.Items) != 1 {
			t.Errorf("management's identity: %v (%d namespaces)", err, len(ids.Items))
		}
		record := &corev1.ConfigMap{}
		if err := local.Get(ctx, client.ObjectKey{Namespace: fleet.AgentNamespace, Name: syncer.IdentityRecordName(r)}, record); err != nil {
			t.Errorf("the management identity record: %v", err)
		} else if len(ids.Items) == 1 && record.Data["clusterID"] != string(ids.Items[0].UID) {
			t.Errorf("the identity record says %q, management is %s", record.Data["clusterID"], ids.Items[0].UID)
		}
	})
}

func remoteUID(t *testing.T, f fleet.Fleet, ns, region string) types.UID {
	tn := &demov1alpha1.Tenant{}
	if err := f.Management().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "acme-" + region}, tn); err != nil {
		t.Fatal(err)
	}
	return tn.UID
}

// tenantNamespace is where the scenarios create their Tenants on management: inside the shipped
// overlays' namespacePrefix ("tenant-"), so it maps to the same namespace in the region.
const tenantNamespace = "tenant-acme"

// regionLabels are the labels management-side tooling puts on every object meant for a region
// (the overlays' labelSelector and the admission policy select on them).
func regionLabels(region string) map[string]string {
	return map[string]string{regionsyncv1alpha1.RegionLabel: region}
}

// createTenant creates namespace ns on management with the region's Tenant "acme-<region>"
// named for the shard ("acme-us-east-1" → local "acme") and labelled for the region, and the
// empty token Secret it uploads to.
func createTenant(t *testing.T, f fleet.Fleet, ns, region string) {
	t.Helper()
	ctx := context.Background()
	mgmt := f.Management()
	if err := mgmt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenantoperator.TokenSecretName + "-" + region, Labels: regionLabels(region)}},
		testenv.Tenant(ns, "acme-"+region, "Acme "+region, func(t *demov1alpha1.Tenant) { t.Labels = regionLabels(region) }),
	} {
		if err := mgmt.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// waitRoundTrip waits until the region's Tenant in ns is copied down, reconciled, its status and
// token are back on management and the generation annotations are current.
// waitEvent waits until c holds an Event of the agent (reporting controller syncer.EventSource)
// with reason about namespace/name, read through events.k8s.io/v1 as an operator would.
func waitEvent(t *testing.T, c client.Client, namespace, name, reason string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("a %s event of %s about %s/%s", reason, syncer.EventSource, namespace, name), 30*time.Second, func() error {
		evs := &eventsv1.EventList{}
		if err := c.List(context.Background(), evs, client.InNamespace(namespace)); err != nil {
			return err
		}
		var seen []string
		for _, ev := range evs.Items {
			seen = append(seen, ev.ReportingController+" "+ev.Reason+" "+ev.Regarding.Name)
			if ev.Regarding.Name == name && ev.Reason == reason && ev.ReportingController == syncer.EventSource {
				return nil
			}
		}
		return fmt.Errorf("events: %v", seen)
	})
}

func waitRoundTrip(t *testing.T, f fleet.Fleet, keys shard.Keys, ns, region string) {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, fmt.Sprintf("%s/acme-%s round trip in %s", ns, region, region), 2*time.Minute, func() error {
		remote, local, token := &demov1alpha1.Tenant{}, &demov1alpha1.Tenant{}, &corev1.Secret{}
		if err := f.Management().Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-" + region}, remote); err != nil {
			return err
		}
		if err := f.Region(region).Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme"}, local); err != nil {
			return fmt.Errorf("local: %w", err)
		}
		if err := f.Management().Get(ctx, client.ObjectKey{Namespace: ns, Name: tenantoperator.TokenSecretName + "-" + region}, token); err != nil {
			return err
		}
		if keys.GenerationsCurrent(remote.Annotations, remote.Generation, local.Generation) &&
			remote.Status.Phase == tenantoperator.PhaseReady && remote.Status.ObservedGeneration == local.Generation &&
			len(token.Data["token"]) > 0 {
			return nil
		}
		return fmt.Errorf("status %+v annotations %v token %d bytes", remote.Status, remote.Annotations, len(token.Data["token"]))
	})
}
