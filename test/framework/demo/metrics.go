package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// AgentMetrics is what the demo shows of one agent's /metrics.
type AgentMetrics struct {
	// Syncs is regionsync_syncs_total summed by result, and by result and direction.
	Syncs            map[string]float64
	SyncsByDirection map[string]map[string]float64
	// LagP50, LagP99 are quantiles of regionsync_watch_to_write_seconds over every resource and
	// write; LagCount is the number of observations.
	LagP50, LagP99 time.Duration
	LagCount       uint64
	// Objects is regionsync_objects summed by state.
	Objects             map[string]float64
	ShardClaimed        float64
	ManagementConnected float64
}

// ScrapeAgent reads an agent's Prometheus text endpoint.
func ScrapeAgent(ctx context.Context, url string) (*AgentMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseAgentMetrics(resp.Body)
}

// ParseAgentMetrics summarizes the regionsync metrics of a Prometheus text exposition.
func ParseAgentMetrics(r io.Reader) (*AgentMetrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	m := &AgentMetrics{Syncs: map[string]float64{}, SyncsByDirection: map[string]map[string]float64{}, Objects: map[string]float64{}}
	for _, s := range families["regionsync_syncs_total"].GetMetric() {
		result, dir := label(s, "result"), label(s, "direction")
		m.Syncs[result] += s.GetCounter().GetValue()
		if m.SyncsByDirection[result] == nil {
			m.SyncsByDirection[result] = map[string]float64{}
		}
		m.SyncsByDirection[result][dir] += s.GetCounter().GetValue()
	}
	for _, s := range families["regionsync_objects"].GetMetric() {
		m.Objects[label(s, "state")] += s.GetGauge().GetValue()
	}
	if f := families["regionsync_shard_claimed"]; len(f.GetMetric()) > 0 {
		m.ShardClaimed = f.GetMetric()[0].GetGauge().GetValue()
	}
	if f := families["regionsync_management_connected"]; len(f.GetMetric()) > 0 {
		m.ManagementConnected = f.GetMetric()[0].GetGauge().GetValue()
	}
	buckets := map[float64]uint64{}
	for _, s := range families["regionsync_watch_to_write_seconds"].GetMetric() {
		m.LagCount += s.GetHistogram().GetSampleCount()
		for _, b := range s.GetHistogram().GetBucket() {
			if math.IsInf(b.GetUpperBound(), 1) {
				continue // the sample count, added below
			}
			buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
		buckets[math.Inf(1)] += s.GetHistogram().GetSampleCount()
	}
	m.LagP50 = seconds(Quantile(0.5, buckets))
	m.LagP99 = seconds(Quantile(0.99, buckets))
	return m, nil
}

func seconds(s float64) time.Duration {
	if math.IsNaN(s) {
		return -1
	}
	return time.Duration(s * float64(time.Second))
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Quantile estimates the q-quantile of a histogram given as cumulative counts by upper bound
// (+Inf included) as Prometheus' histogram_quantile does: linear interpolation inside the bucket
// that holds the rank; a rank in the +Inf bucket gives the largest finite bound. NaN without
// observations.
func Quantile(q float64, cumulative map[float64]uint64) float64 {
	bounds := make([]float64, 0, len(cumulative))
	for b := range cumulative {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 || cumulative[bounds[len(bounds)-1]] == 0 {
		return math.NaN()
	}
	total := float64(cumulative[bounds[len(bounds)-1]])
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		c := float64(cumulative[b])
		if c >= rank && c > below {
			if math.IsInf(b, 1) {
				return lower
			}
			return lower + (b-lower)*(rank-below)/(c-below)
		}
		lower, below = b, c
	}
	return lower
}

// printMetrics writes one agent's metrics as a small table.
func printMetrics(out io.Writer, region, url string, m *AgentMetrics) error {
	fmt.Fprintf(out, "%s: agent metrics (%s)\n", region, url)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  METRIC\tVALUE\n")
	for _, result := range sortedKeys(m.Syncs) {
		var dirs []string
		for _, d := range sortedKeys(m.SyncsByDirection[result]) {
			dirs = append(dirs, fmt.Sprintf("%s %g", d, m.SyncsByDirection[result][d]))
		}
		fmt.Fprintf(tw, "  syncs %s\t%g  (%s)\n", result, m.Syncs[result], strings.Join(dirs, ", "))
	}
	if len(m.Syncs) == 0 {
		fmt.Fprintf(tw, "  syncs\t0\n")
	}
	if m.LagCount == 0 {
		fmt.Fprintf(tw, "  watch-to-write lag p50 / p99\tno writes yet\n")
	} else {
		fmt.Fprintf(tw, "  watch-to-write lag p50 / p99\t%s / %s  (%d writes; estimated from the histogram's buckets)\n", fmtLag(m.LagP50), fmtLag(m.LagP99), m.LagCount)
	}
	states := make([]string, 0, len(m.Objects))
	for _, state := range sortedKeys(m.Objects) {
		states = append(states, fmt.Sprintf("%s %g", state, m.Objects[state]))
	}
	fmt.Fprintf(tw, "  objects by state\t%s\n", strings.Join(states, ", "))
	fmt.Fprintf(tw, "  shard claimed\t%g\n", m.ShardClaimed)
	fmt.Fprintf(tw, "  management connected\t%g\n", m.ManagementConnected)
	return tw.Flush()
}

// fmtLag prints an estimate from histogram buckets without false precision.
func fmtLag(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 10 {
		return fmt.Sprintf("%.1fms", ms)
	}
	return fmt.Sprintf("%.0fms", ms)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
