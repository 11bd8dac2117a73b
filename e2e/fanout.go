//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// FanOutRegion is the region the fan-out scenario adds: its overlays, written by new-region.sh
// into the e2e's copy of deploy/, turn on namespace fan-out for ConfigMaps. The shipped overlays
// (and make demo) do not fan out.
const FanOutRegion = "me-central-1"

// fanOutLabel is the label of the region's namespaces the fanned-out ConfigMap selects.
const fanOutLabel = "e2e.regionsync.dev/ca-bundle"

// AddFanOutRegion writes the overlays of region name with fan-out for ConfigMaps
// (WriteFanOutOverlays) and deploys the region.
func AddFanOutRegion(t *testing.T, f fleet.Fleet, deployCopy, name string) {
	t.Helper()
	ctx := context.Background()
	WriteFanOutOverlays(t, f, deployCopy, name)
	if err := f.AddRegion(ctx, name, deployCopy); err != nil {
		t.Fatalf("adding %s: %v", name, err)
	}
	waitShardHolder(t, f, name)
}

// waitShardHolder waits until an agent of region holds its shard Lease.
// On timeout it logs the end of the agents' logs (the region added last comes last).
func waitShardHolder(t *testing.T, f fleet.Fleet, region string) {
	t.Helper()
	defer func() {
		if !t.Failed() {
			return
		}
		logs, err := f.AgentLogs()
		if err != nil {
			t.Logf("the agents' logs: %v", err)
		}
		t.Logf("the end of the agents' logs:\n%s", logs[max(0, len(logs)-12000):])
	}()
	testenv.Eventually(t, region+"'s agents hold its shard Lease", 2*time.Minute, func() error {
		_, err := regionLeaseHolder(context.Background(), f, region)
		return err
	})
}

