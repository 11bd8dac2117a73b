//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/regionsync/regionsync/test/framework/testenv"
)

// flowSchemaInUse checks, from the management API server's own metrics, that the regions' and
// the hub's requests are dispatched under the overlays' API Priority and Fairness objects: the
// FlowSchema regionsync-regions in its priority level, the shard Leases in leader-election, and
// the hub's requests (deploy/kustomize/hub) in workload-high.
func flowSchemaInUse(t *testing.T, admin *rest.Config) {
	t.Helper()
	for _, want := range []struct{ schema, level string }{
		{"regionsync-regions", "regionsync-regions"},
		{"regionsync-region-leases", "leader-election"},
		{"regionsync-hub", "workload-high"},
	} {
		testenv.Eventually(t, "requests under FlowSchema "+want.schema, 30*time.Second, func() error {
			n, err := testenv.Dispatched(context.Background(), admin, want.schema, want.level)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("no request dispatched under flow_schema=%s priority_level=%s", want.schema, want.level)
			}
			t.Logf("%.0f requests dispatched under FlowSchema %s (priority level %s)", n, want.schema, want.level)
			return nil
		})
	}
}
