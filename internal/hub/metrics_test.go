package hub

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// The totals move by each Distribution's change and drop what a forgotten one had; the region
// set counts each region once.
func TestMetricTotals(t *testing.T) {
	value := func(state string) float64 { return testutil.ToFloat64(Regions.WithLabelValues(state)) }
	placed0, failed0, n0 := value("placed"), value("failed"), testutil.ToFloat64(Distributions)
	var tot distributionTotals
	a, b := types.NamespacedName{Namespace: "t", Name: "a"}, types.NamespacedName{Namespace: "t", Name: "b"}
	tot.set(a, regionsyncv1alpha1.DistributionCounts{Placed: 3, Failed: 1})
	tot.set(b, regionsyncv1alpha1.DistributionCounts{Placed: 2})
	tot.set(a, regionsyncv1alpha1.DistributionCounts{Placed: 4})
	if p, f, n := value("placed")-placed0, value("failed")-failed0, testutil.ToFloat64(Distributions)-n0; p != 6 || f != 0 || n != 2 {
		t.Errorf("placed %v failed %v distributions %v, want 6 0 2", p, f, n)
	}
	tot.forget(a)
	tot.forget(a)
	if p, n := value("placed")-placed0, testutil.ToFloat64(Distributions)-n0; p != 2 || n != 1 {
		t.Errorf("after forgetting a: placed %v distributions %v, want 2 1", p, n)
	}

	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test"})
	s := regionSet{gauge: g}
	s.set("us", true)
	s.set("us", true)
	s.set("eu", true)
	s.set("us", false)
	if v := testutil.ToFloat64(g); v != 1 {
		t.Errorf("region set %v, want 1", v)
	}
}
