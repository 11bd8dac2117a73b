package testenv

import (
	"context"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Dispatched reads the API server's own metrics through admin and returns how many requests it
// has dispatched under API Priority and Fairness FlowSchema schema in priority level level
// (apiserver_flowcontrol_dispatched_requests_total).
func Dispatched(ctx context.Context, admin *rest.Config, schema, level string) (float64, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return 0, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	return dispatchedIn(string(raw), schema, level), nil
}

// dispatchedIn sums apiserver_flowcontrol_dispatched_requests_total for FlowSchema schema and
// priority level level in metrics, Prometheus text exposition.
func dispatchedIn(metrics, schema, level string) float64 {
	var sum float64
	for line := range strings.Lines(metrics) {
		if !strings.HasPrefix(line, "apiserver_flowcontrol_dispatched_requests_total{") ||
			!strings.Contains(line, `flow_schema="`+schema+`"`) || !strings.Contains(line, `priority_level="`+level+`"`) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
