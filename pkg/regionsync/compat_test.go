//go:build integration

package regionsync_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// gravitational/sync-controller's own test cases (controller/controller_test.go, TestSync), one
// subtest per case, named after it, with its fixture and its expectations, run against regionsync
// in MIGRATION.md's sync-controller compatible configuration: two API servers (management and
// region), a PodDisruptionBudget-like custom resource, sync-controller's Reconciler fields as that
// test sets them (RemoteResourceSuffix "-remote-rs", LocalNamespaceSuffix "-local-ns",
// LocalSecretNames secret1 and secret2, LocalPropagationPolicy Background) and
// AnnotationDomain cloud.teleport.dev; every case's fixture exists before the syncer starts (the
// cutover). Where regionsync documents a different behaviour (MIGRATION.md, "sync-controller's
// own test cases"), the case asserts regionsync's and its comment names the difference.
//
// The cases run twice: on the host's own, unfiltered cache (a sync-controller user's manager), and
// on LocalCacheOptions (the agent's cache, which holds marked copies only).

// compatGVK is the PodDisruptionBudget-like kind (testdata/compat.regionsync.dev_poddisruptionbudgets.yaml).
var compatGVK = schema.GroupVersionKind{Group: "compat.regionsync.dev", Version: "v1", Kind: "PodDisruptionBudget"}

const (
	compatRegion          = "compat"
	compatDomain          = "cloud.teleport.dev"
	compatResourceSuffix  = "-remote-rs"
	compatLocalNSSuffix   = "-local-ns"
	compatName            = "test" // the local object's name in every case
	compatFinalizer       = compatDomain + "/sync-local"
	compatPaused          = compatDomain + "/paused"
	compatOwner           = compatDomain + "/sync-owner"
	compatOwnerKind       = compatDomain + "/sync-owner-kind"
	compatLocalGeneration = compatDomain + "/sync-local-generation"
	compatRemoteGen       = compatDomain + "/sync-remote-generation"
	compatMark            = compatDomain + "/sync-region"
	compatRemoteUID       = compatDomain + "/sync-remote-uid"
	compatCopiedKeys      = compatDomain + "/sync-copied-keys"
	compatUploadedHash    = compatDomain + "/last-uploaded-hash"
)

// pdbObject is one side of a case's fixture: a PodDisruptionBudget's metadata, spec and status.
type pdbObject struct {
	labels, annotations map[string]string
	finalizers          []string
	spec                policyv1.PodDisruptionBudgetSpec
	status              policyv1.PodDisruptionBudgetStatus
}

// compatCase is one of sync-controller's cases: its fixture and the checks of its expectations.
type compatCase struct {
	// name is the upstream case's description.
	name string
	// remote and local are the fixture's objects (nil: none). A remote object with finalizers is
	// deleted once created (it is terminating when the syncer starts).
	remote, local *pdbObject
	// secrets are the local Secrets (name → the value of their key "data"), controlled by the
	// local object when there is one; for each an empty remote Secret "<name>-remote-rs" exists.
	secrets map[string]string
	// noLocalNamespace: the local namespace does not exist. unownedNamespace: it exists without
	// the owner annotation (otherwise it carries cloud.teleport.dev/sync-owner=test when there is
	// a local object).
	noLocalNamespace, unownedNamespace bool
	check                              func(t *testing.T, c *compatFixture)
}

// minAvailable is a spec with only MinAvailable set, as the cases write it.
func minAvailable(n int) policyv1.PodDisruptionBudgetSpec {
	return policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(int32(n)))}
}

// currentHealthy is a status with only CurrentHealthy set, as the cases write it.
func currentHealthy(n int32) policyv1.PodDisruptionBudgetStatus {
	return policyv1.PodDisruptionBudgetStatus{CurrentHealthy: n}
}

