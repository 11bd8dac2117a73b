package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
)

// The demo's Distribution: one Tenant placed in every region, written by the hub as the
// ServiceAccount placer of its namespace, with an override for the second region.
const (
	FleetNamespace   = "tenant-fleet"
	DistributionName = "storefront"
	placerSA         = "placer"
)

// regionShard is the shard the operator registers on a demo region's Region: the demo agent's.
func regionShard(region string) *regionsyncv1alpha1.RegionShard {
	cfg := agentConfig(region, 0, "")
	s := &regionsyncv1alpha1.RegionShard{
		NamespacePrefix:       cfg.Shard.NamespacePrefix,
		RemoteResourceSuffix:  cfg.Shard.RemoteResourceSuffix,
		RemoteNamespaceSuffix: cfg.Shard.RemoteNamespaceSuffix,
		LocalNamespaceSuffix:  cfg.Shard.LocalNamespaceSuffix,
		LabelSelector:         cfg.Shard.LabelSelector,
	}
	for _, r := range cfg.Resources {
		s.Kinds = append(s.Kinds, shard.KindName(r.GroupVersionKind()))
	}
	return s
}

// startHub writes the hub's configuration and starts bin/hub against management.
func (d *demoRun) startHub() error {
	cfg := hub.Config{
		TypeMeta:                  metav1.TypeMeta{APIVersion: fleetspec.APIVersion, Kind: hub.ConfigKind},
		DefaultServiceAccountName: placerSA,
		Telemetry:                 hub.TelemetryConfig{MetricsAddr: "127.0.0.1:19190", HealthAddr: "127.0.0.1:19191"},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	dir := filepath.Join(d.dir, "hub")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "hub.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	p, err := d.run("hub", fleet.ProcessSpec{Name: "hub-0", Binary: d.opts.HubBinary, Config: path, Kubeconfig: d.mgmt.Kubeconfig,
		Log: filepath.Join(dir, "hub.log")})
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	d.say("hub started on management (config %s, log %s)", path, p.Log)
	return nil
}

// distribute creates a tenant namespace with the ServiceAccount the hub writes as, and the
// Distribution placing one Tenant in every region (3 replicas in the second), then shows its
// status once every region's copy is current.
func (d *demoRun) distribute() error {
	ctx, c := d.ctx, d.mgmt.Client
	objs := make([]client.Object, 0, 4+len(Regions))
	objs = append(objs,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: FleetNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: FleetNamespace, Name: placerSA}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: FleetNamespace, Name: placerSA}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"demo.regionsync.dev"}, Resources: []string{"tenants"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: FleetNamespace, Name: placerSA},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: placerSA},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: FleetNamespace, Name: placerSA}}},
	)
	for _, region := range Regions { // where each region's tenant token is uploaded
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: FleetNamespace, Name: tenantoperator.TokenSecretName + "-" + region}})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	template := map[string]any{
		"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
		"spec": map[string]any{"displayName": "Storefront", "plan": "team", "replicas": 2},
	}
	raw, err := json.Marshal(template)
	if err != nil {
		return err
	}
	last := Regions[len(Regions)-1]
	dist := &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: FleetNamespace, Name: DistributionName},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template:           runtime.RawExtension{Raw: raw},
			Placement:          regionsyncv1alpha1.Placement{Regions: Regions},
			Overrides:          []regionsyncv1alpha1.Override{{Regions: []string{last}, MergePatch: &apiextensionsv1.JSON{Raw: []byte(`{"spec":{"replicas":3}}`)}}},
			ServiceAccountName: placerSA,
		},
	}
	if err := c.Create(ctx, dist); err != nil {
		return fmt.Errorf("creating Distribution %s/%s: %w", FleetNamespace, DistributionName, err)
	}
	d.say("\nDistribution %s/%s: one Tenant for %v (replicas 2; 3 in %s), written by the hub as %s/%s",
		FleetNamespace, DistributionName, Regions, last, FleetNamespace, placerSA)
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(dist), dist); err != nil {
			return false, nil
		}
		return dist.Status.Counts.Current == int32(len(Regions)) && meta.IsStatusConditionTrue(dist.Status.Conditions, regionsyncv1alpha1.DistributionApplied), nil
	})
	if err != nil {
		return fmt.Errorf("the Distribution %s/%s is not current in every region within 90 s: status %+v", FleetNamespace, DistributionName, dist.Status)
	}
	if err := d.writeChange(dist); err != nil {
		return err
	}
	d.say("  kubectl get distributions -n %s", FleetNamespace)
	d.say("  NAME         REGIONS   CURRENT   READY")
	d.say("  %-12s %-9d %-9d %d", dist.Name, dist.Status.Counts.Selected, dist.Status.Counts.Current, dist.Status.Counts.Ready)
	for _, r := range dist.Status.Regions {
		replicas := "-"
		cp := &demov1alpha1.Tenant{}
		if err := d.fleet.Cluster(r.Region).Client.Get(ctx, client.ObjectKey{Namespace: FleetNamespace, Name: DistributionName}, cp); err == nil {
			replicas = fmt.Sprint(cp.Spec.Replicas)
		}
		d.say("  %s: %s, object %s generation %d, current %v, health %s; the copy in the region: replicas %s",
			r.Region, r.State, r.Name, r.Generation, r.Current, orDash(r.Health), replicas)
	}
	return nil
}

// ChangeFile is the file, in the demo's directory, holding a change of the demo's Distribution
// to preview with kubectl regionsync diff (4 replicas, rolled out region by region).
const ChangeFile = "storefront-change.yaml"

// writeChange writes ChangeFile: dist with 4 replicas in its template and a Progressive strategy.
func (d *demoRun) writeChange(dist *regionsyncv1alpha1.Distribution) error {
	change := &regionsyncv1alpha1.Distribution{
		TypeMeta:   metav1.TypeMeta{APIVersion: regionsyncv1alpha1.GroupVersion.String(), Kind: "Distribution"},
		ObjectMeta: metav1.ObjectMeta{Namespace: dist.Namespace, Name: dist.Name},
		Spec:       *dist.Spec.DeepCopy(),
	}
	template := map[string]any{}
	if err := json.Unmarshal(change.Spec.Template.Raw, &template); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(template, int64(4), "spec", "replicas"); err != nil {
		return err
	}
	raw, err := json.Marshal(template)
	if err != nil {
		return err
	}
	change.Spec.Template.Raw = raw
	change.Spec.Strategy = regionsyncv1alpha1.RolloutStrategy{Type: regionsyncv1alpha1.RolloutProgressive}
	out, err := yaml.Marshal(change)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d.dir, ChangeFile), out, 0o600)
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
