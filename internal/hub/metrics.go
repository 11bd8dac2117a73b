package hub

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// The hub's own metrics (docs/observability.md), in controller-runtime's registry beside its
// controller metrics. Their labels are bounded: no Distribution, region or object name (a fleet
// may have thousands of Distributions times regions); per Distribution, read its status.
var (
	// Regions is, summed over every Distribution the leader reconciled, its regions by state
	// (the counts of its status: selected, placed, current, ready, unplaceable, failed, removing).
	Regions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regionsync_hub_distribution_regions",
		Help: "Per-region placements of all Distributions, by state (the sum of their status counts).",
	}, []string{"state"})
	// Distributions is the number of Distributions the leader reconciled.
	Distributions = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "regionsync_hub_distributions",
		Help: "Distributions the hub places (on the leader).",
	})
	// HeartbeatMissed is the number of Regions whose Ready condition is Unknown (HeartbeatMissed).
	HeartbeatMissed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "regionsync_hub_regions_heartbeat_missed",
		Help: "Regions whose Ready condition is Unknown with reason HeartbeatMissed (on the leader).",
	})
	// ApplyErrors counts failed writes of per-region objects (apply, delete, orphaning), by
	// operation: refusals of the Distribution's ServiceAccount included.
	ApplyErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regionsync_hub_apply_errors_total",
		Help: "Failed writes of per-region objects, by operation (apply, delete, orphan).",
	}, []string{"operation"})
)

// The states of Regions, one per count of a Distribution's status.
var regionStates = []string{"selected", "placed", "current", "ready", "unplaceable", "failed", "removing"}

var registerOnce sync.Once

// Collectors are the hub's metrics.
func Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{Regions, Distributions, HeartbeatMissed, ApplyErrors}, rolloutCollectors()...)
}

// registerMetrics registers the hub's metrics in controller-runtime's registry, once per process.
func registerMetrics() error {
	var err error
	registerOnce.Do(func() {
		for _, c := range Collectors() {
			if e := ctrlmetrics.Registry.Register(c); e != nil && !errors.As(e, &prometheus.AlreadyRegisteredError{}) {
				err = errors.Join(err, e)
			}
		}
		for _, s := range regionStates {
			Regions.WithLabelValues(s)
		}
		for _, op := range []string{"apply", "delete", "orphan"} {
			ApplyErrors.WithLabelValues(op)
		}
	})
	return err
}

// countValues lists c's values in the order of regionStates.
func countValues(c regionsyncv1alpha1.DistributionCounts) []int32 {
	return []int32{c.Selected, c.Placed, c.Current, c.Ready, c.Unplaceable, c.Failed, c.Removing}
}

// distributionTotals keeps each Distribution's last counts and moves the gauges by the difference.
type distributionTotals struct {
	mu     sync.Mutex
	counts map[types.NamespacedName]regionsyncv1alpha1.DistributionCounts
}

// set records a Distribution's counts.
func (t *distributionTotals) set(key types.NamespacedName, c regionsyncv1alpha1.DistributionCounts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[types.NamespacedName]regionsyncv1alpha1.DistributionCounts{}
	}
	prev, had := t.counts[key]
	if !had {
		Distributions.Inc()
	}
	t.counts[key] = c
	t.move(countValues(prev), countValues(c))
}

// forget removes a Distribution that is gone.
func (t *distributionTotals) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, had := t.counts[key]
	if !had {
		return
	}
	delete(t.counts, key)
	Distributions.Dec()
	t.move(countValues(prev), countValues(regionsyncv1alpha1.DistributionCounts{}))
}

func (t *distributionTotals) move(from, to []int32) {
	for i, s := range regionStates {
		if d := to[i] - from[i]; d != 0 {
			Regions.WithLabelValues(s).Add(float64(d))
		}
	}
}

// regionSet is a set of Region names kept in a gauge.
type regionSet struct {
	mu    sync.Mutex
	names map[string]bool
	gauge prometheus.Gauge
}

// set adds or removes a Region.
func (s *regionSet) set(name string, in bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = map[string]bool{}
	}
	if in {
		s.names[name] = true
	} else {
		delete(s.names, name)
	}
	s.gauge.Set(float64(len(s.names)))
}