// compatCases are sync-controller's TestSync cases, in its order.
var compatCases = []compatCase{
	{
		name: "Sync metadata, spec, status, and secrets",
		remote: &pdbObject{labels: map[string]string{"remote": "label"}, annotations: map[string]string{"remote": "anno"},
			spec: minAvailable(2), status: currentHealthy(1)},
		local: &pdbObject{labels: map[string]string{"local": "label"}, annotations: map[string]string{"local": "anno"},
			spec: minAvailable(1), status: currentHealthy(2)},
		secrets: map[string]string{"secret1": "data1", "secret2": "data2", "secret3": "data3"},
		check: func(t *testing.T, c *compatFixture) {
			c.eventually(t, "metadata, spec, status and secrets synced", func() error {
				remote, local, err := c.both()
				if err != nil {
					return err
				}
				// As upstream: management's object is claimed, keeps its labels, annotations and
				// spec, records the generations (the copy's spec changed once: 2; management's 1)
				// and takes the copy's status.
				if err := c.expectRemote(remote, []string{compatFinalizer}, map[string]string{"remote": "label"},
					map[string]string{"remote": "anno", compatLocalGeneration: "2", compatRemoteGen: "1"}, minAvailable(2), currentHealthy(2)); err != nil {
					return err
				}
				// As upstream: the copy takes management's spec and keeps its status; regionsync
				// takes the copy over in place (the same object).
				if err := c.expectLocal(local, minAvailable(2), currentHealthy(2)); err != nil {
					return err
				}
				// Documented difference ("labels and annotations of the copy"): management's labels
				// and annotations are laid over the copy's, so the copy's own keys stay
				// (sync-controller replaced them: only remote=label, remote=anno), and the copy
				// carries regionsync's mark.
				if err := c.expectMarked(local, remote, map[string]string{"remote": "label", "local": "label"},
					map[string]string{"remote": "anno", "local": "anno"}); err != nil {
					return err
				}
				// As upstream: secret1 and secret2 (named, controlled by the copy) are uploaded, each
				// with the hash annotation; secret3 is not. Documented difference ("uploaded Secret
				// content", "last-uploaded-hash"): the hash is regionsync's own (of type and data),
				// not sync-controller's value, and the local Secrets are not annotated.
				return c.expectUploaded(remote, map[string]string{"secret1": "data1", "secret2": "data2"})
			})
			c.expectLocalSecretsUnwritten(t)
		},
	},
	{
		name:    "Paused remotely",
		remote:  &pdbObject{annotations: map[string]string{compatPaused: "true"}, spec: minAvailable(1), status: currentHealthy(1)},
		local:   &pdbObject{spec: minAvailable(2), status: currentHealthy(2)},
		secrets: map[string]string{"secret1": "data1"},
		check: func(t *testing.T, c *compatFixture) {
			// As upstream: nothing is written on either side, no secret is uploaded.
			c.untouched(t, "paused on management")
		},
	},
	{
		name:    "Paused locally",
		remote:  &pdbObject{spec: minAvailable(1), status: currentHealthy(1)},
		local:   &pdbObject{annotations: map[string]string{compatPaused: "true"}, spec: minAvailable(2), status: currentHealthy(2)},
		secrets: map[string]string{"secret1": "data1"},
		check: func(t *testing.T, c *compatFixture) {
			// As upstream: nothing is written on either side (the copy is not taken over, its
			// management object not claimed), no secret is uploaded.
			c.untouched(t, "paused in the region")
		},
	},
	{
		name:    "Local is missing and created, unowned secrets not uploaded",
		remote:  &pdbObject{spec: minAvailable(2), status: currentHealthy(1)},
		secrets: map[string]string{"secret1": "data1"},
		check: func(t *testing.T, c *compatFixture) {
			c.expectCreated(t, false)
		},
	},
	{
		name:             "Local and local namespace is missing and created",
		remote:           &pdbObject{spec: minAvailable(2), status: currentHealthy(1)},
		noLocalNamespace: true,
		check: func(t *testing.T, c *compatFixture) {
			c.expectCreated(t, true)
		},
	},
	{
		name:    "Remote deleted causing owned local namespace to be deleted",
		local:   &pdbObject{spec: minAvailable(2), status: currentHealthy(2)},
		secrets: map[string]string{"secret1": "data1"},
		check: func(t *testing.T, c *compatFixture) {
			// As upstream: the copy's namespace (created for it) is deleted, and the copy with it.
			// regionsync takes the copy over first and deletes it within the deletion budget, once
			// management answered "not found" (MIGRATION.md: a copy whose management object no
			// longer exists).
			c.eventually(t, "the copy's namespace deleted", c.localDeleted)
			if err := c.secretsUntouched(); err != nil {
				t.Error(err)
			}
		},
	},
	{
		name:             "Remote deleted causing local resource to be deleted when namespace unowned",
		local:            &pdbObject{spec: minAvailable(2), status: currentHealthy(2)},
		secrets:          map[string]string{"secret1": "data1"},
		unownedNamespace: true,
		check: func(t *testing.T, c *compatFixture) {
			// Documented difference ("what may be deleted"; "copies in a namespace sync-controller
			// did not create"): the object is not provably a copy (unmarked, in a namespace not
			// created for it), so regionsync leaves it, where sync-controller deleted it.
			c.untouched(t, "an unmarked object in a namespace not created for it")
		},
	},
	{
		name: "Remote being deleted with finalizer causing local resource to be deleted",
		remote: &pdbObject{finalizers: []string{compatFinalizer}, spec: minAvailable(2),
			status: currentHealthy(2)},
		local:            &pdbObject{spec: minAvailable(2), status: currentHealthy(2)},
		secrets:          map[string]string{"secret1": "data1"},
		unownedNamespace: true,
		check: func(t *testing.T, c *compatFixture) {
			// As upstream: the finalizer is released and management's object is gone.
			c.eventually(t, "management's object released", func() error {
				if _, err := c.getRemote(); !apierrors.IsNotFound(err) {
					return fmt.Errorf("management object still there (%v)", err)
				}
				return nil
			})
			// Documented difference (as in the case above): the unmarked object in a namespace
			// not created for it stays, where sync-controller deleted it.
			c.remoteRV = "" // released: gone
			c.untouched(t, "an unmarked object in a namespace not created for it")
		},
	},
}

