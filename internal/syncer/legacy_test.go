//go:build integration

package syncer_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The copies gravitational/sync-controller leaves in a region, met by an agent with its
// annotation domain at its first start (the cutover): each test creates them before it starts
// the agent.

// legacyDomain is sync-controller's annotation domain.
const legacyDomain = "cloud.teleport.dev"

// withLegacyDomain configures sync-controller's annotation domain and, as the tests share one
// regional cluster, the test's namespaces as the shard's namespace prefix: an agent takes over
// the unmarked copies in namespaces created for them wherever its shard maps, so two such agents
// must not map the same namespaces (one region's cluster has one agent).
func withLegacyDomain(edit ...func(*regionsync.Options)) envOption {
	return withOptions(func(o *regionsync.Options) {
		o.AnnotationDomain = legacyDomain
		o.Shard.NamespacePrefix = strings.TrimPrefix(o.Region, "region-") + "-"
		for _, f := range edit {
			f(o)
		}
	})
}

// legacyNamespace creates the local namespace stem as sync-controller does for the copy named
// owner (only its owner annotation; none when owner is empty: a namespace sync-controller did
// not create), and the same namespace on management.
func (e *env) legacyNamespace(stem, owner string) string {
	e.t.Helper()
	ns := e.remoteNamespace(stem)
	local := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if owner != "" {
		local.Annotations = map[string]string{e.keys.Owner: owner}
	}
	if err := e.local.Create(e.ctx, local); err != nil {
		e.t.Fatal(err)
	}
	return ns
}

// legacyCopy creates an unmarked local Tenant, as sync-controller's copies are.
func (e *env) legacyCopy(ns, name, display string, mutate ...func(*demov1alpha1.Tenant)) *demov1alpha1.Tenant {
	e.t.Helper()
	o := testenv.Tenant(ns, name, display, mutate...)
	if err := e.local.Create(e.ctx, o); err != nil {
		e.t.Fatal(err)
	}
	return o
}

// claimedBySyncController is what sync-controller leaves on a management object it synced: its
// finalizer and the generation annotations.
func (e *env) claimedBySyncController(o *demov1alpha1.Tenant) {
	o.Finalizers = append(o.Finalizers, e.keys.Finalizer)
	annotate(e.keys.RemoteGeneration, "1")(o)
	annotate(e.keys.LocalGeneration, "1")(o)
}

// untouchedLegacy fails unless the local object ns/name is still the unmarked object want with
// its spec, and (when remoteRV is set) the management object still has that resourceVersion.
func (e *env) untouchedLegacy(ns, name string, want *demov1alpha1.Tenant, remoteRV string) error {
	l, err := e.getLocal(ns, name)
	if err != nil {
		return fmt.Errorf("local %s/%s: %w", ns, name, err)
	}
	if l.UID != want.UID || !l.DeletionTimestamp.IsZero() {
		return fmt.Errorf("local %s/%s replaced or being deleted", ns, name)
	}
	if l.Labels[e.keys.Region] != "" || l.Annotations[e.keys.RemoteUID] != "" || l.Spec != want.Spec {
		return fmt.Errorf("local %s/%s written: labels %v, annotations %v, spec %+v", ns, name, l.Labels, l.Annotations, l.Spec)
	}
	if remoteRV == "" {
		return nil
	}
	r, err := e.getRemote(ns, name)
	if err != nil {
		return fmt.Errorf("remote %s/%s: %w", ns, name, err)
	}
	if r.ResourceVersion != remoteRV {
		return fmt.Errorf("remote %s/%s written: finalizers %v, annotations %v", ns, name, r.Finalizers, r.Annotations)
	}
	return nil
}

