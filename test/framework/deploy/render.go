// Package deploy renders the kustomize overlays under deploy/ with kustomize's own krusty (the
// library behind kubectl apply -k), so tests and the e2e suite apply exactly what operators apply.
package deploy

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/regionsync/regionsync/pkg/config"
)

// AgentConfigMap is the ConfigMap holding the agent's configuration file (key config.yaml).
const AgentConfigMap = "regionsync-agent-config"

// IsolationPolicy names the management base's ValidatingAdmissionPolicy (and its binding) that
// keeps every region's identity to its own shard.
const IsolationPolicy = "regionsync-region-isolation"

// RegionUserPrefix starts the user name of every region's identity on management: the
// ServiceAccount regionsync-system/region-<region>. The admission policy derives the region
// from what follows it.
const RegionUserPrefix = "system:serviceaccount:regionsync-system:region-"

// Render builds the kustomization in dir.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		// Through JSON, so that numbers are int64/float64 as everywhere in client-go.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Find returns the first object of a kind (and name, when not empty).
func Find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

// GeneratedConfigMap returns the first ConfigMap among objs generated under name (the generator
// appends a content hash to it) and its data under key; nil when there is none.
func GeneratedConfigMap(objs []*unstructured.Unstructured, name, key string) (*unstructured.Unstructured, string) {
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), name) {
			data, _, _ := unstructured.NestedString(o.Object, "data", key)
			return o, data
		}
	}
	return nil, ""
}

// AgentConfig extracts and validates the agent configuration an overlay ships.
func AgentConfig(objs []*unstructured.Unstructured) (*config.AgentConfig, error) {
	o, data := GeneratedConfigMap(objs, AgentConfigMap, "config.yaml")
	if o == nil {
		return nil, fmt.Errorf("no ConfigMap %s in the overlay", AgentConfigMap)
	}
	cfg, err := config.Parse([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", o.GetName(), err)
	}
	return cfg, nil
}

// applyOrder sorts objects so that what others need exists first (namespaces, CRDs, accounts and
// roles before bindings and workloads), the order kubectl apply would need.
func applyOrder(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := map[string]int{
		"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2, "ClusterRole": 3, "Role": 3,
		"ClusterRoleBinding": 4, "RoleBinding": 4, "ConfigMap": 5, "Secret": 5,
	}
	out := append([]*unstructured.Unstructured(nil), objs...)
	r := func(o *unstructured.Unstructured) int {
		if v, ok := rank[o.GetKind()]; ok {
			return v
		}
		return 9
	}
	for i := 1; i < len(out); i++ { // stable insertion sort: keeps the overlay's order per rank
		for j := i; j > 0 && r(out[j]) < r(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// FieldOwner is the field manager of what the scaffolding applies.
const FieldOwner = "regionsync-test"

// Apply server-side-applies rendered objects in dependency order (as kubectl apply -k would
// need): the one overlay applier of the e2e, the benchmarks and the tests.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range applyOrder(objs) {
		o = o.DeepCopy()
		o.SetManagedFields(nil)
		o.SetResourceVersion("")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}