// compatFixture is one case's objects as created, and the clients that read them back.
type compatFixture struct {
	ctx                 context.Context
	remoteNS, localNS   string
	localUID            types.UID
	remoteRV, localRV   string
	secretRVs           map[string]string // remote Secrets, by name
	localSecretRVs      map[string]string
	mgmt, local         client.Client
	remoteKey, localKey types.NamespacedName
}

// TestSyncControllerCases runs sync-controller's cases on the host's own cache, as a
// sync-controller user's manager has it.
func TestSyncControllerCases(t *testing.T) {
	runSyncControllerCases(t, nil)
}

// TestSyncControllerCasesAgentCache runs them on the agent's cache (LocalCacheOptions: marked
// copies only; sync-controller's copies are found by the syncer's own listing).
func TestSyncControllerCasesAgentCache(t *testing.T) {
	runSyncControllerCases(t, regionsync.LocalCacheOptions)
}

func runSyncControllerCases(t *testing.T, cacheOptions func(regionsync.Options) cache.Options) {
	bg := context.Background()
	for _, c := range []*testenv.Cluster{management, region} {
		if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join("testdata", "compat.regionsync.dev_poddisruptionbudgets.yaml")}, ErrorIfPathMissing: true,
		}); err != nil {
			t.Fatalf("installing the PodDisruptionBudget-like CRD on %s: %v", c.Name, err)
		}
	}
	fixtures := make([]*compatFixture, len(compatCases))
	for i := range compatCases {
		fixtures[i] = createCompatFixture(t, &compatCases[i])
	}

	kind := &unstructured.Unstructured{}
	kind.SetGroupVersionKind(compatGVK)
	opts := regionsync.Options{
		Region:           compatRegion,
		AnnotationDomain: compatDomain,
		Management:       regionsync.Management{Config: managementConfig},
		Shard:            regionsync.Shard{RemoteResourceSuffix: compatResourceSuffix, LocalNamespaceSuffix: compatLocalNSSuffix},
		Resources: []regionsync.Resource{{
			Object: kind, Secrets: []string{"secret1", "secret2"}, DeletePropagation: metav1.DeletePropagationBackground,
		}},
	}
	mgrOpts := ctrl.Options{Scheme: hostScheme, Metrics: metricsserver.Options{BindAddress: "0"}}
	if cacheOptions != nil {
		mgrOpts.Cache = cacheOptions(opts)
	}
	mgr, err := ctrl.NewManager(region.Config, mgrOpts)
	if err != nil {
		t.Fatal(err)
	}
	syncer, err := regionsync.New(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(bg)
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			t.Errorf("manager: %v", err)
		}
		removeCompatFixtures(t, fixtures)
	})

	// Both paused objects are looked at in the first pass: from then on, whatever the syncer
	// would write for them it has written.
	testenv.Eventually(t, "the first pass reached both paused objects", 60*time.Second, func() error {
		stats := syncer.Stats() // one kind
		if len(stats) != 1 {
			return fmt.Errorf("stats of %d kinds (management not reached yet?)", len(stats))
		}
		if n := stats[0].Counts["paused"]; n != 2 {
			return fmt.Errorf("objects by state: %v", stats[0].Counts)
		}
		return nil
	})
	for i, c := range compatCases {
		t.Run(c.name, func(t *testing.T) { c.check(t, fixtures[i]) })
	}
}