// WriteFanOutOverlays writes the overlays of region name with new-region.sh into deployCopy and
// turns on namespace fan-out for ConfigMaps in them the way docs/operations/install.md#rbac-for-namespace-fan-out tells an
// operator to (the kind in the agent's config.yaml with fanOut enabled and in the Region's
// registered shard, the RBAC add-on deploy/kustomize/agent-fanout in the agent overlay, the kind
// readable by the region's identity on management and under the isolation policy, whose change
// it applies).
func WriteFanOutOverlays(t *testing.T, f fleet.Fleet, deployCopy, name string) {
	t.Helper()
	ctx := context.Background()
	script := filepath.Join(deployCopy, "..", "scripts", "new-region.sh")
	if out, err := exec.Command(script, name).CombinedOutput(); err != nil {
		t.Fatalf("new-region.sh %s: %v\n%s", name, err, out)
	}
	dir := filepath.Join(deployCopy, "regions", name)
	edit := func(path, old, repl string) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), old) {
			t.Fatalf("%s: no %q to extend", path, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, repl, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The region: the add-on's RBAC, and ConfigMaps synced with fan-out.
	edit(filepath.Join(dir, "agent", "kustomization.yaml"), "  - ../../../kustomize/agent\n",
		"  - ../../../kustomize/agent\n  - ../../../kustomize/agent-fanout\n")
	edit(filepath.Join(dir, "agent", "config.yaml"), "\nresources:\n",
		"\nresources:\n  - version: v1\n    kind: ConfigMap\n    fanOut: {enabled: true}\n")
	// Management: the Region's registered shard lists the kind (the agent claims only the shard
	// registered), the region's identity reads ConfigMaps and writes its finalizer and report on
	// those labelled for it (its own ClusterRole, beside the others its overlay binds)...
	rbac := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: regionsync-region-%[1]s-configmaps
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list, watch, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: regionsync-region-%[1]s-configmaps
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: regionsync-region-%[1]s-configmaps
subjects:
  - {kind: ServiceAccount, name: region-%[1]s, namespace: regionsync-system}
`, name)
	edit(filepath.Join(dir, "management", "region.yaml"), "    kinds: [Tenant.demo.regionsync.dev]\n", "    kinds: [Tenant.demo.regionsync.dev, ConfigMap]\n")
	if err := os.WriteFile(filepath.Join(dir, "management", "configmaps.yaml"), []byte(rbac), 0o600); err != nil {
		t.Fatal(err)
	}
	edit(filepath.Join(dir, "management", "kustomization.yaml"), "  - rbac.yaml\n", "  - rbac.yaml\n  - configmaps.yaml\n")
	// ...and the isolation policy judges its ConfigMap writes as it does every synced kind's.
	admission := filepath.Join(deployCopy, "kustomize", "management", "admission.yaml")
	if data, err := os.ReadFile(admission); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(string(data), "resources: [configmaps]") {
		edit(admission, "        resources: [tenants, tenants/status]\n",
			"        resources: [tenants, tenants/status]\n      - apiGroups: [\"\"]\n        apiVersions: [\"*\"]\n        operations: [CREATE, UPDATE, DELETE]\n        resources: [configmaps]\n")
	}
	base, err := deploy.Render(filepath.Join(deployCopy, "kustomize", "management"))
	if err != nil {
		t.Fatal(err)
	}
	if err := deploy.Apply(ctx, f.Management(), base); err != nil {
		t.Fatalf("management base with ConfigMaps under the isolation policy: %v", err)
	}
}

// RunFanOutScenario runs namespace fan-out on region (added by AddFanOutRegion): a ConfigMap
// on management asks for a copy in every namespace of the region labelled fanOutLabel=yes.
// Three labelled namespaces get it, an unlabelled one does not, nor kube-system labelled alike;
// a namespace created with the label gets its copy, one whose label is removed loses it; the
// object's fan-out report says how many namespaces match and are current; deleting the source
// removes every copy and releases the agent's finalizer.
func RunFanOutScenario(t *testing.T, f fleet.Fleet, region string) {
	ctx := context.Background()
	keys := shard.NewKeys("regionsync.dev")
	mgmt, rc := f.Management(), f.Region(region)
	const source, local = "tenant-platform", "ca-bundle"
	data := map[string]string{"ca.crt": "-----BEGIN CERTIFICATE----- e2e"}
	ns := func(name string) string { return "tenant-fanout-" + name }
	setLabel := func(t *testing.T, name string, on bool) {
		t.Helper()
		value := `"yes"`
		if !on {
			value = "null"
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, fanOutLabel, value)
		if err := rc.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	createNamespace := func(t *testing.T, c client.Client, name string, labelled bool) {
		t.Helper()
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if labelled {
			n.Labels = map[string]string{fanOutLabel: "yes"}
		}
		if err := c.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// waitCopies waits until exactly the namespaces want hold the source's copy (every
	// ConfigMap of the region carrying the fan-out source label is counted), each with its
	// data, and the source's report says so.
	waitCopies := func(t *testing.T, what string, want ...string) {
		t.Helper()
		slices.Sort(want)
		testenv.Eventually(t, what, 2*time.Minute, func() error {
			cms := &corev1.ConfigMapList{}
			if err := rc.List(ctx, cms, client.HasLabels{keys.FanOutSource}); err != nil {
				return err
			}
			var have []string
			for _, cm := range cms.Items {
				if cm.Name != local || cm.Annotations[keys.FanOutSourceKey] != source+"/"+local+"-"+region {
					return fmt.Errorf("a copy %s/%s of %q", cm.Namespace, cm.Name, cm.Annotations[keys.FanOutSourceKey])
				}
				if !maps.Equal(cm.Data, data) {
					return fmt.Errorf("%s's copy holds %v", cm.Namespace, cm.Data)
				}
				have = append(have, cm.Namespace)
			}
			slices.Sort(have)
			if !slices.Equal(have, want) {
				return fmt.Errorf("copies in %v, want %v", have, want)
			}
			src := &corev1.ConfigMap{}
			if err := mgmt.Get(ctx, client.ObjectKey{Namespace: source, Name: local + "-" + region}, src); err != nil {
				return err
			}
			var rep shard.FanOutReport
			if err := json.Unmarshal([]byte(src.Annotations[keys.FanOutReport]), &rep); err != nil {
				return fmt.Errorf("report %q: %v", src.Annotations[keys.FanOutReport], err)
			}
			if rep.Matching != len(want) || rep.Current != len(want) || len(rep.Failed) != 0 || (rep.Hash == "" && rep.Generation == 0) {
				return fmt.Errorf("report %+v, want %d matching and current", rep, len(want))
			}
			if !slices.Contains(src.Finalizers, keys.Finalizer) {
				return fmt.Errorf("the source's finalizers %v, no %s", src.Finalizers, keys.Finalizer)
			}
			return nil
		})
	}

	t.Run("fan-out: a ConfigMap reaches every labelled namespace of the region, not kube-system", func(t *testing.T) {
		for _, n := range []string{"a", "b", "c"} {
			createNamespace(t, rc, ns(n), true)
		}
		createNamespace(t, rc, ns("unlabelled"), false)
		setLabel(t, "kube-system", true) // a protected namespace, whatever its labels say
		createNamespace(t, mgmt, source, false)
		src := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: source, Name: local + "-" + region, Labels: regionLabels(region),
				Annotations: map[string]string{keys.FanOutNamespaces: fanOutLabel + "=yes"}},
			Data: data,
		}
		if err := mgmt.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
		waitCopies(t, "copies in the three labelled namespaces", ns("a"), ns("b"), ns("c"))
	})

	t.Run("fan-out: a namespace created with the label gets its copy, one unlabelled loses it", func(t *testing.T) {
		createNamespace(t, rc, ns("later"), true)
		waitCopies(t, "a copy in the namespace created later", ns("a"), ns("b"), ns("c"), ns("later"))
		setLabel(t, ns("b"), false)
		waitCopies(t, "no copy in the namespace whose label was removed", ns("a"), ns("c"), ns("later"))
		if err := rc.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: local}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("kube-system's %s: %v, want none", local, err)
		}
	})

	t.Run("fan-out: deleting the source removes every copy and releases the finalizer", func(t *testing.T) {
		src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: source, Name: local + "-" + region}}
		if err := mgmt.Delete(ctx, src); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "every copy removed, the source gone", 2*time.Minute, func() error {
			cms := &corev1.ConfigMapList{}
			if err := rc.List(ctx, cms, client.HasLabels{keys.FanOutSource}); err != nil {
				return err
			}
			if len(cms.Items) != 0 {
				var left []string
				for _, cm := range cms.Items {
					left = append(left, cm.Namespace+"/"+cm.Name)
				}
				return fmt.Errorf("copies left: %v", left)
			}
			if err := mgmt.Get(ctx, client.ObjectKeyFromObject(src), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the source: %v (its finalizer not released)", err)
			}
			return nil
		})
		setLabel(t, "kube-system", false)
	})
}

// regionLeaseHolder returns who holds region's shard Lease on management.
func regionLeaseHolder(ctx context.Context, f fleet.Fleet, region string) (string, error) {
	holder, err := fleet.LeaseHolder(ctx, f.Management(), region)
	if err == nil && holder == "" {
		err = errors.New("no holder")
	}
	return holder, err
}

// SameClusterRegion is the region whose cluster is management itself (fleet.LocalFleet's
// AddSameClusterRegion), with ConfigMap fan-out as FanOutRegion has.
const SameClusterRegion = "local"

// RunSameClusterScenario runs regionsync inside one cluster (management is region's cluster; its
// agent runs, holding the shard): a Distribution with spec.source naming an existing ConfigMap
// and spec.namespaces "*" puts one copy of it into every namespace of the agent's scope (the
// shard's namespace prefix) but the source's own, a namespace created later gets its copy, and
// deleting the Distribution removes every copy, the source untouched.
func RunSameClusterScenario(t *testing.T, f fleet.Fleet, region string) {
	ctx := context.Background()
	keys := shard.NewKeys("regionsync.dev")
	mgmt := f.Management()
	const ns, name, prefix = "tenant-single", "single-ca", "tenant-"
	data := map[string]string{"ca.crt": "-----BEGIN CERTIFICATE----- one cluster"}
	author, err := f.ManagementAs(distAuthor)
	if err != nil {
		t.Fatal(err)
	}
	waitShardHolder(t, f, region)
	// The hub reads the per-region objects and the sources of every kind Distributions place:
	// ConfigMaps, added as deploy/kustomize/hub's RBAC tells an operator to.
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "regionsync-hub-configmaps"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "regionsync-hub-configmaps"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "regionsync-hub-configmaps"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: fleet.AgentNamespace, Name: fleet.HubServiceAccount}}},
	} {
		if err := mgmt.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	s := &distScenario{f: f, keys: keys, author: author}
	s.tenantNamespace(t, ns, nil, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := mgmt.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	// copies says why the copies are not exactly one in every namespace of the scope but ns.
	copies := func() error {
		nss := &corev1.NamespaceList{}
		if err := mgmt.List(ctx, nss); err != nil {
			return err
		}
		var want []string
		for _, n := range nss.Items {
			if strings.HasPrefix(n.Name, prefix) && n.Name != ns && n.DeletionTimestamp == nil {
				want = append(want, n.Name)
			}
		}
		cms := &corev1.ConfigMapList{}
		if err := mgmt.List(ctx, cms, client.HasLabels{keys.FanOutSource}); err != nil {
			return err
		}
		var have []string
		for _, cm := range cms.Items {
			if cm.Name != name || !maps.Equal(cm.Data, data) {
				return fmt.Errorf("copy %s/%s holds %v", cm.Namespace, cm.Name, cm.Data)
			}
			have = append(have, cm.Namespace)
		}
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(have, want) {
			return fmt.Errorf("copies in %v, want every namespace of the scope but %s: %v", have, ns, want)
		}
		return nil
	}
	d := &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Source:             &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", Name: name},
			Namespaces:         "*",
			Placement:          regionsyncv1alpha1.Placement{Regions: []string{region}},
			ServiceAccountName: placerServiceAccount,
		},
	}
	if err := author.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a copy in every namespace of the agent's scope but the source's", 2*time.Minute, copies)
	testenv.Eventually(t, "the Distribution's region current", 2*time.Minute, func() error {
		d := s.get(ctx, ns, name)
		if d == nil {
			return errors.New("no Distribution")
		}
		if e := statusEntry(d, region); e == nil || e.State != regionsyncv1alpha1.PlacementApplied || !e.Current {
			return fmt.Errorf("%s's entry %+v", region, e)
		}
		return nil
	})
	later := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "single-later"}}
	if err := mgmt.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the namespace created later gets its copy", 2*time.Minute, func() error {
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: later.Name, Name: name}, &corev1.ConfigMap{}); err != nil {
			return err
		}
		return copies()
	})
	deleteDistribution(ctx, t, mgmt, author, keys, d, "deleting the Distribution removes every copy and its per-region object", 2*time.Minute, func() error {
		cms := &corev1.ConfigMapList{}
		if err := mgmt.List(ctx, cms, client.HasLabels{keys.FanOutSource}); err != nil {
			return err
		}
		if len(cms.Items) != 0 {
			return fmt.Errorf("%d copies left, one in %s", len(cms.Items), cms.Items[0].Namespace)
		}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-" + region}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the per-region object: %v", err)
		}
		if s.get(ctx, ns, name) != nil {
			return errors.New("the Distribution still exists")
		}
		return nil
	})
	live := &corev1.ConfigMap{}
	if err := mgmt.Get(ctx, client.ObjectKeyFromObject(src), live); err != nil || !maps.Equal(live.Data, data) {
		t.Fatalf("the source after the Distribution's deletion: %v, %v", err, live.Data)
	}
}