// namespaceGoing reports nil once the local namespace is gone or being deleted.
func (e *env) namespaceGoing(ns string) error {
	n := &corev1.Namespace{}
	err := e.local.Get(e.ctx, client.ObjectKey{Name: ns}, n)
	if apierrors.IsNotFound(err) || err == nil && !n.DeletionTimestamp.IsZero() {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("local namespace %s still there", ns)
}

// A sync-controller copy paused in the region is not taken over: nothing is written for it on
// either side (no mark on the copy; no finalizer, no generation annotations on management),
// whether management's object was claimed by sync-controller or not; its unpaused neighbour is
// taken over in place.
func TestLegacyCopyPausedLocally(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLegacyDomain(), withStartLater())
	paused := annotate(e.keys.Paused, "true")

	unclaimedNS := e.legacyNamespace("lp-unclaimed", "frozen")
	frozen := e.legacyCopy(unclaimedNS, "frozen", "old", paused)
	e.tenant(unclaimedNS, "frozen", "new")

	claimedNS := e.legacyNamespace("lp-claimed", "held")
	held := e.legacyCopy(claimedNS, "held", "old", paused)
	e.tenant(claimedNS, "held", "new", e.claimedBySyncController)

	liveNS := e.legacyNamespace("lp-live", "live")
	live := e.legacyCopy(liveNS, "live", "old")
	e.tenant(liveNS, "live", "new", e.claimedBySyncController)

	remoteRV := map[string]string{}
	for ns, name := range map[string]string{unclaimedNS: "frozen", claimedNS: "held"} {
		r, err := e.getRemote(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		remoteRV[name] = r.ResourceVersion
	}

	e.start()
	if _, local := e.waitSynced(liveNS, "live"); local.UID != live.UID {
		t.Fatal("the unpaused copy was replaced, not taken over in place")
	}
	e.eventually("both paused objects counted paused", func() error {
		for _, s := range e.syncer.Stats() {
			if n := s.Counts[string(syncer.StatePaused)]; n != 2 {
				return fmt.Errorf("%s: %d paused", s.Resource, n)
			}
		}
		return nil
	})
	testenv.Consistently(t, "the paused copies and their management objects untouched", 3*time.Second, func() error {
		return errors.Join(
			e.untouchedLegacy(unclaimedNS, "frozen", frozen, remoteRV["frozen"]),
			e.untouchedLegacy(claimedNS, "held", held, remoteRV["held"]))
	})
}

// A paused unmarked object that appears at a mapped name after the agent started (after its
// listing of unmarked objects) is found when the copy is to be created: its management object is
// claimed by then, but the object is not taken over and no generation annotations are written.
func TestLegacyCopyPausedAfterStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLegacyDomain())
	liveNS := e.remoteNamespace("la-live")
	e.tenant(liveNS, "live", "Live")
	e.waitSynced(liveNS, "live")

	ns := e.legacyNamespace("la-frozen", "frozen")
	frozen := e.legacyCopy(ns, "frozen", "old", annotate(e.keys.Paused, "true"))
	e.tenant(ns, "frozen", "new")
	e.eventually("the paused object counted paused", func() error {
		for _, s := range e.syncer.Stats() {
			if n := s.Counts[string(syncer.StatePaused)]; n != 1 {
				return fmt.Errorf("%s: %d paused", s.Resource, n)
			}
		}
		return nil
	})
	testenv.Consistently(t, "the paused object untouched, no generations recorded", 3*time.Second, func() error {
		r, err := e.getRemote(ns, "frozen")
		if err != nil {
			return err
		}
		if r.Annotations[e.keys.RemoteGeneration] != "" || r.Annotations[e.keys.LocalGeneration] != "" {
			return fmt.Errorf("generation annotations written: %v", r.Annotations)
		}
		return e.untouchedLegacy(ns, "frozen", frozen, "")
	})
}