// createCompatFixture creates a case's namespaces, objects and secrets as sync-controller's test
// does, on the management and regional API servers.
func createCompatFixture(t *testing.T, c *compatCase) *compatFixture {
	t.Helper()
	f := &compatFixture{ctx: context.Background(), mgmt: management.Client, local: region.Client, secretRVs: map[string]string{}, localSecretRVs: map[string]string{}}
	remoteNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test"}}
	if err := f.mgmt.Create(f.ctx, remoteNS); err != nil {
		t.Fatal(err)
	}
	f.remoteNS, f.localNS = remoteNS.Name, remoteNS.Name+compatLocalNSSuffix
	f.remoteKey = types.NamespacedName{Namespace: f.remoteNS, Name: compatName + compatResourceSuffix}
	f.localKey = types.NamespacedName{Namespace: f.localNS, Name: compatName}
	if !c.noLocalNamespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.localNS}}
		if c.local != nil && !c.unownedNamespace {
			// The namespace sync-controller created for the copy "test". (Upstream's setup reads the
			// owner's name before it names the object, so its annotation ends up empty; the cases
			// are about a namespace owned by the copy, as their names say.)
			ns.Annotations = map[string]string{compatOwner: compatName}
		}
		if err := f.local.Create(f.ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	var owner *unstructured.Unstructured
	if c.local != nil {
		owner = createPDB(t, f.local, f.localKey, c.local)
		f.localUID, f.localRV = owner.GetUID(), owner.GetResourceVersion()
	}
	if c.remote != nil {
		remote := createPDB(t, f.mgmt, f.remoteKey, c.remote)
		f.remoteRV = remote.GetResourceVersion()
		if len(c.remote.finalizers) > 0 {
			if err := f.mgmt.Delete(f.ctx, remote); err != nil {
				t.Fatal(err)
			}
			got, err := f.getRemote()
			if err != nil {
				t.Fatal(err)
			}
			f.remoteRV = got.GetResourceVersion()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.secrets)) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.localNS, Name: name}, StringData: map[string]string{"data": c.secrets[name]}}
		if owner != nil {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: compatGVK.GroupVersion().String(), Kind: compatGVK.Kind,
				Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		}
		if err := f.local.Create(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		f.localSecretRVs[name] = s.ResourceVersion
		r := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.remoteNS, Name: name + compatResourceSuffix}}
		if err := f.mgmt.Create(f.ctx, r); err != nil {
			t.Fatal(err)
		}
		f.secretRVs[r.Name] = r.ResourceVersion
	}
	return f
}

// createPDB creates the PodDisruptionBudget-like object key from o, then writes its status.
func createPDB(t *testing.T, c client.Client, key types.NamespacedName, o *pdbObject) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(compatGVK)
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	u.SetLabels(o.labels)
	u.SetAnnotations(o.annotations)
	u.SetFinalizers(o.finalizers)
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&o.spec)
	if err != nil {
		t.Fatal(err)
	}
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&o.status)
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = spec
	if err := c.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s: %v", key, err)
	}
	u.Object["status"] = status
	if err := c.Status().Update(context.Background(), u); err != nil {
		t.Fatalf("writing the status of %s: %v", key, err)
	}
	return u
}

