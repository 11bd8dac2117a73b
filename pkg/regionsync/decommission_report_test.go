package regionsync

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestDecommissionReportWrite: the report as the agent and kubectl regionsync print it, for a
// dry run and a run that deleted the Lease.
func TestDecommissionReportWrite(t *testing.T) {
	obj := ReleasedObject{Resource: "Tenant.demo.regionsync.dev", Remote: types.NamespacedName{Namespace: "acme", Name: "t0-east"},
		Local: types.NamespacedName{Namespace: "acme", Name: "t0"}, Deleted: "namespace acme"}
	kept := ReleasedObject{Resource: "Tenant.demo.regionsync.dev", Remote: types.NamespacedName{Namespace: "acme", Name: "t1-east"}, OutOfShard: true, Reason: "paused"}
	for name, tc := range map[string]struct {
		r    DecommissionReport
		want []string
	}{
		"dry run": {DecommissionReport{DryRun: true, Released: []ReleasedObject{obj}, Skipped: []ReleasedObject{kept}}, []string{
			"region east: dry run, nothing written\n",
			"would release Tenant.demo.regionsync.dev acme/t0-east: local namespace acme of acme/t0 would be deleted\n",
			"kept    Tenant.demo.regionsync.dev acme/t1-east (left the shard): paused\n",
			"region east: 1 object(s) would release, 1 kept; 0 local copies and 0 namespaces would be deleted; shard Lease regionsync-system/region-east kept\n",
		}},
		"done": {DecommissionReport{Released: []ReleasedObject{obj}, NamespacesDeleted: 1, LeaseDeleted: true}, []string{
			"released Tenant.demo.regionsync.dev acme/t0-east: local namespace acme of acme/t0 deleted\n",
			"region east: 1 object(s) released, 0 kept; 0 local copies and 1 namespaces deleted; shard Lease regionsync-system/region-east deleted\n",
		}},
	} {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			tc.r.Write(&b, "east", "regionsync-system")
			if got := b.String(); got != strings.Join(tc.want, "") {
				t.Errorf("report:\n%s\nwant:\n%s", got, strings.Join(tc.want, ""))
			}
		})
	}
}