// A sync-controller copy whose management object no longer exists is taken over in place and
// deleted with the namespace sync-controller created for it, as sync-controller would have. What
// is not provably such a copy stays: a copy in a namespace sync-controller did not create, one
// in an excluded namespace (although created for it), and a paused one.
func TestLegacyCopyOfVanishedObjectDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLegacyDomain(func(o *regionsync.Options) {
		o.Shard.ExcludedNamespaces = []string{strings.TrimPrefix(o.Region, "region-") + "-lv-excluded"}
	}), withStartLater())

	goneNS := e.legacyNamespace("lv-gone", "gone")
	e.legacyCopy(goneNS, "gone", "orphan")
	foreignNS := e.legacyNamespace("lv-foreign", "")
	foreign := e.legacyCopy(foreignNS, "stray", "not provably a copy")
	excludedNS := e.legacyNamespace("lv-excluded", "kept")
	excluded := e.legacyCopy(excludedNS, "kept", "excluded")
	pausedNS := e.legacyNamespace("lv-paused", "frozen")
	paused := e.legacyCopy(pausedNS, "frozen", "paused", annotate(e.keys.Paused, "true"))
	liveNS := e.remoteNamespace("lv-live")
	e.tenant(liveNS, "live", "Live")

	e.start()
	e.waitSynced(liveNS, "live")
	e.eventually("the orphaned copy's namespace deleted", func() error { return e.namespaceGoing(goneNS) })
	testenv.Consistently(t, "the other unmarked objects untouched", 3*time.Second, func() error {
		return errors.Join(
			e.untouchedLegacy(foreignNS, "stray", foreign, ""),
			e.untouchedLegacy(excludedNS, "kept", excluded, ""),
			e.untouchedLegacy(pausedNS, "frozen", paused, ""))
	})
}

// A sync-controller copy whose management object is being deleted is taken over in place and
// deleted with its namespace; management's object keeps its finalizer until the copy is gone. A
// copy in a namespace sync-controller did not create stays, and its object is released.
func TestLegacyCopyOfTerminatingObjectDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLegacyDomain(), withStartLater())
	ownedNS := e.legacyNamespace("lt-owned", "acme")
	e.legacyCopy(ownedNS, "acme", "Acme")
	foreignNS := e.legacyNamespace("lt-foreign", "")
	foreign := e.legacyCopy(foreignNS, "acme", "Acme")
	for _, ns := range []string{ownedNS, foreignNS} {
		e.tenant(ns, "acme", "Acme", e.claimedBySyncController)
		r, err := e.getRemote(ns, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.mgmt.Delete(e.ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	e.start()
	releasedEarly := false
	e.eventually("the copy's namespace deleted, then management's object released", func() error {
		_, rerr := e.getRemote(ownedNS, "acme")
		_, lerr := e.getLocal(ownedNS, "acme")
		if apierrors.IsNotFound(rerr) && !apierrors.IsNotFound(lerr) {
			releasedEarly = true
		}
		if !apierrors.IsNotFound(rerr) {
			return fmt.Errorf("management object still there: %v", rerr)
		}
		return e.namespaceGoing(ownedNS)
	})
	if releasedEarly {
		t.Error("management's object was released while its copy still existed")
	}
	e.eventually("the object whose copy is not provably sync-controller's released", func() error {
		if _, err := e.getRemote(foreignNS, "acme"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("management object still there: %v", err)
		}
		return nil
	})
	if err := e.untouchedLegacy(foreignNS, "acme", foreign, ""); err != nil {
		t.Error(err)
	}
}

// Deleting sync-controller's copies goes through the deletion budget like any deletion: all of a
// kind's copies losing their management objects together is held (the namespaces stay), and an
// operator's release lets one go.
func TestLegacyCopiesVanishingHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLegacyDomain(), withStartLater())
	names := []string{"va", "vb"}
	nss := map[string]string{}
	for _, n := range names {
		nss[n] = e.legacyNamespace("lh-"+n, n)
		e.legacyCopy(nss[n], n, n)
	}

	e.start()
	e.waitEvent(e.local, nss["va"], "va", syncer.ReasonDeletionHeld)
	e.never("a held copy deleted", 5*time.Second, func() bool {
		return e.kept(nss, names...) != nil || e.namespaceGoing(nss["va"]) == nil || e.namespaceGoing(nss["vb"]) == nil
	})
	e.setLocal(nss["va"], "va", annotate(e.keys.ReleaseDeletion, "true"))
	e.eventually("the released copy's namespace deleted", func() error { return e.namespaceGoing(nss["va"]) })
	if err := e.kept(nss, "vb"); err != nil {
		t.Fatalf("the release of one copy deleted another: %v", err)
	}
}