// removeCompatFixtures deletes what the cases left (finalizers removed first: no syncer runs any
// more) and waits until the namespaces are gone, so that the next run's syncer finds none of it.
func removeCompatFixtures(t *testing.T, fixtures []*compatFixture) {
	t.Helper()
	for _, f := range fixtures {
		if remote, err := f.getRemote(); err == nil {
			remote.SetFinalizers(nil)
			if err := f.mgmt.Update(f.ctx, remote); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the finalizers of %s: %v", f.remoteKey, err)
			}
		}
		for c, ns := range map[client.Client]string{f.mgmt: f.remoteNS, f.local: f.localNS} {
			if err := c.Delete(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting namespace %s: %v", ns, err)
			}
		}
	}
	testenv.Eventually(t, "the cases' namespaces gone", 2*time.Minute, func() error {
		for _, f := range fixtures {
			for c, ns := range map[client.Client]string{f.mgmt: f.remoteNS, f.local: f.localNS} {
				if err := c.Get(f.ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("namespace %s still there (%v)", ns, err)
				}
			}
		}
		return nil
	})
}

func (f *compatFixture) eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testenv.Eventually(t, what, 30*time.Second, cond)
}

func (f *compatFixture) getRemote() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(compatGVK)
	return u, f.mgmt.Get(f.ctx, f.remoteKey, u)
}

func (f *compatFixture) getLocal() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(compatGVK)
	return u, f.local.Get(f.ctx, f.localKey, u)
}

// both reads the management object and the local one.
func (f *compatFixture) both() (remote, local *unstructured.Unstructured, err error) {
	if remote, err = f.getRemote(); err != nil {
		return nil, nil, fmt.Errorf("management %s: %w", f.remoteKey, err)
	}
	if local, err = f.getLocal(); err != nil {
		return nil, nil, fmt.Errorf("region %s: %w", f.localKey, err)
	}
	return remote, local, nil
}

// pdbOf reads an object's spec and status as sync-controller's test compares them: typed (an
// absent status is the zero status).
func pdbOf(u *unstructured.Unstructured) (spec policyv1.PodDisruptionBudgetSpec, status policyv1.PodDisruptionBudgetStatus, err error) {
	if m, ok := u.Object["spec"].(map[string]any); ok {
		if err = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec); err != nil {
			return spec, status, err
		}
	}
	if m, ok := u.Object["status"].(map[string]any); ok {
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &status)
	}
	return spec, status, err
}

func (f *compatFixture) expectRemote(remote *unstructured.Unstructured, finalizers []string, labels, annotations map[string]string,
	spec policyv1.PodDisruptionBudgetSpec, status policyv1.PodDisruptionBudgetStatus) error {
	gotSpec, gotStatus, err := pdbOf(remote)
	if err != nil {
		return err
	}
	if !slices.Equal(remote.GetFinalizers(), finalizers) || !maps.Equal(remote.GetLabels(), labels) || !maps.Equal(remote.GetAnnotations(), annotations) ||
		!equality.Semantic.DeepEqual(gotSpec, spec) || !equality.Semantic.DeepEqual(gotStatus, status) {
		return fmt.Errorf("management object: finalizers %v, labels %v, annotations %v, spec %+v, status %+v; want %v, %v, %v, %+v, %+v",
			remote.GetFinalizers(), remote.GetLabels(), remote.GetAnnotations(), gotSpec, gotStatus, finalizers, labels, annotations, spec, status)
	}
	return nil
}

// expectLocal checks the local object's spec and status (typed), and, when the fixture had one,
// that it is still that object (taken over in place).
func (f *compatFixture) expectLocal(local *unstructured.Unstructured, spec policyv1.PodDisruptionBudgetSpec, status policyv1.PodDisruptionBudgetStatus) error {
	gotSpec, gotStatus, err := pdbOf(local)
	if err != nil {
		return err
	}
	if f.localUID != "" && local.GetUID() != f.localUID {
		return errors.New("the local object was replaced, not taken over in place")
	}
	if !equality.Semantic.DeepEqual(gotSpec, spec) || !equality.Semantic.DeepEqual(gotStatus, status) {
		return fmt.Errorf("local object: spec %+v, status %+v; want %+v, %+v", gotSpec, gotStatus, spec, status)
	}
	return nil
}

