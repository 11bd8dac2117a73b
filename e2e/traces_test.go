//go:build e2e

package e2e

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The kind provider's Deployments get the receiver's endpoint; an existing value is replaced, other
// variables and other kinds are kept.
func TestWithOTLPEndpoint(t *testing.T) {
	deployment := &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "agent", "env": []any{
			map[string]any{"name": "POD_NAME", "value": "x"},
			map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://old:4317"},
		}}},
	}}}}}
	service := &unstructured.Unstructured{Object: map[string]any{"kind": "Service", "spec": map[string]any{}}}
	withOTLPEndpoint([]*unstructured.Unstructured{deployment, service}, "http://172.18.0.1:4317")
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	want := []any{
		map[string]any{"name": "POD_NAME", "value": "x"},
		map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://172.18.0.1:4317"},
		map[string]any{"name": "OTEL_BSP_SCHEDULE_DELAY", "value": "200"},
	}
	if diff := cmp.Diff(want, containers[0].(map[string]any)["env"]); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"kind": "Service", "spec": map[string]any{}}, service.Object); diff != "" {
		t.Errorf("service changed (-want +got):\n%s", diff)
	}
}
