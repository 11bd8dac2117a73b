package health

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

var clusterPropertyKind = schema.GroupVersionKind{Group: "about.k8s.io", Version: "v1alpha1", Kind: "ClusterProperty"}

func property(name, value string) client.Object {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"value": value}}}
	u.SetGroupVersionKind(clusterPropertyKind)
	u.SetName(name)
	return u
}

// aboutClient is a fake cluster; served says whether it serves the About API.
func aboutClient(served bool, objs ...client.Object) client.Client {
	mapper := meta.NewDefaultRESTMapper(nil)
	if served {
		mapper.Add(clusterPropertyKind, meta.RESTScopeRoot)
	}
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithRESTMapper(mapper).WithObjects(objs...).Build()
}

func TestClusterProperties(t *testing.T) {
	ctx := context.Background()
	got, err := ClusterProperties(ctx, aboutClient(false))
	if err != nil || got != nil {
		t.Errorf("a cluster without the About API: %v, %v; want none and no error", got, err)
	}
	got, err = ClusterProperties(ctx, aboutClient(true))
	if err != nil || got != nil {
		t.Errorf("no ClusterProperty: %v, %v; want none", got, err)
	}
	objs := make([]client.Object, 0, 3+regionsyncv1alpha1.MaxClusterProperties)
	objs = append(objs, property("zone.example.com", "b"), property("cluster.clusterset.k8s.io", "id-1"), property("long.example.com", strings.Repeat("x", 3000)))
	for i := range regionsyncv1alpha1.MaxClusterProperties {
		objs = append(objs, property(fmt.Sprintf("p%03d.example.com", i), "v"))
	}
	got, err = ClusterProperties(ctx, aboutClient(true, objs...))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != regionsyncv1alpha1.MaxClusterProperties || got[0] != (regionsyncv1alpha1.ClusterProperty{Name: "cluster.clusterset.k8s.io", Value: "id-1"}) {
		t.Errorf("%d properties, first %+v; want %d by name, cluster.clusterset.k8s.io first", len(got), got[0], regionsyncv1alpha1.MaxClusterProperties)
	}
	if got[1].Name != "long.example.com" || len(got[1].Value) != regionsyncv1alpha1.MaxClusterPropertyValue {
		t.Errorf("second %s with %d characters, want long.example.com cut to %d", got[1].Name, len(got[1].Value), regionsyncv1alpha1.MaxClusterPropertyValue)
	}
}