// expectMarked checks the copy's labels and annotations: exactly labels and annotations plus
// regionsync's mark (the region label, the remote UID, the copied keys).
func (f *compatFixture) expectMarked(local, remote *unstructured.Unstructured, labels, annotations map[string]string) error {
	wantLabels := maps.Clone(labels)
	if wantLabels == nil {
		wantLabels = map[string]string{}
	}
	wantLabels[compatMark] = compatRegion
	got := maps.Clone(local.GetAnnotations())
	if _, ok := got[compatCopiedKeys]; !ok {
		return fmt.Errorf("local object: no %s annotation: %v", compatCopiedKeys, got)
	}
	delete(got, compatCopiedKeys)
	wantAnnotations := maps.Clone(annotations)
	if wantAnnotations == nil {
		wantAnnotations = map[string]string{}
	}
	wantAnnotations[compatRemoteUID] = string(remote.GetUID())
	if !maps.Equal(local.GetLabels(), wantLabels) || !maps.Equal(got, wantAnnotations) {
		return fmt.Errorf("local object: labels %v, annotations %v; want %v, %v (and %s)", local.GetLabels(), got, wantLabels, wantAnnotations, compatCopiedKeys)
	}
	return nil
}

// uploaded returns the remote Secrets in the case's management namespace that the object with
// uid controls, by name.
func (f *compatFixture) uploaded(uid types.UID) (map[string]corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := f.mgmt.List(f.ctx, list, client.InNamespace(f.remoteNS)); err != nil {
		return nil, err
	}
	out := map[string]corev1.Secret{}
	for _, s := range list.Items {
		if c := metav1.GetControllerOf(&s); c != nil && c.UID == uid {
			out[s.Name] = s
		}
	}
	return out, nil
}

// expectUploaded checks that exactly the local Secrets named in want (name → data) were uploaded
// to "<name>-remote-rs", Opaque, controlled by remote and with a hash annotation.
func (f *compatFixture) expectUploaded(remote *unstructured.Unstructured, want map[string]string) error {
	got, err := f.uploaded(remote.GetUID())
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("uploaded secrets %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for name, data := range want {
		s, ok := got[name+compatResourceSuffix]
		if !ok || string(s.Data["data"]) != data || len(s.Data) != 1 || s.Type != corev1.SecretTypeOpaque || s.Annotations[compatUploadedHash] == "" {
			return fmt.Errorf("uploaded secret %s%s (found %v): data %q, type %s, annotations %v", name, compatResourceSuffix, ok, s.Data["data"], s.Type, s.Annotations)
		}
	}
	return nil
}

// expectLocalSecretsUnwritten checks that the local Secrets are as created (regionsync keeps its
// upload hash on the remote Secret only).
func (f *compatFixture) expectLocalSecretsUnwritten(t *testing.T) {
	t.Helper()
	for name, rv := range f.localSecretRVs {
		s := &corev1.Secret{}
		if err := f.local.Get(f.ctx, client.ObjectKey{Namespace: f.localNS, Name: name}, s); err != nil {
			t.Errorf("local secret %s: %v", name, err)
		} else if s.ResourceVersion != rv {
			t.Errorf("local secret %s written: annotations %v", name, s.Annotations)
		}
	}
}

// secretsUntouched fails when a remote Secret was written (nothing uploaded).
func (f *compatFixture) secretsUntouched() error {
	for name, rv := range f.secretRVs {
		s := &corev1.Secret{}
		if err := f.mgmt.Get(f.ctx, client.ObjectKey{Namespace: f.remoteNS, Name: name}, s); err != nil {
			return fmt.Errorf("remote secret %s: %w", name, err)
		}
		if s.ResourceVersion != rv {
			return fmt.Errorf("remote secret %s written: owners %v, annotations %v", name, s.OwnerReferences, s.Annotations)
		}
	}
	return nil
}

