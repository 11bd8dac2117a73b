package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

const monitoring = "../../deploy/kustomize/components/monitoring/"

var metricName = regexp.MustCompile(`regionsync_[a-z_]+`)

func knownMetrics() map[string]bool {
	known := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range Collectors() {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fq.FindStringSubmatch(d.String()); m != nil {
				known[m[1]] = true
			}
		}
	}
	return known
}

// checkNames fails for every regionsync_ metric an expression uses that the agent does not export
// (histograms may be used through _bucket, _count and _sum).
func checkNames(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	for _, name := range metricName.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if strings.HasSuffix(name, suffix) && known[strings.TrimSuffix(name, suffix)] {
				base = strings.TrimSuffix(name, suffix)
			}
		}
		if !known[base] {
			t.Errorf("%s uses %s, which the agent does not export", where, name)
		}
	}
}

// The dashboard is valid JSON whose panels query only metrics the agent exports.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(monitoring + "dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	known := knownMetrics()
	if len(dash.Panels) < 8 {
		t.Fatalf("dashboard has %d panels", len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkNames(t, "panel "+p.Title, tg.Expr, known)
		}
	}
}

// The alerting rules use only exported metrics (promtool tests their behaviour: make test-rules).
func TestRulesUseExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(monitoring + "regionsync.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	known := knownMetrics()
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			checkNames(t, "alert "+r.Alert, r.Expr, known)
		}
	}
	if n < 6 {
		t.Fatalf("only %d rules", n)
	}
}
