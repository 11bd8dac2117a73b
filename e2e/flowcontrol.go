//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/regionsync/regionsync/internal/testenv"
)

// flowSchemaInUse checks, from the management API server's own metrics, that the regions'
// requests are dispatched under the management overlay's API Priority and Fairness objects: the
// FlowSchema regionsync-regions in its priority level, and their shard Leases in leader-election.
func flowSchemaInUse(t *testing.T, admin *rest.Config) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ schema, level string }{
		{"regionsync-regions", "regionsync-regions"},
		{"regionsync-region-leases", "leader-election"},
	} {
		testenv.Eventually(t, "requests under FlowSchema "+want.schema, 30*time.Second, func() error {
			raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
			if err != nil {
				return err
			}
			n := dispatched(string(raw), want.schema, want.level)
			if n == 0 {
				return fmt.Errorf("no request dispatched under flow_schema=%s priority_level=%s", want.schema, want.level)
			}
			t.Logf("%.0f requests dispatched under FlowSchema %s (priority level %s)", n, want.schema, want.level)
			return nil
		})
	}
}

// dispatched sums apiserver_flowcontrol_dispatched_requests_total for a FlowSchema and priority
// level in Prometheus text exposition.
func dispatched(metrics, schema, level string) float64 {
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