// untouched checks for a few seconds that nothing was written: the management object and the
// local one as created (or still absent), their namespace in place, no secret uploaded.
func (f *compatFixture) untouched(t *testing.T, what string) {
	t.Helper()
	testenv.Consistently(t, "nothing written ("+what+")", 3*time.Second, func() error {
		remote, err := f.getRemote()
		switch {
		case f.remoteRV == "" && !apierrors.IsNotFound(err):
			return fmt.Errorf("management object: %v", err)
		case f.remoteRV != "" && err != nil:
			return fmt.Errorf("management object: %w", err)
		case f.remoteRV != "" && remote.GetResourceVersion() != f.remoteRV:
			return fmt.Errorf("management object written: finalizers %v, annotations %v", remote.GetFinalizers(), remote.GetAnnotations())
		}
		local, err := f.getLocal()
		if err != nil {
			return fmt.Errorf("local object: %w", err)
		}
		if local.GetResourceVersion() != f.localRV || !local.GetDeletionTimestamp().IsZero() {
			return fmt.Errorf("local object written: labels %v, annotations %v, deleting %v", local.GetLabels(), local.GetAnnotations(), local.GetDeletionTimestamp())
		}
		ns := &corev1.Namespace{}
		if err := f.local.Get(f.ctx, client.ObjectKey{Name: f.localNS}, ns); err != nil {
			return fmt.Errorf("local namespace: %w", err)
		}
		if !ns.DeletionTimestamp.IsZero() {
			return fmt.Errorf("local namespace %s being deleted", f.localNS)
		}
		return f.secretsUntouched()
	})
}

// localDeleted reports nil once the local object is gone or its namespace is being deleted
// (sync-controller's test counts an object in a terminating namespace as deleted).
func (f *compatFixture) localDeleted() error {
	ns := &corev1.Namespace{}
	switch err := f.local.Get(f.ctx, client.ObjectKey{Name: f.localNS}, ns); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !ns.DeletionTimestamp.IsZero():
		return nil
	}
	if _, err := f.getLocal(); !apierrors.IsNotFound(err) {
		return fmt.Errorf("local object still there (%v), its namespace not being deleted", err)
	}
	return nil
}

// expectCreated checks the two cases where the copy is created: management's object claimed with
// the generations (1, 1) and its spec; the copy with that spec (and, when the namespace was
// missing, the namespace created for it); no secret uploaded.
func (f *compatFixture) expectCreated(t *testing.T, namespaceCreated bool) {
	t.Helper()
	f.eventually(t, "the copy created and the generations recorded", func() error {
		remote, local, err := f.both()
		if err != nil {
			return err
		}
		// Documented difference ("status of a copy that has none yet"): sync-controller uploads the
		// new copy's empty status, so management's becomes CurrentHealthy 0; regionsync uploads a
		// status only once the copy has one, so management's (CurrentHealthy 1) stays.
		if err := f.expectRemote(remote, []string{compatFinalizer}, nil,
			map[string]string{compatLocalGeneration: "1", compatRemoteGen: "1"}, minAvailable(2), currentHealthy(1)); err != nil {
			return err
		}
		// As upstream: the copy has management's spec and no status (CurrentHealthy 0).
		if err := f.expectLocal(local, minAvailable(2), currentHealthy(0)); err != nil {
			return err
		}
		// Documented difference ("labels and annotations of the copy"): the copy carries
		// regionsync's mark.
		if err := f.expectMarked(local, remote, nil, nil); err != nil {
			return err
		}
		if !namespaceCreated {
			return nil
		}
		// As upstream: the namespace is created for the copy (sync-owner = its name).
		// regionsync also records the kind (MIGRATION.md, "Annotation keys") and marks it.
		ns := &corev1.Namespace{}
		if err := f.local.Get(f.ctx, client.ObjectKey{Name: f.localNS}, ns); err != nil {
			return err
		}
		if ns.Annotations[compatOwner] != compatName || ns.Annotations[compatOwnerKind] != compatGVK.Kind+"."+compatGVK.Group || ns.Labels[compatMark] != compatRegion {
			return fmt.Errorf("local namespace %s: annotations %v, labels %v", f.localNS, ns.Annotations, ns.Labels)
		}
		return nil
	})
	// As upstream: a Secret the copy does not control is never uploaded; and (the difference
	// above) management's status is not replaced by an empty one later either.
	testenv.Consistently(t, "no secret uploaded, management's status kept", 2*time.Second, func() error {
		remote, err := f.getRemote()
		if err != nil {
			return err
		}
		if _, status, err := pdbOf(remote); err != nil || status.CurrentHealthy != 1 {
			return fmt.Errorf("management status %+v (%v)", status, err)
		}
		return f.secretsUntouched()
	})
}
