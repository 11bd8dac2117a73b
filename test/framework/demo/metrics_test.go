package demo

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	tests := map[string]struct {
		q       float64
		buckets map[float64]uint64
		want    float64
	}{
		"no observations":                  {q: 0.5, buckets: map[float64]uint64{0.01: 0, inf: 0}, want: math.NaN()},
		"empty":                            {q: 0.5, buckets: map[float64]uint64{}, want: math.NaN()},
		"interpolated in first":            {q: 0.5, buckets: map[float64]uint64{0.01: 4, 0.1: 4, inf: 4}, want: 0.005},
		"interpolated in second":           {q: 0.5, buckets: map[float64]uint64{0.01: 2, 0.1: 6, inf: 6}, want: 0.01 + 0.09*(3-2)/4.0},
		"p99 in +Inf is the largest bound": {q: 0.99, buckets: map[float64]uint64{0.01: 50, 0.1: 90, inf: 100}, want: 0.1},
		"skips empty buckets":              {q: 0.99, buckets: map[float64]uint64{0.01: 0, 0.1: 0, 1: 10, inf: 10}, want: 0.1 + 0.9*9.9/10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Quantile(tc.q, tc.buckets)
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-12) {
				t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestParseAgentMetrics(t *testing.T) {
	text := `# TYPE regionsync_syncs_total counter
regionsync_syncs_total{direction="claim",resource="Tenant.demo.regionsync.dev",result="written"} 1
regionsync_syncs_total{direction="down",resource="Tenant.demo.regionsync.dev",result="written"} 2
regionsync_syncs_total{direction="down",resource="Tenant.demo.regionsync.dev",result="unchanged"} 5
# TYPE regionsync_objects gauge
regionsync_objects{resource="Tenant.demo.regionsync.dev",state="synced"} 3
regionsync_objects{resource="Other",state="synced"} 1
regionsync_objects{resource="Other",state="failed"} 1
# TYPE regionsync_shard_claimed gauge
regionsync_shard_claimed 1
# TYPE regionsync_management_connected gauge
regionsync_management_connected 1
# TYPE regionsync_watch_to_write_seconds histogram
regionsync_watch_to_write_seconds_bucket{resource="T",write="create local",le="0.01"} 1
regionsync_watch_to_write_seconds_bucket{resource="T",write="create local",le="0.1"} 2
regionsync_watch_to_write_seconds_bucket{resource="T",write="create local",le="+Inf"} 2
regionsync_watch_to_write_seconds_sum{resource="T",write="create local"} 0.06
regionsync_watch_to_write_seconds_count{resource="T",write="create local"} 2
regionsync_watch_to_write_seconds_bucket{resource="T",write="upload status",le="0.01"} 1
regionsync_watch_to_write_seconds_bucket{resource="T",write="upload status",le="0.1"} 2
regionsync_watch_to_write_seconds_bucket{resource="T",write="upload status",le="+Inf"} 2
regionsync_watch_to_write_seconds_sum{resource="T",write="upload status"} 0.06
regionsync_watch_to_write_seconds_count{resource="T",write="upload status"} 2
`
	m, err := ParseAgentMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := &AgentMetrics{
		Syncs:            map[string]float64{"written": 3, "unchanged": 5},
		SyncsByDirection: map[string]map[string]float64{"written": {"claim": 1, "down": 2}, "unchanged": {"down": 5}},
		LagP50:           10 * time.Millisecond, LagP99: 98200 * time.Microsecond, LagCount: 4,
		Objects:      map[string]float64{"synced": 4, "failed": 1},
		ShardClaimed: 1, ManagementConnected: 1,
	}
	if diff := cmp.Diff(want, m, cmp.Comparer(func(a, b time.Duration) bool { return (a - b).Abs() < time.Microsecond })); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}
